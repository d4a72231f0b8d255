#!/usr/bin/env python3
"""End-to-end converter benchmark: `embstore convert` against np.loadtxt and pandas.read_csv.

bench/run.py (the full report) runs the same in its conversion phase, with more baselines:
pyarrow.csv and gensim's word2vec reader. Both share bench/harness (the baselines are
harness/contenders/text_parsers.py, run by harness/phases/conversion.py).

Generates the benchmark files (938,280 x 128 float32 values written as np.savetxt would with
fmt='%.18e', its default, and with '%.8g') using bench/gen_text.cc, then, in the same run and on
the same files, times:

  embstore convert FILE OUT --threads 1 / --threads 2 (whole process: read, parse, write, fsync)
  np.loadtxt(FILE, dtype=np.float32)                   (in its own process, parse only)
  pandas.read_csv(FILE, engine='c', header=None, sep=' ')       (float64, as pandas parses)

and prints seconds, MB/s, GB/s per core, peak RSS, the speed-up over both baselines and the
1 -> 2 thread scaling, with the issue's targets next to them. It also checks that embstore's table
equals np.loadtxt's array on a sample of rows (bit for bit, apart from numpy's rare double
rounding, which is counted).

Run with the repository's virtual environment after building (bench targets are on by default):
  .venv/bin/python bench/convert_baselines.py            # full size, a few minutes on 2 cores
  .venv/bin/python bench/convert_baselines.py --quick    # 50,000 rows, seconds
Options: --build-dir (default $EMBSTORE_BUILD_DIR or build/release, then build/dev),
--data-dir (default build/bench-data), --out-dir (tables; default the data dir), --rows, --dim,
--skip-baselines, --json FILE.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from harness.data import SEED_DIM, SEED_ROWS, find_build_dir  # noqa: E402
from harness.phases.conversion import check_sample, run_baseline  # noqa: E402
from harness.processes import measured  # noqa: E402

BUILD_OUTPUTS = ["cli/embstore", "bench/embstore_gen_text"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="50,000 rows instead of 938,280")
    ap.add_argument("--rows", type=int)
    ap.add_argument("--dim", type=int, default=SEED_DIM)
    ap.add_argument("--build-dir")
    ap.add_argument("--data-dir", default=str(ROOT / "build" / "bench-data"))
    ap.add_argument("--out-dir", help="where embstore writes its tables (default: --data-dir); "
                    "a tmpfs such as /dev/shm leaves out the disk's fsync time")
    ap.add_argument("--skip-baselines", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    rows = args.rows or (50_000 if args.quick else SEED_ROWS)
    build = find_build_dir(args.build_dir, BUILD_OUTPUTS, "convert_baselines.py")
    embstore = build / "cli" / "embstore"
    gen = build / "bench" / "embstore_gen_text"
    data = pathlib.Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count()
    print(f"embstore convert benchmark: {rows} x {args.dim} float32, {cores} cores, "
          f"build {build}, tables written to {args.out_dir or data}")
    print("load average at start: %.2f %.2f %.2f (other work on the machine skews every number)"
          % os.getloadavg())
    results = []
    for fmt, label in [("e18", "%.18e"), ("g8", "%.8g")]:
        path = data / f"{fmt}_{rows}x{args.dim}.txt"
        if not path.exists():
            t0 = time.perf_counter()
            subprocess.run([str(gen), str(path) + ".part", str(rows), str(args.dim), fmt],
                           check=True)
            os.replace(str(path) + ".part", path)
            print(f"  generated {path.name} in {time.perf_counter() - t0:.1f} s")
        size = path.stat().st_size
        mb = size / 1e6
        # Warm the page cache so every contender reads from memory.
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
        print(f"\n{label}: {path.name}, {mb:,.0f} MB of text")
        print(f"  {'contender':44s} {'seconds':>8s} {'MB/s':>8s} {'GB/s/core':>9s} "
              f"{'peak RSS':>10s}")
        out_table = pathlib.Path(args.out_dir or data) / f"{fmt}.emb"
        row = {"format": label, "bytes": size, "rows": rows, "dim": args.dim}

        def report(name, secs, threads, rss):
            print(f"  {name:44s} {secs:8.2f} {mb / secs:8.0f} {size / secs / threads / 1e9:9.2f} "
                  f"{rss:8.0f} MiB")

        for threads in sorted({1, 2, cores}):
            secs, rss, _ = measured([embstore, "convert", path, out_table, "--force",
                                     "--threads", threads])
            report(f"embstore convert --threads {threads}", secs, threads, rss)
            row[f"embstore_t{threads}_s"] = secs
            row[f"embstore_t{threads}_rss_mib"] = rss
        if not args.skip_baselines:
            secs, rss, shape = run_baseline("loadtxt", str(path))
            assert shape == (rows, args.dim), shape
            report("np.loadtxt(dtype=float32)", secs, 1, rss)
            row["loadtxt_s"] = secs
            secs, rss, shape = run_baseline("pandas", str(path))
            assert shape == (rows, args.dim), shape
            report("pandas.read_csv(engine='c', sep=' ')", secs, 1, rss)
            row["pandas_s"] = secs
        compared, diff = check_sample(out_table, path, min(rows, 20_000))
        row["sample_values"], row["sample_diff"] = compared, diff
        best = min(row[f"embstore_t{t}_s"] for t in sorted({1, 2, cores}))
        t1 = row["embstore_t1_s"]
        print(f"  per core (1 thread): {size / t1 / 1e9:.2f} GB/s   [target >= 1 GB/s]")
        if 2 in {1, 2, cores} and cores >= 2:
            print(f"  scaling 1 -> 2 threads: {t1 / row['embstore_t2_s']:.2f}x   [target: ~2x]")
        if not args.skip_baselines:
            print(f"  speed-up vs np.loadtxt: {row['loadtxt_s'] / best:.1f}x   "
                  f"vs pandas.read_csv: {row['pandas_s'] / best:.1f}x   [target >= 10x each]")
        peak = max(row[k] for k in row if k.endswith("_rss_mib"))
        print(f"  embstore peak RSS: {peak:.0f} MiB   [target < 256 MiB]")
        print(f"  check: first {compared:,} values equal np.loadtxt's bit for bit except {diff} "
              f"(numpy double-rounds rare halfway cases; embstore equals strtof)")
        results.append(row)
        out_table.unlink(missing_ok=True)
    print("\nload average at end: %.2f %.2f %.2f" % os.getloadavg())
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
