"""Phase lookup: 100,000 random keys from the seed-sized table with keys, from the file and
through a server, verified and not (harness.contenders.lookups), each case in a fresh process.
bench/lookup_bench.py runs the same on its own."""
import os
import pathlib
import subprocess

from harness.data import ROOT, make_test_table, warm
from harness.processes import embstore_server, run_json_child

DEFAULT_KEYS = 100_000
CASES = ("file, verify=False", "file, verified", "server (fresh)", "server (warm)")


def measure(build, work, rows, nkeys):
    """Runs every case on a new rows x 128 table with keys under `work`; returns the results."""
    store = pathlib.Path(work) / "lookup-store"
    store.mkdir(exist_ok=True)
    table = store / "seed.emb"
    make_test_table(build, table, rows, 128, keys=True)
    warm(table)
    try:  # a machine without git (a fresh install, a container) still runs the benchmark
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    res = {"rows": rows, "keys": nkeys, "table_bytes": os.path.getsize(table), "commit": commit}
    for name, verify in (("file, verified", "1"), ("file, verify=False", "0")):
        res[name] = run_json_child("lookup", table, "", nkeys, rows, verify, "1")
    with embstore_server(build, store) as server:
        # The first client makes the server check the keys and blocks; the second finds them
        # checked.
        res["server (fresh)"] = run_json_child("lookup", server.target, "seed", nkeys, rows,
                                               "1", "0")
        res["server (warm)"] = run_json_child("lookup", server.target, "seed", nkeys, rows,
                                              "1", "0")
    table.unlink()
    return res


def markdown(res):
    """The report's table: each case's first lookup and its best again, against unverified."""
    base = res["file, verify=False"]["again"]
    lines = ["| case | first lookup on a mapping | again (best of 3) | again vs unverified |",
             "|---|---:|---:|---:|"]
    for name in CASES:
        r = res[name]
        lines.append(f"| {name} | {r['first'] * 1000:.0f} ms | {r['again'] * 1000:.0f} ms | "
                     f"{r['again'] / base:.2f}x |")
    return lines


def run(ctx):
    return measure(ctx.build, ctx.work, ctx.rows, 10_000 if ctx.quick else DEFAULT_KEYS)
