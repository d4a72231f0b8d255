"""Hostile table files against every reader: the Python loader (rows and keys), the CLI's
inspect, verify and export, and a server (and the clients that pull from it).

Counts per reader: inputs tried, crashes (must be 0), errors of a foreign kind (must be 0), and
silent wrong results (must be 0): a reader that succeeds must return exactly the good table's
values. Run with -s to see the counts."""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ServerProcess, expected_matrix, write_table
from hostile_tables import variants

ROWS, DIM = 500, 8

_PY_READER = r'''
import json, sys
import numpy as np
import embstore
from conftest import expected_matrix
want = expected_matrix(%(rows)d, %(dim)d)
out = open(sys.argv[1], "a")
for path in sys.argv[2:]:
    for reader in ("rows", "rows-unverified-slice", "keys", "keys-list"):
        out.write(json.dumps({"file": path, "reader": reader, "outcome": "started"}) + "\n")
        out.flush()
        try:
            if reader == "rows":
                got, ref = embstore.load(path), want
            elif reader == "rows-unverified-slice":
                got, ref = embstore.load(path, rows=(10, 20), verify=True), want[10:20]
            elif reader == "keys":
                got, ref = embstore.load(path, keys=["k1", "k499"]), want[[1, 499]]
            else:
                got, ref = embstore.Source.resolve(path).keys(None, 0, 3), ["k0", "k1", "k2"]
            ok = (got == ref) if isinstance(ref, list) else (
                got.shape == ref.shape and np.array_equal(got, ref))
            outcome = "ok" if ok else "WRONG"
        except embstore.EmbstoreError as e:
            outcome = "error" if path.rsplit("/", 1)[-1] in str(e) else "error-unnamed: " + str(e)
        except Exception as e:  # a foreign exception type is a defect
            outcome = "FOREIGN %%s: %%s" %% (type(e).__name__, e)
        out.write(json.dumps({"file": path, "reader": reader, "outcome": outcome}) + "\n")
        out.flush()
'''


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory, make_table_bin_module):
    d = tmp_path_factory.mktemp("hostile")
    good = write_table(make_table_bin_module, d / "good.src", ROWS, DIM, keys=True, block_rows=32)
    files = []
    for name, data in variants(good.read_bytes()):
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)
        path = d / f"h_{safe}.emb"
        path.write_bytes(data)
        files.append(path)
    (d / "good.src").rename(d / "good.emb")
    return d, files


@pytest.fixture(scope="module")
def make_table_bin_module():
    from conftest import _find_binary
    return _find_binary("EMBSTORE_MAKE_TABLE_BIN", "tests/embstore_make_test_table")


def _summary(reader, results):
    counts = {}
    for r in results:
        key = r.split(":")[0].split(" ")[0]
        counts[key] = counts.get(key, 0) + 1
    print(f"\nhostile files, {reader}: {len(results)} inputs, {counts}")


def test_python_loader_on_hostile_files(hostile_dir, tmp_path):
    d, files = hostile_dir
    log = tmp_path / "results.jsonl"
    script = tmp_path / "reader.py"
    script.write_text(_PY_READER % {"rows": ROWS, "dim": DIM})
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))
    proc = subprocess.run([sys.executable, str(script), str(log)] + [str(f) for f in files],
                          capture_output=True, text=True, env=env, timeout=600)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    finished = [x for x in lines if x["outcome"] != "started"]
    last = lines[-1] if lines else None
    assert proc.returncode == 0, (f"the reader process died ({proc.returncode}) on "
                                  f"{last}: {proc.stderr[-2000:]}")
    assert len(finished) == 4 * len(files)
    bad = [x for x in finished if x["outcome"].startswith(("WRONG", "FOREIGN", "error-unnamed"))]
    _summary("python", [x["outcome"] for x in finished])
    assert bad == [], bad[:10]


def test_cli_readers_on_hostile_files(embstore_bin, hostile_dir, tmp_path):
    d, files = hostile_dir
    want = expected_matrix(ROWS, DIM)
    results = []
    for f in files:
        for cmd in ("inspect", "verify", "export"):
            args = [str(embstore_bin), cmd, str(f)]
            out = tmp_path / "x.npy"
            if cmd == "export":
                args += [str(out), "--force"]
            r = subprocess.run(args, capture_output=True, text=True, timeout=60)
            if r.returncode not in (0, 1):
                results.append(f"CRASH {cmd} {f.name} rc={r.returncode}: {r.stderr[-300:]}")
            elif r.returncode == 1 and f.name not in r.stderr:
                results.append(f"error-unnamed {cmd} {f.name}: {r.stderr[-300:]}")
            elif cmd == "export" and r.returncode == 0 and not np.array_equal(np.load(out), want):
                results.append(f"WRONG export {f.name}")
            else:
                results.append("ok" if r.returncode == 0 else "error")
    _summary("cli", results)
    assert [r for r in results if r not in ("ok", "error")] == []
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


def test_server_and_its_clients_on_hostile_files(embstore_bin, hostile_dir, tmp_path):
    import embstore
    d, files = hostile_dir
    store = tmp_path / "store"
    store.mkdir()
    for f in files + [d / "good.emb"]:
        os.link(f, store / f.name)
    srv = ServerProcess(embstore_bin, store, tmp_path)
    try:
        deadline = time.monotonic() + 30
        while "good" not in embstore.Source.resolve(srv.unix).list_tables():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        served = set(embstore.Source.resolve(srv.unix).list_tables())
        want = expected_matrix(ROWS, DIM)
        results = []
        for f in files:
            name = f.stem
            for how in ("stream", "keys"):
                try:
                    if how == "stream":
                        got = embstore.load(srv.unix, name, local=False)
                        ok = np.array_equal(got, want)
                    else:
                        got = embstore.load(srv.unix, name, keys=["k3"])
                        ok = np.array_equal(got, want[[3]])
                    results.append("ok" if ok else f"WRONG {how} {name}")
                except embstore.EmbstoreError:
                    results.append("error")
            assert srv.proc.poll() is None, f"the server died on {name}:\n{srv.log()[-3000:]}"
        _summary(f"server ({len(served) - 1} of {len(files)} hostile files served)", results)
        assert [r for r in results if r not in ("ok", "error")] == []
    finally:
        srv.stop()
