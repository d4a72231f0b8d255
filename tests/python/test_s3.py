"""s3:// tables end to end against a real S3 server (SeaweedFS via scripts/s3-server.sh, with
signature checking on): convert to a bucket, inspect/verify/export/pull from it, and `serve
--store s3://... --cache DIR` picking up replaced objects without serving a partial or mixed
table. The server binary comes from `scripts/s3-server.sh --build` (test.sh builds it); without
it these tests skip, unless EMBSTORE_REQUIRE_S3=1 (test.sh, CI) makes that a failure."""
import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import (ROOT, check_python_writers_to, check_sync_from, expected_matrix,
                      savetxt_matrix, wait_for_table, wait_for_version, write_table)

sys.path.insert(0, str(ROOT / "bench"))
from harness.s3_server import built as s3_server_built, s3_server  # noqa: E402

KEY, SECRET = "embstore-test-key", "embstore-test-secret"


class S3:
    def __init__(self, endpoint):
        self.endpoint = endpoint

    def env(self, **extra):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
                   AWS_ENDPOINT_URL=self.endpoint, AWS_REGION="us-east-1",
                   AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
        env.update(extra)
        return env


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    ok, why = s3_server_built()
    if not ok:
        why = f"S3 test server not built: {why} (bash scripts/s3-server.sh --build)"
        if os.environ.get("EMBSTORE_REQUIRE_S3") == "1":
            pytest.fail(why)
        pytest.skip(why)
    with s3_server(tmp_path_factory.mktemp("s3data"), KEY, SECRET) as endpoint:
        server = S3(endpoint)
        # One bucket for the module (convert's upload needs it to exist, as on AWS).
        _make_bucket(server, "tables")
        yield server


def _make_bucket(server, bucket):
    # A signed PUT of the bucket with curl (libcurl's SigV4, as embstore uses it).
    subprocess.run(["curl", "-sf", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3",
                    "--user", f"{KEY}:{SECRET}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                    f"{server.endpoint}/{bucket}"], check=True)


def cli(embstore_bin, args, server, check=True, **env):
    p = subprocess.run([str(embstore_bin)] + [str(a) for a in args], capture_output=True,
                       text=True, env=server.env(**env))
    if check and p.returncode != 0:
        raise AssertionError(f"embstore {args} failed ({p.returncode}): {p.stderr}")
    return p


@pytest.fixture
def table(make_table_bin, tmp_path):
    return write_table(make_table_bin, tmp_path / "items.emb", 20000, 64, keys=True,
                       block_rows=500)


def test_convert_to_a_bucket_then_every_reader(embstore_bin, s3, tmp_path):
    text, want = savetxt_matrix(tmp_path, 3000, 32, 1)
    url = "s3://tables/round/m1.emb"
    out = cli(embstore_bin, ["convert", text, url], s3)
    assert url in out.stdout
    # Existing object: refused without --force, replaced with it.
    again = cli(embstore_bin, ["convert", text, url], s3, check=False)
    assert again.returncode == 1 and "exists; use --force" in again.stderr
    cli(embstore_bin, ["convert", text, url, "--force"], s3)

    info = json.loads(cli(embstore_bin, ["inspect", url, "--json"], s3).stdout)
    assert (info["rows"], info["dim"], info["file"]) == (3000, 32, url)
    assert cli(embstore_bin, ["verify", url], s3).stdout.startswith(f"{url}: ok, 3000 rows x 32")
    cli(embstore_bin, ["export", url, tmp_path / "m1.npy"], s3)
    np.testing.assert_array_equal(np.load(tmp_path / "m1.npy"), want)

    # pull: the whole object straight to .emb (verified), and rows of it to .npy.
    pulled = cli(embstore_bin, ["pull", "--from", "s3://tables/round", "--table", "m1",
                                "--out", tmp_path / "p.emb"], s3)
    assert "every block verified" in pulled.stdout
    cli(embstore_bin, ["export", tmp_path / "p.emb", tmp_path / "p.npy"], s3)
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), want)
    cli(embstore_bin, ["pull", "--from", url, "--rows", "100:250", "--out", tmp_path / "r.npy"], s3)
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), want[100:250])
    # Nothing of the downloads is left in the temporary directory.
    assert not [p for p in os.listdir(os.environ.get("TMPDIR", "/tmp"))
                if p.startswith("embstore-pull-") or p.startswith("embstore-export-")]


def test_bit_identical_round_trip(embstore_bin, s3, table, tmp_path):
    # A table file pulled back is the uploaded file byte for byte (convert uploads what it wrote;
    # here a file made elsewhere goes up through the same upload path by converting its export).
    cli(embstore_bin, ["export", table, tmp_path / "items.npy", "--keys", tmp_path / "keys.txt"],
        s3)
    m = np.load(tmp_path / "items.npy")
    np.testing.assert_array_equal(m, expected_matrix(20000, 64))
    text = tmp_path / "items.vec"
    with open(text, "w") as f:
        f.write(f"{m.shape[0]} {m.shape[1]}\n")
        for key, row in zip(open(tmp_path / "keys.txt").read().split("\n"), m):
            f.write(key + " " + " ".join(f"{v:.9g}" for v in row) + "\n")
    local = tmp_path / "local.emb"
    cli(embstore_bin, ["convert", text, local], s3)
    cli(embstore_bin, ["convert", text, "s3://tables/bits/items.emb"], s3)
    cli(embstore_bin, ["pull", "--from", "s3://tables/bits/items.emb", "--out",
                       tmp_path / "back.emb"], s3)
    a, b = (tmp_path / "back.emb").read_bytes(), local.read_bytes()
    assert len(a) == len(b)
    # Only the creation time in the header differs between two conversions.
    cli(embstore_bin, ["export", tmp_path / "back.emb", tmp_path / "back.npy"], s3)
    np.testing.assert_array_equal(np.load(tmp_path / "back.npy"), m)


def test_errors_name_the_object(embstore_bin, s3, tmp_path):
    missing = cli(embstore_bin, ["inspect", "s3://tables/no/such.emb"], s3, check=False)
    assert missing.returncode == 1
    assert "s3://tables/no/such.emb" in missing.stderr and "no such object" in missing.stderr
    text, _ = savetxt_matrix(tmp_path, 10, 4, 2)
    cli(embstore_bin, ["convert", text, "s3://tables/creds.emb"], s3)
    wrong = cli(embstore_bin, ["inspect", "s3://tables/creds.emb"], s3, check=False,
                AWS_SECRET_ACCESS_KEY="wrong")
    assert wrong.returncode == 1
    assert "access denied" in wrong.stderr and "SignatureDoesNotMatch" in wrong.stderr
    anon = dict(AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="")
    denied = cli(embstore_bin, ["convert", text, "s3://tables/anon.emb"], s3, check=False, **anon)
    assert denied.returncode == 1 and "access denied" in denied.stderr
    prefix = cli(embstore_bin, ["pull", "--from", "s3://tables/round", "--out",
                                tmp_path / "x.emb"], s3, check=False)
    assert prefix.returncode == 1
    assert "no such object" in prefix.stderr and "add --table NAME" in prefix.stderr


def test_serve_from_a_bucket_picks_up_replaced_objects(embstore_bin, s3, tmp_path):
    import embstore
    a, want_a = savetxt_matrix(tmp_path, 4000, 16, 3)
    b, want_b = savetxt_matrix(tmp_path, 4000, 16, 4)
    cli(embstore_bin, ["convert", a, "s3://tables/serving/items.emb"], s3)
    cache = tmp_path / "cache"
    # A unix socket of the test's own: a random TCP port may be another process's.
    target = f"unix:{tmp_path / 'serve.sock'}"
    serve = subprocess.Popen([str(embstore_bin), "serve", "--store", "s3://tables/serving",
                              "--cache", cache, "--listen", target, "--store-poll-s", "0.5",
                              "--poll-interval-ms", "100"], env=s3.env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_table(target, "items")
        np.testing.assert_array_equal(embstore.load(target, "items", local=False), want_a)
        cli(embstore_bin, ["convert", b, "s3://tables/serving/items.emb", "--force"], s3)
        wait_for_version(target, "items", want_a, want_b, timeout=30)
        assert sorted(p for p in os.listdir(cache) if not p.startswith(".")) == ["items.emb"]
    finally:
        serve.terminate()
        err = serve.communicate(timeout=30)[1]
    assert '"table fetched"' in err
    # A restart reuses the cache: nothing is fetched again.
    serve = subprocess.Popen([str(embstore_bin), "serve", "--store", "s3://tables/serving",
                              "--cache", cache, "--listen", target], env=s3.env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_table(target, "items")
        np.testing.assert_array_equal(embstore.load(target, "items", local=False), want_b)
    finally:
        serve.terminate()
        err = serve.communicate(timeout=30)[1]
    synced = [json.loads(line) for line in err.splitlines() if '"store synced"' in line]
    assert synced and synced[0]["fetched"] == 0 and synced[0]["unchanged"] == 1


def _use_s3_in_this_process(server, monkeypatch):
    """The AWS_* variables of `server`, for the embstore package loaded in this process."""
    for k, v in server.env().items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)


def _put(server, path, url):
    bucket_key = url[len("s3://"):]
    subprocess.run(["curl", "-sf", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3",
                    "--user", f"{KEY}:{SECRET}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                    "--upload-file", str(path), f"{server.endpoint}/{bucket_key}"], check=True)


def test_python_writers_to_a_bucket(s3, tmp_path, monkeypatch):
    _use_s3_in_this_process(s3, monkeypatch)
    check_python_writers_to(lambda name: f"s3://tables/written/{name}", tmp_path, monkeypatch)


def test_delta_sync_from_a_bucket(s3, embstore_bin, tmp_path, monkeypatch):
    _use_s3_in_this_process(s3, monkeypatch)
    check_sync_from(lambda name: f"s3://tables/sync/{name}", embstore_bin, tmp_path, s3.env())


def _row_hashes_at(path):
    """(offset, count) of the row_hashes tensor of the table file `path` (safetensors header)."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    begin, end = json.loads(data[8:8 + n])["row_hashes"]["data_offsets"]
    return 8 + n + begin, (end - begin) // 8


def test_a_wrong_stale_or_damaged_delta_never_gives_a_wrong_row(s3, embstore_bin, tmp_path,
                                                                 monkeypatch):
    """The delta object is only a shortcut: rows are taken from it only when they hash to the
    new version's stored hash of the row needed, so a delta that lies, belongs to another
    version or is damaged costs ranged reads, never a wrong result."""
    import embstore
    _use_s3_in_this_process(s3, monkeypatch)
    rng = np.random.default_rng(5)
    rows, dim = 30_000, 64
    v1 = rng.standard_normal((rows, dim)).astype(np.float32)
    v2, v3 = v1.copy(), v1.copy()
    ids = np.sort(rng.choice(rows, 300, replace=False))
    v2[ids] += 1
    v3[ids] -= 1
    url = "s3://tables/hostile/t.emb"
    embstore.save(v1, url, force=True)
    assert embstore.save(v2, url, force=True)["delta_rows"] == len(ids)
    good = tmp_path / "good.delta"
    subprocess.run(["curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                    f"{KEY}:{SECRET}", "-o", str(good),
                    f"{s3.endpoint}/tables/hostile/t.emb.delta"], check=True)

    def update_from_v1():
        copy = v1.copy()
        s = embstore.update(copy, url)
        np.testing.assert_array_equal(copy, embstore.load(url))
        assert s["changed_rows"] == len(ids) and s["refetched_blocks"] == 0
        return s

    assert update_from_v1()["delta_rows"] == len(ids)
    # Its stored row hashes swapped pairwise: every row claims another's hash, and none is used.
    liar = tmp_path / "liar.delta"
    data = bytearray(good.read_bytes())
    at, n = _row_hashes_at(good)
    hashes = np.frombuffer(bytes(data[at:at + 8 * n]), "<u8").copy()
    hashes[0::2], hashes[1::2] = hashes[1::2].copy(), hashes[0::2].copy()
    data[at:at + 8 * n] = hashes.tobytes()
    liar.write_bytes(bytes(data))
    _put(s3, liar, url + ".delta")
    assert update_from_v1()["delta_rows"] == 0
    # A flipped byte in its rows: it fails its block checksum and is not used at all.
    damaged = tmp_path / "damaged.delta"
    data = bytearray(good.read_bytes())
    data[int.from_bytes(data[:8], "little") + 8 + 100] ^= 0x40
    damaged.write_bytes(bytes(data))
    _put(s3, damaged, url + ".delta")
    assert update_from_v1()["delta_rows"] == 0
    # Version 3 replaces version 2; version 2's delta put back is another version's: ignored.
    assert embstore.save(v3, url, force=True)["delta_rows"] == len(ids)
    _put(s3, good, url + ".delta")
    assert update_from_v1()["delta_rows"] == 0


def test_python_load_fetches_only_the_blocks_it_reads(s3, make_table_bin, tmp_path, monkeypatch):
    import embstore
    _use_s3_in_this_process(s3, monkeypatch)
    path = write_table(make_table_bin, tmp_path / "items.emb", 20000, 64, keys=True,
                       block_rows=500)
    want = expected_matrix(20000, 64)
    _put(s3, path, "s3://tables/py/items.emb")
    url = "s3://tables/py/items.emb"
    np.testing.assert_array_equal(embstore.load(url), want)
    np.testing.assert_array_equal(embstore.load(url, rows=(700, 1900)), want[700:1900])
    got = embstore.load(url, keys=["k19999", "k3", "nope"], missing="zeros")
    np.testing.assert_array_equal(got[:2], want[[19999, 3]])
    assert not got[2].any()
    assert embstore.Source.resolve(url).describe()["name"] == "items"

    # A flipped byte in the last block: rows elsewhere load without fetching it, the whole
    # table fails naming the object and the block.
    data = bytearray(path.read_bytes())
    info = json.loads(subprocess.run([str(make_table_bin.parent.parent / "cli" / "embstore"),
                                      "inspect", str(path), "--json"], capture_output=True,
                                     text=True, check=True).stdout)
    data[info["data_offset"] + 19999 * 64 * 4] ^= 0x10
    bad = tmp_path / "bad.emb"
    bad.write_bytes(bytes(data))
    _put(s3, bad, "s3://tables/py/bad.emb")
    np.testing.assert_array_equal(embstore.load("s3://tables/py/bad.emb", rows=(0, 1000)),
                                  want[:1000])
    with pytest.raises(embstore.errors.CorruptionError,
                       match=r"s3://tables/py/bad.emb.*block 39 |block 39 .*s3://tables/py/bad.emb"):
        embstore.load("s3://tables/py/bad.emb")
    # The CLI's verify downloads it as it is and names the object and the bad block.
    v = subprocess.run([str(make_table_bin.parent.parent / "cli" / "embstore"), "verify",
                        "s3://tables/py/bad.emb"], capture_output=True, text=True, env=s3.env())
    assert v.returncode == 1
    assert "block 39 " in v.stderr and "'s3://tables/py/bad.emb': 1 of 40 blocks" in v.stderr
    with pytest.raises(embstore.errors.NotFoundError, match="no such object"):
        embstore.load("s3://tables/py/missing.emb")


def test_usage_errors_name_the_argument(embstore_bin, s3, tmp_path):
    text, _ = savetxt_matrix(tmp_path, 10, 4, 6)
    serve = cli(embstore_bin, ["serve", "--store", "s3://tables/serving", "--listen",
                               "127.0.0.1:0"], s3, check=False)
    assert serve.returncode == 2 and "needs --cache DIR" in serve.stderr  # a usage error
    prefix = cli(embstore_bin, ["convert", text, "s3://tables/dir/"], s3, check=False)
    assert prefix.returncode == 2 and "names a bucket or prefix" in prefix.stderr
    bucket = cli(embstore_bin, ["inspect", "s3://Bad_Bucket!/x.emb"], s3, check=False)
    assert bucket.returncode == 2 and "is not a bucket name" in bucket.stderr
    half = cli(embstore_bin, ["inspect", "s3://tables/x.emb"], s3, check=False,
               AWS_SECRET_ACCESS_KEY="")
    assert half.returncode == 2 and "half given" in half.stderr


def test_a_signal_during_convert_to_a_bucket_leaves_no_scratch_directory(embstore_bin, s3,
                                                                          tmp_path):
    # convert to s3:// writes the table into a private directory under $TMPDIR first. Reading
    # stdin, which stays open, it waits for more input once its temporary file exists, so the
    # signal always lands mid-write: the directory and everything in it must go.
    import signal
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()

    def default_signals():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    proc = subprocess.Popen([str(embstore_bin), "convert", "-", "s3://tables/cut.emb"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=s3.env(TMPDIR=str(scratch_root)),
                            preexec_fn=default_signals)

    def writing():
        return any(".tmp-" in f.name for d in scratch_root.iterdir() for f in d.iterdir())

    lines = (" ".join(["-0.0123456789"] * 128) + "\n").encode() * 1000  # 1.8 MB
    try:
        for _ in range(200):  # up to 360 MB
            proc.stdin.write(lines)
            proc.stdin.flush()
            if writing():
                break
        assert writing(), "no temporary file after 360 MB"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
        proc.kill()
        proc.wait()
    assert list(scratch_root.iterdir()) == []
    assert cli(embstore_bin, ["inspect", "s3://tables/cut.emb"], s3, check=False).returncode != 0


def test_rows_of_an_object_fetch_only_their_blocks(embstore_bin, make_table_bin, s3, tmp_path):
    # 200k x 64 f32 (51 MB) without keys, blocks of 1000 rows: the first 1000 rows are one block.
    rows, dim = 200_000, 64
    path = write_table(make_table_bin, tmp_path / "seed.emb", rows, dim, block_rows=1000)
    url = "s3://tables/partial/seed.emb"
    up = subprocess.run(["curl", "-sf", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3",
                         "--user", f"{KEY}:{SECRET}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                         "--upload-file", str(path), f"{s3.endpoint}/tables/partial/seed.emb"])
    assert up.returncode == 0
    out = cli(embstore_bin, ["export", url, tmp_path / "r.npy", "--rows", "0:1000"], s3)
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), expected_matrix(rows, dim)[:1000])
    fetched_mb = float(out.stdout.split("(")[-1].split(" MB transferred")[0])
    assert fetched_mb * 1e6 < 0.02 * path.stat().st_size, out.stdout
    # The same through the prefix and --table, and pull's .npy rows.
    cli(embstore_bin, ["export", "s3://tables/partial", tmp_path / "t.npy", "--table", "seed",
                       "--rows", "199000:"], s3)
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), expected_matrix(rows, dim)[199000:])
    pulled = cli(embstore_bin, ["pull", "--from", url, "--rows", "5000:6000", "--out",
                                tmp_path / "p.npy"], s3)
    assert "MB of the object fetched" in pulled.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"),
                                  expected_matrix(rows, dim)[5000:6000])
    # inspect reads no rows; a prefix without --table says what to add.
    info = json.loads(cli(embstore_bin, ["inspect", url, "--json"], s3).stdout)
    assert (info["rows"], info["dim"], info["file_bytes"]) == (rows, dim, path.stat().st_size)
    bare = cli(embstore_bin, ["export", "s3://tables/partial/", tmp_path / "x.npy"], s3,
               check=False)
    assert bare.returncode == 2 and "add --table NAME" in bare.stderr
    wrong = cli(embstore_bin, ["export", url, tmp_path / "x.npy", "--table", "other"], s3,
                check=False)
    assert wrong.returncode == 2 and "holds table 'seed', not 'other'" in wrong.stderr
    assert not (tmp_path / "x.npy").exists()


def test_a_manifest_whose_shards_are_objects_and_a_file(s3, embstore_bin, make_table_bin,
                                                         tmp_path, monkeypatch):
    # Shards of any kind in one manifest: an object, a table under a prefix, and a file next to
    # the manifest; each read through its own source, fetching only the blocks it needs.
    import embstore
    _use_s3_in_this_process(s3, monkeypatch)
    whole = write_table(make_table_bin, tmp_path / "items.emb", 3000, 16, keys=True,
                        block_rows=100)
    want = expected_matrix(3000, 16)
    cuts = [(0, 1000), (1000, 2200), (2200, 3000)]
    for i, (b, e) in enumerate(cuts):
        cli(embstore_bin, ["pull", "--from", whole, "--rows", f"{b}:{e}",
                           "--out", tmp_path / f"items-{i}.emb"], s3)
    _put(s3, tmp_path / "items-0.emb", "s3://tables/shards/items-0.emb")
    _put(s3, tmp_path / "items-1.emb", "s3://tables/shards/items-1.emb")
    targets = ["s3://tables/shards/items-0.emb", "s3://tables/shards/", "./items-2.emb"]
    manifest = tmp_path / "items.shards.json"
    manifest.write_text(json.dumps({
        "format": "embstore-shards/1", "table": "items", "rows": 3000, "dim": 16, "dtype": "F32",
        "shards": [{"begin": b, "end": e, "target": t, "table": f"items-{i}"}
                   for i, ((b, e), t) in enumerate(zip(cuts, targets))]}))

    np.testing.assert_array_equal(embstore.load(manifest), want)
    np.testing.assert_array_equal(embstore.load(manifest, rows=(950, 2250)), want[950:2250])
    got = embstore.load(manifest, keys=["k2999", "k1500", "k3", "nope"], missing="zeros")
    np.testing.assert_array_equal(got[:3], want[[2999, 1500, 3]])
    assert not got[3].any()
    src = embstore.Source.resolve(manifest)
    assert src.describe()["has_keys"] is True
    assert src.keys(begin=998, end=1002) == ["k998", "k999", "k1000", "k1001"]

    # The CLI reads the same manifest through the same resolver.
    out = tmp_path / "part.npy"
    cli(embstore_bin, ["export", manifest, out, "--rows", "990:2210"], s3)
    np.testing.assert_array_equal(np.load(out), want[990:2210])

    # A shard object that is missing is named, with the manifest and the shard.
    manifest.write_text(manifest.read_text().replace("shards/items-0.emb", "gone/items-0.emb"))
    with pytest.raises(embstore.errors.NotFoundError, match="shard 0") as e:
        embstore.load(manifest, rows=(0, 10))
    assert "s3://tables/gone/items-0.emb" in str(e.value)
