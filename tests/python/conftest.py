"""Shared fixtures: where the built binaries are, and tables of known values."""
import os
import pathlib
import signal
import subprocess
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _find_binary(env_var, relpath):
    explicit = os.environ.get(env_var)
    if explicit:
        return pathlib.Path(explicit)
    build_dir = pathlib.Path(os.environ.get("EMBSTORE_BUILD_DIR", ROOT / "build" / "dev"))
    path = build_dir / relpath
    if not path.exists():
        pytest.fail(f"{path} is missing: build first (scripts/test.sh does) or set {env_var}")
    return path


@pytest.fixture(scope="session")
def embstore_bin():
    """Path of the built `embstore` binary."""
    return _find_binary("EMBSTORE_BIN", "cli/embstore")


@pytest.fixture(scope="session")
def make_table_bin():
    """Path of the `embstore_make_test_table` tool."""
    return _find_binary("EMBSTORE_MAKE_TABLE_BIN", "tests/embstore_make_test_table")


def expected_matrix(rows, dim):
    """The values embstore_make_test_table writes: ((31r + 7c) % 256 - 128) / 4."""
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(dim, dtype=np.int64)[None, :]
    return (((r * 31 + c * 7) % 256 - 128) / 4).astype(np.float32)


@pytest.fixture
def make_table(make_table_bin, tmp_path):
    """make_table(rows, dim, dtype="f32", keys=False, block_rows=0) -> path of a new table."""
    counter = [0]

    def make(rows, dim, dtype="f32", keys=False, block_rows=0, unicode_keys=False):
        counter[0] += 1
        path = tmp_path / f"t{counter[0]}.emb"
        cmd = [str(make_table_bin), str(path), "--rows", str(rows), "--dim", str(dim),
               "--dtype", dtype, "--block-rows", str(block_rows)]
        if keys:
            cmd.append("--keys")
        if unicode_keys:
            cmd.append("--unicode-keys")
        subprocess.run(cmd, check=True)
        return path

    return make


def as_from_a_terminal():
    """A subprocess's preexec_fn: SIGINT, SIGTERM and SIGHUP unblocked and at their defaults, as a
    shell at a terminal starts a command. A runner started in the background (nohup, `&` in a
    script: CI) leaves SIGINT and SIGHUP ignored, and an ignored signal stays ignored across exec:
    the CLI then rightly leaves it alone (docs: "those not ignored"), and Python installs no
    KeyboardInterrupt handler, so the child would never see the signal."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
    for s in sigs:
        signal.signal(s, signal.SIG_DFL)


def run(cmd, **kw):
    """Runs a command and returns the CompletedProcess with text output (never raises)."""
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def flip_bits(path, offset, mask=0x10):
    """XORs the byte at `offset` of the file `path` with `mask`, in place (doing it again undoes
    it)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


def savetxt_matrix(tmp_path, rows, dim, seed):
    """A random rows x dim matrix written with np.savetxt('%.8g') to tmp_path/m<seed>.txt;
    returns (the path, the matrix as np.loadtxt reads it back: what convert must give)."""
    import numpy as np
    m = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    path = tmp_path / f"m{seed}.txt"
    np.savetxt(path, m, fmt="%.8g")
    return path, np.loadtxt(path, dtype=np.float32)


def write_table(make_table_bin, path, rows, dim, dtype="f32", keys=False, block_rows=0):
    """Writes a table of known values (expected_matrix) at `path`; keys are "k<row>"."""
    cmd = [str(make_table_bin), str(path), "--rows", str(rows), "--dim", str(dim), "--dtype", dtype,
           "--block-rows", str(block_rows), "--force"]
    if keys:
        cmd.append("--keys")
    subprocess.run(cmd, check=True)
    return path


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`embstore serve` over a store directory, on a unix socket and a loopback TCP port,
    rescanning the directory every `poll_interval_ms`."""

    def __init__(self, embstore_bin, store, workdir, extra=(), poll_interval_ms=100):
        import time
        self.store = store
        self.unix = f"unix:{workdir / 'embstore.sock'}"
        self.tcp = f"127.0.0.1:{_free_port()}"
        self.log_path = workdir / "server.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(embstore_bin), "serve", "--store", str(store), "--listen", self.unix,
             "--listen", self.tcp, "--poll-interval-ms", str(poll_interval_ms), "--log-level",
             "warn", *extra],
            stdout=self._log, stderr=self._log)
        deadline = time.monotonic() + 30
        while not (workdir / "embstore.sock").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("embstore serve did not start:\n" + self.log())
            time.sleep(0.05)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture
def server(embstore_bin, tmp_path):
    """A running `embstore serve` whose store directory is server.store (initially empty)."""
    store = tmp_path / "store"
    store.mkdir()
    srv = ServerProcess(embstore_bin, store, tmp_path)
    yield srv
    srv.stop()


def wait_for_version(target, name, old, new, timeout):
    """Loads table `name` from the server at `target` (streamed) until it is `new`; every answer
    before that must be all of `old`: one whole version, never a mix. Fails after `timeout`
    seconds."""
    import embstore
    from embstore import errors
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = embstore.load(target, name, local=False)
        except errors.FailedPreconditionError as e:
            # The reload landed mid-read: the client refuses the mix, and says so.
            assert "changed" in str(e) and "during the load" in str(e), e
            assert time.monotonic() < deadline, f"{name} on {target}: {e}"
            continue
        assert (got == old).all() or (got == new).all()  # one version, never a mix
        if (got == new).all():
            return
        assert time.monotonic() < deadline, f"{name} on {target} still the old version"
        time.sleep(0.2)


def wait_for_table(target, name, timeout=10.0):
    """Waits until the server at `target` lists `name` (it rescans its directory)."""
    import time
    import embstore
    deadline = time.monotonic() + timeout
    while True:
        try:
            if name in embstore.Source.resolve(target).list_tables():
                return
        except embstore.EmbstoreError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"server {target} never listed table {name!r}")
        time.sleep(0.05)


def check_python_writers_to(url_of, tmp_path, monkeypatch):
    """embstore.save and embstore.convert to an object store (s3:// or hdfs://; `url_of(name)`
    gives a new object's URL): round trips, no-clobber without force=True, an error mid-save
    leaving no object and no scratch file behind."""
    import embstore
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    a = np.random.default_rng(9).standard_normal((30_000, 40)).astype(np.float32)  # 4.8 MB
    keys = [f"k{i}" for i in range(len(a))]
    url = url_of("saved.emb")
    r = embstore.save(a, url, keys=keys, metadata={"step": "1200"})
    assert r["path"] == url and r["uploaded_bytes"] > a.nbytes
    np.testing.assert_array_equal(embstore.load(url), a)
    np.testing.assert_array_equal(embstore.load(url, keys=["k29999", "k0"]), a[[29999, 0]])
    with pytest.raises(embstore.errors.AlreadyExistsError, match="force=True"):
        embstore.save(a[:10], url)
    embstore.save(a[:10], url, force=True, dtype="bf16")
    assert embstore.load(url).shape == (10, 40)
    # An error mid-save (an overflow in the last chunk): the message names the URL, not the
    # scratch file, and no object appears.
    bad = a.copy()
    bad[29_000, 3] = 1e9
    bad_url = url_of("bad.emb")
    with pytest.raises(embstore.errors.OutOfRangeError, match=rf"'{bad_url}'.*row 29000, column 3"):
        embstore.save(bad, bad_url, dtype="f16", chunk_rows=4096)
    with pytest.raises(embstore.errors.NotFoundError):
        embstore.load(bad_url)
    text = tmp_path / "m.txt"
    np.savetxt(text, a[:500], fmt="%.9g")
    s = embstore.convert(text, url_of("converted.emb"))
    assert s["rows"] == 500
    np.testing.assert_array_equal(embstore.load(url_of("converted.emb")), a[:500])
    assert list(scratch.iterdir()) == []


def check_sync_from(url_of, embstore_bin, tmp_path, env=None):
    """Delta syncs from an object store (s3:// or hdfs://; `url_of(name)` gives a new object's
    URL): in memory and with `pull --update`, by stored row hashes (the changed rows taken from
    the delta object that saving the new version over the old one uploaded beside it) and, for a
    table saved without them, by checksum blocks."""
    import embstore
    rng = np.random.default_rng(11)
    rows, dim = 40_000, 128
    old = rng.standard_normal((rows, dim)).astype(np.float32)
    new = old.copy()
    ids = np.sort(rng.choice(rows, rows // 100, replace=False))
    new[ids] += 1
    url = url_of("synced.emb")
    embstore.save(old, url)
    local = tmp_path / "copy.emb"
    r = run([embstore_bin, "pull", "--from", url, "--out", local], env=env)
    assert r.returncode == 0, r.stderr
    copy = embstore.load(url)
    # One opening of the object serves every read of a Source: local= (which only servers
    # heed) does not open it again (its header and checksums fetched twice before).
    src = embstore.Source.resolve(url)
    assert src.table(None, local=False) is src.table(None) is src.table(None, local=True)
    saved = embstore.save(new, url, force=True)
    assert saved["delta_rows"] == len(ids), saved["delta_skipped"]
    s = embstore.update(copy, url)
    assert np.array_equal(copy, new)
    assert s["by_rows"] and s["changed_rows"] == len(ids) and s["refetched_blocks"] == 0
    assert s["delta_rows"] == len(ids)
    assert s["row_bytes_moved"] < 2 * len(ids) * dim * 4  # the rows, not their blocks
    # The delta object crossed once: its frame (header, hashes; the first read's 16 KiB spare
    # included) is not fetched again for its rows.
    assert s["row_bytes_moved"] <= saved["delta_bytes"] + (16 << 10), (s, saved)
    r = run([embstore_bin, "pull", "--from", url, "--out", local, "--update"], env=env)
    assert r.returncode == 0 and f"{len(ids)} of {rows} rows changed" in r.stdout, r.stderr
    assert f"{len(ids)} of them from its delta object" in r.stdout
    assert np.array_equal(embstore.load(local), new)
    # With a spare (--spare): the first sync keeps the file it replaces, the next patches that
    # spare (two versions behind) and still takes from the object only this version's rows, from
    # its delta object; those of the version before come from the file the spare replaces.
    prev = new
    for k in range(2):
        nxt = prev.copy()
        step = np.sort(rng.choice(rows, rows // 100, replace=False))
        nxt[step] += 2 + k
        assert embstore.save(nxt, url, force=True)["delta_rows"] == len(step)
        r = run([embstore_bin, "pull", "--from", url, "--out", local, "--update", "--spare"],
                env=env)
        assert r.returncode == 0, r.stderr
        assert (f"{len(step)} of {rows} rows changed" in r.stdout and
                f"{len(step)} of them from its delta object" in r.stdout), r.stdout
        assert ("the spare was patched in place" in r.stdout) == (k == 1), r.stdout
        assert np.array_equal(embstore.load(local), nxt)
        prev = nxt
    # Without stored row hashes, an object is compared by blocks: right, but more moves.
    plain = url_of("plain.emb")
    embstore.save(old, plain, row_hashes=False)
    copy = old.copy()
    embstore.save(new, plain, force=True, row_hashes=False)
    s = embstore.update(copy, plain)
    assert np.array_equal(copy, new) and not s["by_rows"]


@pytest.fixture
def small_disk(tmp_path):
    """A 20 MB tmpfs (needs root, as CI has; the tests that use it skip elsewhere)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
