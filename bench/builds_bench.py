#!/usr/bin/env python3
"""Two builds of embstore side by side: converter and load throughput, as ratios A/B.

    python bench/builds_bench.py --a VENV_A/bin/python --b VENV_B/bin/python

Each interpreter must import an embstore; its CLI is the `embstore` next to the interpreter
(--cli-a/--cli-b to name another). On the same generated text matrix (--rows x --dim, as
np.savetxt writes it with '%.8g', in its word2vec form) it runs, alternating A B A B so the
machine's drift falls on both:

  convert   `embstore convert SRC DST --threads T` (one process per run; wall time)
  load      embstore.load(table) into a new array (copy) and as a view, in a fresh interpreter
            each round: the best of --repeat calls after one warm-up, the file in the page cache

and prints each build's median and the median of the per-pair ratios A/B (above 1: A is slower),
then writes them as JSON with --json. Made for comparing the portable wheels with the Debian build
(docs/PYTHON.md, "Installing") and the abi3 wheel with a version-specific one; any two installs
work. Nothing is asserted: these machines are shared and noisy.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from harness import data  # noqa: E402
from harness.timing import log  # noqa: E402

LOAD_CHILD = r"""
import sys, time, json
import embstore
path, repeat = sys.argv[1], int(sys.argv[2])
out = {"kernel": embstore.active_kernel}
for name, copy in (("copy", True), ("view", False)):
    embstore.load(path, copy=copy)
    best = 1e9
    for _ in range(repeat):
        t0 = time.perf_counter()
        a = embstore.load(path, copy=copy)
        best = min(best, time.perf_counter() - t0)
        del a
    out[name] = best
print(json.dumps(out))
"""


def write_matrix(path, rows, dim):
    """A rows x dim word2vec text file, values as np.savetxt's '%.8g' writes them."""
    if path.exists():
        return
    import numpy as np
    rng = np.random.default_rng(938280)
    with open(f"{path}.part", "w") as f:
        f.write(f"{rows} {dim}\n")
        fmt = "w%d " + " ".join(["%.8g"] * dim) + "\n"
        for start in range(0, rows, 10_000):
            block = rng.standard_normal((min(10_000, rows - start), dim), dtype=np.float32)
            f.write("".join(fmt % ((start + i,) + tuple(r)) for i, r in enumerate(block)))
    os.replace(f"{path}.part", path)


def cli_of(python, explicit):
    if explicit:
        return explicit
    cli = pathlib.Path(python).parent / "embstore"
    if not os.access(cli, os.X_OK):
        sys.exit(f"builds_bench: no embstore command next to {python}; pass --cli-a/--cli-b")
    return str(cli)


def check_import(python):
    p = subprocess.run([python, "-c", "import embstore; print(embstore.__file__, "
                        "embstore.active_kernel)"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"builds_bench: {python} cannot import embstore:\n{p.stderr}")
    return p.stdout.strip()


def summary(a, b):
    ratios = [x / y for x, y in zip(a, b)]
    return {"a_median_s": statistics.median(a), "b_median_s": statistics.median(b),
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "pairs": len(ratios)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--a", required=True, help="Python interpreter of build A")
    ap.add_argument("--b", required=True, help="Python interpreter of build B")
    ap.add_argument("--cli-a", help="embstore command of build A")
    ap.add_argument("--cli-b", help="embstore command of build B")
    ap.add_argument("--rows", type=int, default=200_000, help="rows (default 200000)")
    ap.add_argument("--dim", type=int, default=128, help="values per row (default 128)")
    ap.add_argument("--threads", type=int, default=0, help="convert threads (default: all)")
    ap.add_argument("--pairs", type=int, default=5, help="A/B pairs per figure (default 5)")
    ap.add_argument("--repeat", type=int, default=5, help="loads per round (default 5)")
    ap.add_argument("--work-dir", help="where the generated files go (default: /dev/shm)")
    ap.add_argument("--json", help="write the results there")
    args = ap.parse_args()
    if args.rows < 1 or args.dim < 1 or args.pairs < 1 or args.repeat < 1:
        sys.exit("builds_bench: --rows, --dim, --pairs and --repeat must be at least 1")
    builds = {"a": (args.a, cli_of(args.a, args.cli_a)), "b": (args.b, cli_of(args.b, args.cli_b))}
    results = {"rows": args.rows, "dim": args.dim, "threads": args.threads}
    for k, (py, cli) in builds.items():
        results[k] = {"python": py, "cli": cli, "embstore": check_import(py)}
        log(f"build {k.upper()}: {py} ({results[k]['embstore']}), {cli}")
    need = args.rows * args.dim * 30
    with data.work_dir("embstore-builds-bench-", need, args.work_dir) as tmp:
        tmp = pathlib.Path(tmp)
        src = tmp / "matrix.w2v.txt"
        log(f"writing a {args.rows} x {args.dim} word2vec text matrix")
        write_matrix(src, args.rows, args.dim)
        data.warm(src)
        mb = src.stat().st_size / 1e6
        times = {"a": [], "b": []}
        for i in range(args.pairs + 1):
            for k, (_, cli) in builds.items():
                dst = tmp / f"{k}.emb"
                t0 = time.perf_counter()
                subprocess.run([cli, "convert", str(src), str(dst), "--force", "--threads",
                                str(args.threads)], check=True, stdout=subprocess.DEVNULL)
                if i:  # the first pair warms both up
                    times[k].append(time.perf_counter() - t0)
        results["convert"] = summary(times["a"], times["b"])
        results["convert"]["text_mb"] = mb
        log("convert: A {:.0f} MB/s, B {:.0f} MB/s, A/B {:.3f}".format(
            mb / results["convert"]["a_median_s"], mb / results["convert"]["b_median_s"],
            results["convert"]["ratio_median"]))
        table = tmp / "b.emb"
        loads = {k: {"copy": [], "view": []} for k in builds}
        for _ in range(args.pairs):
            for k, (py, _) in builds.items():
                out = subprocess.run([py, "-c", LOAD_CHILD, str(table), str(args.repeat)],
                                     check=True, capture_output=True, text=True).stdout
                res = json.loads(out.strip().splitlines()[-1])
                for name in ("copy", "view"):
                    loads[k][name].append(res[name])
        tmb = table.stat().st_size / 1e6
        for name in ("copy", "view"):
            results[f"load_{name}"] = summary(loads["a"][name], loads["b"][name])
            results[f"load_{name}"]["table_mb"] = tmb
            r = results[f"load_{name}"]
            log(f"load ({name}): A {tmb / r['a_median_s']:.0f} MB/s, "
                f"B {tmb / r['b_median_s']:.0f} MB/s, A/B {r['ratio_median']:.3f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
