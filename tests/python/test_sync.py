"""Delta syncs: a copy of a table brought up to a new version by the rows that changed, from a
file, a server, (test_s3.py, test_hdfs.py) object stores: `embstore.update`,
`embstore.load(update=True)` and `embstore pull --update`. The result is always the new version
bit for bit; only the changed rows and the hashes move; bad or stale hashes cost a block refetch,
never a wrong row; a version change mid-sync leaves the copy as it was."""
import json
import os
import pathlib
import re
import shutil
import struct
import tempfile
import time

import numpy as np
import pytest

import embstore
from conftest import run, wait_for_table, wait_for_version
from embstore import errors

ROWS, DIM = 40_000, 128  # 20.5 MB, 1 MiB blocks of 2048 rows (the seed table's shape of row)


def versions(seed=0, changed=0.01, clustered=False):
    rng = np.random.default_rng(seed)
    old = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    new = old.copy()
    n = int(ROWS * changed)
    if clustered:
        start = rng.integers(0, ROWS - n)
        ids = np.arange(start, start + n)
    else:
        ids = np.sort(rng.choice(ROWS, n, replace=False))
    new[ids] += rng.standard_normal((n, DIM)).astype(np.float32)
    return old, new, ids


def _row_hashes_span(path):
    """(offset, count) of the row_hashes tensor's bytes in a table file (docs/FORMAT.md)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    b, e = header["row_hashes"]["data_offsets"]
    return 8 + n + b, (e - b) // 8


@pytest.mark.parametrize("clustered", [False, True])
def test_update_in_memory_from_a_file(tmp_path, clustered):
    old, new, ids = versions(1, clustered=clustered)
    embstore.save(new, tmp_path / "t.emb")
    copy = old.copy()
    s = embstore.update(copy, tmp_path / "t.emb")
    assert np.array_equal(copy, new)
    assert s["changed_rows"] == len(ids) and s["by_rows"] and not s["up_to_date"]
    # Where the time went: each phase was timed, and together they fit in the whole.
    phases = [s["digest_seconds"], s["fetch_seconds"], s["check_seconds"]]
    assert phases[0] > 0 and phases[1] > 0 and phases[2] >= 0, s
    assert sum(phases) <= s["seconds"], s
    again = embstore.update(copy, tmp_path / "t.emb")
    assert again["up_to_date"] and again["changed_rows"] == 0


def test_update_from_a_server_moves_only_hashes_and_changed_rows(server, tmp_path):
    old, new, ids = versions(2)
    embstore.save(old, server.store / "t.emb")
    wait_for_table(server.unix, "t")
    copy = embstore.load(server.unix, "t", local=False)
    embstore.save(new, server.store / "t.emb", force=True)
    wait_for_version(server.unix, "t", old, new, timeout=20)
    s = embstore.update(copy, server.unix, "t", local=False)
    assert np.array_equal(copy, new)
    assert s["changed_rows"] == len(ids) and s["refetched_blocks"] == 0
    # One 8-byte hash per group of 16 rows, then the row hashes of the groups that changed, the
    # changed rows themselves, a little framing.
    digest = 8 * (ROWS // 16) + 8 * 16 * len(set(ids // 16))
    assert digest <= s["digest_bytes"] < digest + 4096
    assert s["row_bytes_moved"] == len(ids) * DIM * 4
    assert s["moved_bytes"] / s["table_bytes"] < 0.04
    # A table saved without row hashes: the server computes them.
    embstore.save(old, server.store / "u.emb", row_hashes=False)
    wait_for_table(server.unix, "u")
    copy_u = old.copy()
    embstore.save(new, server.store / "u.emb", force=True, row_hashes=False)
    wait_for_version(server.unix, "u", old, new, timeout=20)
    s = embstore.update(copy_u, server.unix, "u", local=False)
    assert np.array_equal(copy_u, new) and s["changed_rows"] == len(ids)
    # load(update=True) returns the same array, updated.
    stale = old.copy()
    got = embstore.load(server.unix, "t", out=stale, update=True, local=False)
    assert got is stale and np.array_equal(stale, new)


def test_a_digest_of_many_pages_from_a_server(server):
    """More rows than one RowHashes reply of row hashes holds (262,144): with 12-byte rows a
    checksum block is 87,381 rows. The rows that changed sit on the edges of those pages, of
    blocks and of groups of 16 rows, and in the last group, which holds one row."""
    rows, dim = 600_001, 3
    rng = np.random.default_rng(5)
    old = rng.standard_normal((rows, dim)).astype(np.float32)
    new = old.copy()
    ids = np.array([0, 262_143, 262_144, 524_287, 524_288, rows - 1])
    new[ids] += 1
    embstore.save(old, server.store / "p.emb")
    wait_for_table(server.unix, "p")
    embstore.save(new, server.store / "p.emb", force=True)
    wait_for_version(server.unix, "p", old, new, timeout=20)
    copy = old.copy()
    s = embstore.update(copy, server.unix, "p", local=False)
    assert np.array_equal(copy, new)
    assert s["changed_rows"] == len(ids) and s["refetched_blocks"] == 0
    groups = 8 * ((rows + 15) // 16)  # one hash per group of 16 rows, the last one 1 row
    changed = 8 * (16 * 5 + 1)  # the row hashes of the 6 groups that changed
    assert groups + changed <= s["digest_bytes"] < groups + changed + 4096


def test_a_version_change_mid_sync_leaves_the_copy_as_it_was(server):
    old, new, _ = versions(3)
    embstore.save(old, server.store / "t.emb")
    wait_for_table(server.unix, "t")
    src = embstore.Source.resolve(server.unix)
    src.describe("t", local=False)  # pins this version
    embstore.save(new, server.store / "t.emb", force=True)
    wait_for_version(server.unix, "t", old, new, timeout=20)
    copy = np.zeros_like(old)
    with pytest.raises(errors.FailedPreconditionError):
        embstore.update(copy, src, "t", local=False)
    assert not copy.any()


def test_wrong_row_hashes_are_refused_or_cost_a_block_never_a_wrong_row(tmp_path, embstore_bin):
    old, new, ids = versions(4)
    embstore.save(old, tmp_path / "old.emb")
    embstore.save(new, tmp_path / "new.emb")
    # The new table claims its first changed row is unchanged: its stored hash is the old one's.
    off_new, _ = _row_hashes_span(tmp_path / "new.emb")
    off_old, _ = _row_hashes_span(tmp_path / "old.emb")
    r = int(ids[0])
    with open(tmp_path / "old.emb", "rb") as f:
        f.seek(off_old + 8 * r)
        stale = f.read(8)
    with open(tmp_path / "new.emb", "r+b") as f:
        f.seek(off_new + 8 * r)
        f.write(stale)
    v = run([embstore_bin, "verify", tmp_path / "new.emb"])
    assert v.returncode == 1 and f"hash of row {r} does not match" in v.stderr, v.stderr
    # The checksum written with the row hashes no longer matches: the sync refuses the table,
    # naming it, and leaves the copy as it was.
    copy = old.copy()
    with pytest.raises(errors.CorruptionError, match="row hashes do not match their checksum"):
        embstore.update(copy, tmp_path / "new.emb")
    assert np.array_equal(copy, old)
    # A table written before that checksum existed (the entry taken out of its header, which
    # keeps its length): the sync checks every block of its result and fetches the one that the
    # wrong hash hid.
    _drop_metadata(tmp_path / "new.emb", "embstore.row_hashes.checksum")
    s = embstore.update(copy, tmp_path / "new.emb")
    assert np.array_equal(copy, new)
    assert s["refetched_blocks"] == 1 and s["changed_rows"] == len(ids) - 1


def _drop_metadata(path, key):
    """Takes `key` out of a table file's header metadata in place, the header padded with spaces
    to its old length (safetensors allows them)."""
    with open(path, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        del header["__metadata__"][key]
        text = json.dumps(header, separators=(",", ":")).encode()
        assert len(text) <= n
        f.seek(8)
        f.write(text + b" " * (n - len(text)))


def test_shape_or_dtype_changes_mean_a_full_fetch(tmp_path):
    old, new, _ = versions(5)
    embstore.save(new[:-1], tmp_path / "t.emb")
    copy = old.copy()
    s = embstore.update(copy, tmp_path / "t.emb")
    assert s["needs_full"] and "is now" in s["full_reason"]
    assert np.array_equal(copy, old)
    with pytest.raises(errors.InvalidArgumentError, match="is now"):
        embstore.load(tmp_path / "t.emb", out=copy, update=True)
    assert np.array_equal(copy, old)
    # Whatever an array of the right shape holds, it ends up as the table.
    junk = np.full_like(new[:-1], np.nan)
    s = embstore.update(junk, tmp_path / "t.emb")
    assert np.array_equal(junk, new[:-1]) and s["changed_rows"] == ROWS - 1
    with pytest.raises(errors.InvalidArgumentError, match="update=True"):
        embstore.load(tmp_path / "t.emb", update=True)


def test_a_source_that_cannot_be_opened_leaves_the_copy_and_stops_its_hashing(tmp_path):
    # The copy's rows are hashed from the start, while the source is opened; when it cannot be,
    # the error comes, the hashing stops with it, and the copy is as it was.
    from conftest import _free_port
    old, _, _ = versions(6)
    copy = old.copy()
    for _ in range(3):
        with pytest.raises(errors.UnavailableError):
            embstore.update(copy, f"127.0.0.1:{_free_port()}", "t", timeout=5)
    with pytest.raises(errors.NotFoundError):
        embstore.update(copy, tmp_path / "missing.emb")
    assert np.array_equal(copy, old)


def test_pull_update_writes_the_new_version_atomically(server, tmp_path, embstore_bin):
    old, new, ids = versions(6)
    embstore.save(old, server.store / "t.emb")
    wait_for_table(server.unix, "t")
    out = tmp_path / "copy.emb"
    # No copy yet: a full fetch, said so.
    r = run([embstore_bin, "pull", "--from", server.unix, "--table", "t", "--out", out,
             "--update", "--no-local"])
    assert r.returncode == 0 and "full fetch" in r.stderr and "does not exist" in r.stderr
    r = run([embstore_bin, "pull", "--from", server.unix, "--table", "t", "--out", out,
             "--update", "--no-local"])
    assert r.returncode == 0 and "up to date" in r.stdout, r.stdout + r.stderr
    reader = embstore.load(out, copy=False)  # a reader holding the old file keeps it whole
    embstore.save(new, server.store / "t.emb", force=True)
    wait_for_version(server.unix, "t", old, new, timeout=20)
    r = run([embstore_bin, "pull", "--from", server.unix, "--table", "t", "--out", out,
             "--update", "--no-local"])
    assert r.returncode == 0, r.stderr
    assert f"{len(ids)} of {ROWS} rows changed (compared by row hashes)" in r.stdout, r.stdout
    assert re.search(r"in [0-9.]+ s \(hashes [0-9.]+ s, rows [0-9.]+ s, check [0-9.]+ s, "
                     r"new file [0-9.]+ s\)", r.stdout), r.stdout
    pct = float(r.stdout.split("MB moved (")[1].split("%")[0])
    assert pct < 4, r.stdout
    assert np.array_equal(embstore.load(out), new) and np.array_equal(reader, old)
    assert run([embstore_bin, "verify", out]).returncode == 0
    assert sorted(os.listdir(tmp_path)).count("copy.emb") == 1
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".copy.emb.tmp")]
    # A new shape: the whole table, said so.
    embstore.save(new[:100], server.store / "t.emb", force=True)
    deadline = time.monotonic() + 20
    while embstore.Source.resolve(server.unix).describe("t", local=False)["rows"] != 100:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    r = run([embstore_bin, "pull", "--from", server.unix, "--table", "t", "--out", out,
             "--update", "--no-local"])
    assert r.returncode == 0 and "full fetch" in r.stderr and "is now 100 x 128" in r.stderr
    assert np.array_equal(embstore.load(out), new[:100])
    bad = run([embstore_bin, "pull", "--from", server.unix, "--table", "t", "--out",
               tmp_path / "x.npy", "--update"])
    assert bad.returncode == 2 and "--update" in bad.stderr


def test_pull_update_keeps_keys_and_a_local_source(tmp_path, embstore_bin):
    old, new, ids = versions(7)
    keys = [f"w{i}" for i in range(ROWS)]
    embstore.save(old, tmp_path / "a.emb", keys=keys)
    shutil.copy(tmp_path / "a.emb", tmp_path / "copy.emb")
    embstore.save(new, tmp_path / "a.emb", keys=keys, force=True)
    r = run([embstore_bin, "pull", "--from", tmp_path / "a.emb", "--out", tmp_path / "copy.emb",
             "--update"])
    assert r.returncode == 0 and f"{len(ids)} of {ROWS} rows changed" in r.stdout, r.stderr
    assert np.array_equal(embstore.load(tmp_path / "copy.emb", keys=["w7", "w39999"]),
                          new[[7, 39999]])


def chain(seed, n):
    """n versions of a table, each with 1% of its rows (at random ids) changed from the one
    before; and the ids changed at each step."""
    rng = np.random.default_rng(seed)
    out = [rng.standard_normal((ROWS, DIM)).astype(np.float32)]
    steps = []
    for _ in range(n - 1):
        nxt = out[-1].copy()
        ids = np.sort(rng.choice(ROWS, ROWS // 100, replace=False))
        nxt[ids] += rng.standard_normal((len(ids), DIM)).astype(np.float32)
        out.append(nxt)
        steps.append(ids)
    return out, steps


@pytest.fixture(params=["disk", "tmpfs"])
def spare_dir(request, tmp_path):
    """Where a copy and its spare live: the test's directory (a disk), and tmpfs, where the
    spare is patched through a mapping."""
    if request.param == "disk":
        (tmp_path / "copies").mkdir()
        yield tmp_path / "copies"
        return
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    d = tempfile.mkdtemp(prefix="embstore-spare-", dir="/dev/shm")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_pull_update_with_a_spare_patches_it_and_swaps_it_in(server, spare_dir, embstore_bin):
    v, steps = chain(9, 5)
    out, spare = spare_dir / "copy.emb", spare_dir / ".copy.emb.spare"
    pull = [embstore_bin, "pull", "--from", server.unix, "--table", "t", "--out", out,
            "--update", "--spare", "--no-local"]

    def publish(k):
        embstore.save(v[k], server.store / "t.emb", force=True)
        wait_for_version(server.unix, "t", v[k - 1], v[k], timeout=20)

    embstore.save(v[0], server.store / "t.emb")
    wait_for_table(server.unix, "t")
    assert run(pull).returncode == 0 and np.array_equal(embstore.load(out), v[0])
    # No spare yet: a new file, and the one it replaced kept as the spare.
    publish(1)
    r = run(pull)
    assert r.returncode == 0, r.stderr
    assert "a new file was written (there is no spare yet)" in r.stdout, r.stdout
    assert np.array_equal(embstore.load(out), v[1]) and np.array_equal(embstore.load(spare), v[0])
    # The spare, two versions behind, patched in place and swapped in: only the rows of this
    # version were fetched, those of the version before came from the file it replaced.
    publish(2)
    spare_inode, out_inode = os.stat(spare).st_ino, os.stat(out).st_ino
    r = run(pull)
    assert r.returncode == 0, r.stderr
    from_file = len(np.setdiff1d(steps[0], steps[1]))
    assert (f"{len(steps[1])} of {ROWS} rows changed (compared by row hashes)" in r.stdout and
            f"the spare was patched in place ({from_file} more rows from the file it replaced) "
            "and swapped in" in r.stdout), r.stdout
    assert re.search(r"spare patched [0-9.]+ s\)", r.stdout), r.stdout
    assert float(r.stdout.split("MB moved (")[1].split("%")[0]) < 4, r.stdout
    assert np.array_equal(embstore.load(out), v[2]) and np.array_equal(embstore.load(spare), v[1])
    assert os.stat(out).st_ino == spare_inode and os.stat(spare).st_ino == out_inode
    assert run([embstore_bin, "verify", out]).returncode == 0
    assert sorted(os.listdir(spare_dir)) == [".copy.emb.spare", "copy.emb"]
    # A reader still holding the spare (the version before, opened before the last swap): the
    # spare is left alone for it, a new file written, and the spare's name goes to what it
    # replaced.
    publish(3)
    reader = embstore.load(spare, copy=False)
    r = run(pull)
    assert r.returncode == 0, r.stderr
    assert "a new file was written (spare" in r.stdout and "open or mapped elsewhere" in r.stdout
    assert np.array_equal(embstore.load(out), v[3]) and np.array_equal(embstore.load(spare), v[2])
    assert np.array_equal(reader, v[1])
    del reader
    # And with nobody holding it, the spare is used again.
    publish(4)
    r = run(pull)
    assert r.returncode == 0 and "the spare was patched in place" in r.stdout, r.stdout
    assert np.array_equal(embstore.load(out), v[4]) and np.array_equal(embstore.load(spare), v[3])
    assert run([embstore_bin, "verify", out]).returncode == 0
    bad = run([embstore_bin, "pull", "--from", server.unix, "--table", "t", "--out", out,
               "--spare"])
    assert bad.returncode == 2 and "--spare goes with --update" in bad.stderr


def test_a_spare_is_only_ever_hashed_whatever_it_holds(spare_dir, embstore_bin):
    """A spare torn by a crash mid-patch, damaged, of another shape or no table at all: the
    result is the new version bit for bit, and a spare that cannot be used is replaced."""
    v, _ = chain(10, 3)
    src, out, spare = spare_dir / "src.emb", spare_dir / "copy.emb", spare_dir / ".copy.emb.spare"
    embstore.save(v[2], src)

    def update(copy_of, spare_of):
        embstore.save(v[copy_of], out, force=True)
        if isinstance(spare_of, bytes):
            spare.write_bytes(spare_of)
        elif spare_of is not None:
            embstore.save(spare_of, spare, force=True)
        r = run([embstore_bin, "pull", "--from", src, "--out", out, "--update", "--spare"])
        assert r.returncode == 0, r.stderr
        assert np.array_equal(embstore.load(out), v[2]), r.stdout
        assert run([embstore_bin, "verify", out]).returncode == 0
        return r.stdout

    # Torn: rows half written and the row hashes it stores wrong (a crash mid-patch leaves the
    # header of the version before over rows of both).
    embstore.save(v[0], spare)
    offset, count = _row_hashes_span(spare)
    with open(spare, "r+b") as f:
        f.seek(offset)
        f.write(os.urandom(count * 8 // 3))
        rows_at = offset - ROWS * DIM * 4 - 8 * ((ROWS + 2047) // 2048)
        for r in (0, 17, ROWS // 2, ROWS - 1):
            f.seek(rows_at + r * DIM * 4 + 40)
            f.write(os.urandom(100))
    torn = spare.read_bytes()
    assert "the spare was patched in place" in update(1, torn)
    # Another shape, or not a table: a new file, and the copy it replaced is the spare now.
    said = update(1, v[0][:100])
    assert "a new file was written (the spare is 100 x 128 F32)" in said, said
    assert np.array_equal(embstore.load(spare), v[1])
    embstore.save(v[0], spare, force=True, metadata={"note": "x" * 5000})  # a longer header
    said = update(1, None)
    assert ("a new file was written (table '" in said and
            "holds its matrix at byte 8192; this version's header puts it at byte 4096" in said), said
    assert np.array_equal(embstore.load(spare), v[1])
    said = update(1, b"not a table")
    assert "a new file was written (the spare could not be read" in said, said
    assert np.array_equal(embstore.load(spare), v[1])
    # The copy's own stored row hashes only pick which of its rows to read: wrong ones cost a
    # fetch or a read, never a wrong row.
    embstore.save(v[1], out, force=True)
    embstore.save(v[0], spare, force=True)
    offset, count = _row_hashes_span(out)
    with open(out, "r+b") as f:
        f.seek(offset)
        f.write(os.urandom(count * 8))
    r = run([embstore_bin, "pull", "--from", src, "--out", out, "--update", "--spare"])
    assert r.returncode == 0 and "the spare was patched in place" in r.stdout, r.stdout + r.stderr
    assert np.array_equal(embstore.load(out), v[2])
    assert run([embstore_bin, "verify", out]).returncode == 0
    # A spare that is the copy itself under a second name is never written in place.
    embstore.save(v[1], out, force=True)
    spare.unlink()
    os.link(out, spare)
    r = run([embstore_bin, "pull", "--from", src, "--out", out, "--update", "--spare"])
    assert r.returncode == 0 and "has 2 names" in r.stdout, r.stdout
    assert np.array_equal(embstore.load(out), v[2]) and np.array_equal(embstore.load(spare), v[1])


def test_a_copy_or_spare_that_is_a_symbolic_link(spare_dir, embstore_bin):
    """--out naming a symbolic link: the new version replaces the link, as every output does, and
    neither the file it named nor the spare is touched. A spare that is a link is not written
    through: the file replaced is kept as the spare instead."""
    v, _ = chain(11, 3)
    src, out, spare = spare_dir / "src.emb", spare_dir / "copy.emb", spare_dir / ".copy.emb.spare"
    named = spare_dir / "named.emb"
    embstore.save(v[2], src)
    pull = [embstore_bin, "pull", "--from", src, "--out", out, "--update", "--spare"]
    embstore.save(v[1], named)
    embstore.save(v[0], spare)
    out.symlink_to(named.name)
    r = run(pull)
    assert r.returncode == 0, r.stderr
    assert f"a new file was written ('{out}' is a symbolic link, which the new file replaces)" \
        in r.stdout, r.stdout
    assert not out.is_symlink() and np.array_equal(embstore.load(out), v[2])
    assert np.array_equal(embstore.load(named), v[1])
    assert not spare.is_symlink() and np.array_equal(embstore.load(spare), v[0])
    # The spare a link (to the file named before): refused, the link replaced by the file the new
    # version replaced, and the file it named left as it was.
    embstore.save(v[1], out, force=True)
    spare.unlink()
    spare.symlink_to(named.name)
    r = run(pull)
    assert r.returncode == 0, r.stderr
    assert f"a new file was written (spare '{spare}' is a symbolic link, not a file)" in r.stdout, \
        r.stdout
    assert np.array_equal(embstore.load(out), v[2])
    assert not spare.is_symlink() and np.array_equal(embstore.load(spare), v[1])
    assert np.array_equal(embstore.load(named), v[1])
    assert sorted(os.listdir(spare_dir)) == [".copy.emb.spare", "copy.emb", "named.emb",
                                             "src.emb"]


def test_a_spare_takes_keys_of_another_length(spare_dir, embstore_bin):
    v, steps = chain(11, 3)
    keys = [[f"w{i}" for i in range(ROWS)], [f"word-{i}" for i in range(ROWS)],
            [f"k{i}" for i in range(ROWS)]]
    src, out = spare_dir / "src.emb", spare_dir / "copy.emb"
    embstore.save(v[0], out, keys=keys[0])
    for k in (1, 2):
        embstore.save(v[k], src, keys=keys[k], force=True)
        r = run([embstore_bin, "pull", "--from", src, "--out", out, "--update", "--spare"])
        assert r.returncode == 0, r.stderr
        assert ("spare was patched" in r.stdout) == (k == 2), r.stdout
        assert np.array_equal(embstore.load(out), v[k])
        assert np.array_equal(embstore.load(out, keys=keys[k][::997]), v[k][::997])
        assert run([embstore_bin, "verify", out]).returncode == 0
    # The spare held the longest keys; this version's are shorter, and the file is cut to them.
    assert os.path.getsize(out) == os.path.getsize(src)


def test_a_sharded_source_is_fetched_whole(tmp_path):
    old, new, _ = versions(8)
    embstore.save(new[:20000], tmp_path / "m-0.emb")
    embstore.save(new[20000:], tmp_path / "m-1.emb")
    manifest = {"format": "embstore-shards/1", "table": "m", "rows": ROWS, "dim": DIM,
                "dtype": "F32", "shards": [
                    {"begin": 0, "end": 20000, "target": "./m-0.emb", "table": "m-0"},
                    {"begin": 20000, "end": ROWS, "target": "./m-1.emb", "table": "m-1"}]}
    (tmp_path / "m.shards.json").write_text(json.dumps(manifest))
    copy = old.copy()
    s = embstore.update(copy, tmp_path / "m.shards.json")
    assert s["needs_full"] and "no row hashes" in s["full_reason"]
    with pytest.warns(UserWarning, match="full fetch"):
        embstore.load(tmp_path / "m.shards.json", out=copy, update=True)
    assert np.array_equal(copy, new)
