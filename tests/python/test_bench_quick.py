"""Smoke test of the benchmark report harness: `bench/run.py --quick` runs every phase on small
data and writes its JSON, plots and report. No speed is asserted (speed belongs to bench/)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _build_dir():
    return pathlib.Path(os.environ.get("EMBSTORE_BUILD_DIR", ROOT / "build" / "dev"))


# About two minutes on a quiet machine: the run starts some twenty TensorFlow and PyTorch processes.
# A loaded CI machine can double that, so the limits leave room.
@pytest.mark.timeout(900)
def test_quick_run_writes_results_plots_and_report(tmp_path):
    build = _build_dir()
    cache = build / "CMakeCache.txt"
    if cache.exists() and "EMBSTORE_BUILD_BENCH:BOOL=OFF" in cache.read_text():
        pytest.skip(f"{build} is configured without the benchmarks (EMBSTORE_BUILD_BENCH=OFF)")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--out-dir",
                        str(out), "--build-dir", str(build), "--work-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=840)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["quick"] is True
    assert results["errors"] == {}
    machine = results["machine"]
    assert machine["cores"] >= 1 and machine["embstore_active_kernel"] in (
        "scalar", "avx2", "avx512", "neon")
    assert set(machine["versions"]) >= {"numpy", "pandas", "pyarrow", "embstore"}
    assert len(results["load_average"]["start"]) == 3 and len(results["load_average"]["end"]) == 3
    # Every area of the report measured something, side by side with its baselines.
    conv = results["conversion"]["formats"]
    assert [f["format"] for f in conv] == ["%.18e", "%.8g"]
    for f in conv:
        assert set(f["baselines"]) == {"loadtxt", "pandas", "pyarrow"}
        assert f["sample_values_compared"] > 0
    assert conv[1]["word2vec"]["gensim"]["seconds"] > 0
    assert len(results["scaling"]["points"]) >= 3
    assert all(p["client"]["peak_rss_mib"] > 0 for p in results["scaling"]["points"])
    assert "np.load" in results["local"]["contenders"]
    assert "safetensors.load_file" in results["local"]["contenders"]
    sv = results["serving"]
    assert sv["serve_bench"]["concurrent"] and sv["pull_bench"]["streamed"]
    assert sv["python_client"] and sv["arrow_flight"]["bytes_per_s"] > 0
    assert [c["mode"] for c in results["seed"]["cases"]] == ["constant", "embstore"]
    ways = results["distributed"]["ways"]
    assert set(ways) == {"every rank loads all", "load_sharded", "broadcast_load"}
    # Sharded and broadcast loads read the table once; every rank loading it, once per rank.
    table_bytes = results["distributed"]["table_bytes"]
    assert ways["load_sharded"]["server_bytes"] == table_bytes
    assert ways["every rank loads all"]["server_bytes"] == results["distributed"]["ranks"] * \
        table_bytes
    # A partial export of the S3 object moves its rows' block, not the whole table: 1000 rows
    # lie in one 1 MiB checksum block, a tenth of the quick run's 10 MB table.
    store = results["object_store"]
    assert 0 < store["partial"]["transferred_bytes"] < 0.15 * store["bytes"]
    assert store["partial"]["exported_bytes"] > 0
    assert any(name.startswith("DType/") for name in results["micro"]["store_bench"])
    assert any(name.startswith("Checksum64") for name in results["micro"]["store_bench"])
    assert results["ratios"]
    # At least three plots, all written, and a report that links them.
    assert len(results["plots"]) >= 3
    report = (out / "benchmarks.md").read_text()
    for name in results["plots"]:
        assert (out / name).stat().st_size > 0
        assert f"({'./' + name})" in report
    assert "## Where embstore is behind" in report
    assert "### Distributed start: 4 torch.distributed ranks from a server" in report


def test_builds_bench_compares_two_installs_and_writes_its_ratios(tmp_path, embstore_bin):
    """bench/builds_bench.py with this environment as both builds: every figure it reports is
    there, and each build ran its own CLI."""
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "builds_bench.py"), "--a",
                        sys.executable, "--b", sys.executable, "--cli-a", str(embstore_bin),
                        "--cli-b", str(embstore_bin), "--rows", "3000", "--dim", "16", "--pairs",
                        "2", "--repeat", "1", "--work-dir", str(tmp_path), "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert (r["rows"], r["dim"]) == (3000, 16)
    for name in ("convert", "load_copy", "load_view"):
        assert r[name]["pairs"] == 2 and r[name]["a_median_s"] > 0 and r[name]["b_median_s"] > 0
        assert 0 < r[name]["ratio_min"] <= r[name]["ratio_median"] <= r[name]["ratio_max"]
    assert r["convert"]["text_mb"] > 0 and r["load_copy"]["table_mb"] > 0
    assert r["a"]["cli"] == r["b"]["cli"] == str(embstore_bin)
