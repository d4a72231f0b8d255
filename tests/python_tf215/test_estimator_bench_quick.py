"""Smoke test of bench/estimator_bench.py: `--quick` runs every case on small tables and writes
its JSON. No speed is asserted (speed belongs to bench/); the full run's 2 GB case is in
docs/PYTHON.md, "The seed's Estimator program, measured"."""
import json
import os
import subprocess
import sys

from conftest import ROOT


def test_quick_run_measures_both_ways(tmp_path):
    build = os.environ.get("EMBSTORE_BUILD_DIR", str(ROOT / "build" / "dev"))
    out = tmp_path / "results.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "estimator_bench.py"), "--quick",
                        "--build-dir", build, "--work-dir", str(tmp_path),
                        "--model-dirs", str(tmp_path), "--json", str(out)],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    results = {(r["mode"], r["model"]): r for r in json.loads(out.read_text())}
    assert set(results) == {(w, m) for w in ("constant", "embstore") for m in ("item_mat", "stream")}
    assert all(r["ok"] for r in results.values()), results
    for way in ("constant", "embstore"):
        assert results[way, "item_mat"]["ckpt0_equals_table"] is True
    # The seed's way carries the table in the graph; embstore's graph stays small.
    table = results["constant", "item_mat"]["table_bytes"]
    assert results["constant", "item_mat"]["largest_const_bytes"] >= table
    for model in ("item_mat", "stream"):
        assert results["embstore", model]["largest_meta_bytes"] < 1 << 20
        assert results["embstore", model]["largest_const_bytes"] <= 64 << 10
    assert results["embstore", "stream"]["rows_trained"] == results["embstore", "stream"]["rows"]
