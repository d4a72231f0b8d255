#!/usr/bin/env python3
"""End-to-end converter benchmark: `embstore convert` against np.loadtxt and pandas.read_csv.

bench/run.py (the full report) imports this module's helpers and runs more baselines from
BASELINE: pyarrow.csv and gensim's word2vec reader.

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
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

SEED_ROWS, SEED_DIM = 938_280, 128


def find_build_dir(explicit):
    candidates = [explicit] if explicit else []
    if os.environ.get("EMBSTORE_BUILD_DIR"):
        candidates.append(os.environ["EMBSTORE_BUILD_DIR"])
    candidates += [ROOT / "build" / "release", ROOT / "build" / "dev"]
    for c in candidates:
        c = pathlib.Path(c)
        if (c / "cli" / "embstore").exists() and (c / "bench" / "embstore_gen_text").exists():
            return c
    sys.exit("no build with cli/embstore and bench/embstore_gen_text found; build first "
             "(cmake --preset release && cmake --build --preset release) or pass --build-dir")


GNU_TIME = "/usr/bin/time"


def measured(cmd):
    """Runs cmd; returns (wall seconds, peak RSS in MiB, stdout text). Fails loudly on error.

    Peak RSS comes from GNU time when it is installed: the kernel's maxrss of a process started
    straight from this one would include this Python process's size at fork. Without GNU time
    the wait4() figure is used, an upper bound."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r") as rss_file:
        full = [str(c) for c in cmd]
        use_time = os.access(GNU_TIME, os.X_OK)
        if use_time:
            full = [GNU_TIME, "-f", "%M", "-o", rss_file.name] + full
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text, errtext = out.read().decode(), err.read().decode()
        rss = usage.ru_maxrss / 1024.0
        if use_time:
            rss = int(rss_file.read().split()[-1]) / 1024.0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(map(str, cmd))}\n{errtext}")
    return wall, rss, text


BASELINE = r"""
import sys, time, numpy as np
path, which = sys.argv[1], sys.argv[2]
if which == "pandas":
    import pandas as pd
elif which == "pyarrow":
    import pyarrow.csv as pacsv
elif which == "gensim":
    from gensim.models import KeyedVectors
t0 = time.perf_counter()
if which == "loadtxt":
    a = np.loadtxt(path, dtype=np.float32)
elif which == "pandas":
    a = pd.read_csv(path, engine="c", header=None, sep=" ").to_numpy()
elif which == "pyarrow":
    # Multithreaded C++ reader; float32 columns asked for, then one (rows, dim) array as the
    # other contenders produce.
    with open(path, "rb") as f:
        dim = len(f.readline().split())
    names = [f"c{i}" for i in range(dim)]
    t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=names),
                       parse_options=pacsv.ParseOptions(delimiter=" "),
                       convert_options=pacsv.ConvertOptions(
                           column_types={n: "float32" for n in names}))
    a = np.empty((t.num_rows, dim), dtype=np.float32)
    for i, c in enumerate(t.columns):
        a[:, i] = c.to_numpy()
else:  # gensim, on the word2vec text form ("ROWS DIM" header, then "word v1 ... vDIM")
    a = KeyedVectors.load_word2vec_format(path, binary=False).vectors
print(time.perf_counter() - t0, a.shape[0], a.shape[1])
"""

# What each baseline in BASELINE runs, as reports name it.
BASELINE_LABELS = {
    "loadtxt": "np.loadtxt(dtype=float32)",
    "pandas": "pandas.read_csv(engine='c')",
    "pyarrow": "pyarrow.csv.read_csv (float32)",
    "gensim": "gensim load_word2vec_format",
}


def run_baseline(which, path):
    """Parse time measured inside the baseline's own process (interpreter start excluded)."""
    _, rss, out = measured([sys.executable, "-c", BASELINE, path, which])
    secs, rows, dim = out.split()[-3:]
    return float(secs), rss, (int(rows), int(dim))


def read_matrix_rows(table_path, rows):
    """First `rows` rows of a table's f32 matrix, memory-mapped (docs/FORMAT.md: an 8-byte
    header length, the JSON header, the data buffer). Keeps this process small: a child's peak
    RSS as the kernel reports it starts from its parent's size at fork."""
    import struct
    import numpy as np
    with open(table_path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    emb = header["embedding"]
    assert emb["dtype"] == "F32", emb
    begin = 8 + n + emb["data_offsets"][0]
    dim = emb["shape"][1]
    m = np.memmap(table_path, dtype="<f4", mode="r", offset=begin, shape=(rows, dim))
    return np.array(m)


def check_sample(table_path, text_path, rows):
    """Compares the first `rows` rows with np.loadtxt; returns (compared, differing values)."""
    import numpy as np
    ours = read_matrix_rows(table_path, rows)
    ref = np.loadtxt(text_path, dtype=np.float32, max_rows=rows)
    diff = int(np.count_nonzero(ours.view(np.uint32) != ref.view(np.uint32)))
    return ours.size, diff


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
    build = find_build_dir(args.build_dir)
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
