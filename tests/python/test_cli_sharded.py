"""`embstore pull --manifest`: a table split by row ranges over three `embstore serve` processes.

The shards are cut from one table with `embstore pull --rows`, the recipe docs/DEPLOY.md gives.
"""
import json
import subprocess
import time

import numpy as np
import pytest

from conftest import ServerProcess, _free_port, expected_matrix, run, write_table

ROWS, DIM = 3000, 8
BOUNDS = [0, 1000, 2200, ROWS]


def serve(embstore_bin, store, workdir, listen):
    workdir.mkdir(exist_ok=True)
    log = open(workdir / "server.log", "wb")
    proc = subprocess.Popen([str(embstore_bin), "serve", "--store", str(store), "--listen", listen,
                             "--log-level", "warn"], stdout=log, stderr=log)
    ok = run([embstore_bin, "health", "--from", listen, "--wait", "30", "--quiet"])
    assert ok.returncode == 0, (workdir / "server.log").read_text()
    return proc


def stop(proc):
    proc.terminate()
    proc.wait(timeout=15)


@pytest.fixture
def shards(embstore_bin, make_table_bin, tmp_path):
    """Three servers, each serving one row range of a 3000 x 8 table; yields (manifest, procs)."""
    origin_store = tmp_path / "origin"
    origin_store.mkdir()
    write_table(make_table_bin, origin_store / "items.emb", ROWS, DIM, keys=True, block_rows=64)
    origin = ServerProcess(embstore_bin, origin_store, tmp_path)
    procs, targets = [], []
    try:
        for i in range(3):
            store = tmp_path / f"store{i}"
            store.mkdir()
            out = run([embstore_bin, "pull", "--from", origin.unix, "--table", "items",
                       "--rows", f"{BOUNDS[i]}:{BOUNDS[i + 1]}", "--out", store / f"items-{i}.emb"])
            assert out.returncode == 0, out.stderr
        origin.stop()
        for i in range(3):
            targets.append(f"127.0.0.1:{_free_port()}")
            procs.append(serve(embstore_bin, tmp_path / f"store{i}", tmp_path / f"srv{i}",
                               targets[-1]))
        manifest = {
            "format": "embstore-shards/1", "table": "items", "rows": ROWS, "dim": DIM,
            "dtype": "F32",
            "shards": [{"begin": BOUNDS[i], "end": BOUNDS[i + 1], "target": targets[i],
                        "table": f"items-{i}"} for i in range(3)],
        }
        path = tmp_path / "items.shards.json"
        path.write_text(json.dumps(manifest, indent=2))
        yield path, procs, targets
    finally:
        origin.stop()
        for p in procs:
            if p.poll() is None:
                stop(p)


def test_pull_whole_table_and_row_ranges_from_three_servers(embstore_bin, shards, tmp_path):
    manifest, _, _ = shards
    want = expected_matrix(ROWS, DIM)
    out = run([embstore_bin, "pull", "--manifest", manifest, "--out", tmp_path / "all.npy",
               "--no-local"])
    assert out.returncode == 0, out.stderr
    assert "from 3 of 3 shards" in out.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "all.npy"), want)

    out = run([embstore_bin, "pull", "--manifest", manifest, "--rows", "1500:2100",
               "--out", tmp_path / "one.npy"])
    assert out.returncode == 0, out.stderr
    assert "from 1 of 3 shards" in out.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "one.npy"), want[1500:2100])

    # .emb: the keys come from every shard, in row order.
    dest = tmp_path / "part.emb"
    out = run([embstore_bin, "pull", "--manifest", manifest, "--rows", "990:2210", "--out", dest,
               "--no-local"])
    assert out.returncode == 0, out.stderr
    info = json.loads(run([embstore_bin, "inspect", dest, "--json"]).stdout)
    assert (info["rows"], info["dim"], info["has_keys"]) == (1220, DIM, True)
    assert info["first_keys"][:2] == ["k990", "k991"]
    assert run([embstore_bin, "verify", dest]).returncode == 0


def test_pull_fails_naming_the_shard_whose_server_is_down(embstore_bin, shards, tmp_path):
    manifest, procs, targets = shards
    stop(procs[1])
    dest = tmp_path / "x.npy"
    out = run([embstore_bin, "pull", "--manifest", manifest, "--out", dest, "--timeout", "2"])
    assert out.returncode == 1
    assert "shard 1" in out.stderr and targets[1] in out.stderr and "items-1" in out.stderr
    assert str(manifest) in out.stderr
    assert not dest.exists()
    # Rows held by the other shards still load.
    out = run([embstore_bin, "pull", "--manifest", manifest, "--rows", ":1000", "--out", dest])
    assert out.returncode == 0, out.stderr


def test_pull_waits_for_a_server_that_comes_back(embstore_bin, shards, tmp_path):
    manifest, procs, targets = shards
    stop(procs[2])
    dest = tmp_path / "all.npy"
    pull = subprocess.Popen([str(embstore_bin), "pull", "--manifest", str(manifest),
                             "--out", str(dest), "--no-local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    procs[2] = serve(embstore_bin, tmp_path / "store2", tmp_path / "srv2b", targets[2])
    stdout, stderr = pull.communicate(timeout=60)
    assert pull.returncode == 0, stderr
    assert "shard 2" in stderr and "unreachable, retrying" in stderr
    np.testing.assert_array_equal(np.load(dest), expected_matrix(ROWS, DIM))


def test_bad_manifests_are_usage_errors_naming_the_file(embstore_bin, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({
        "format": "embstore-shards/1", "table": "t", "rows": 10, "dim": 2, "dtype": "F32",
        "shards": [{"begin": 0, "end": 4, "target": "a:1", "table": "t0"},
                   {"begin": 5, "end": 10, "target": "b:1", "table": "t1"}]}))
    out = run([embstore_bin, "pull", "--manifest", bad, "--out", tmp_path / "x.npy"])
    assert out.returncode == 2
    assert str(bad) in out.stderr and "shard 1" in out.stderr and "begins at row 5" in out.stderr
    out = run([embstore_bin, "pull", "--manifest", bad, "--from", "a:1", "--out", tmp_path / "x.npy"])
    assert out.returncode == 2
