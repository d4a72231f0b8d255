#!/usr/bin/env python3
"""The benchmark report: embstore against the tools trainers use today, side by side, in one run.

    .venv/bin/python bench/run.py                 # full run, about 15 to 20 minutes on 2 cores
    .venv/bin/python bench/run.py --quick         # small sizes, about two minutes: a smoke test

On the same generated data (the seed's 938,280 x 128 float32 matrix, as np.savetxt writes it with
'%.18e', its default, and with '%.8g'; and the word2vec text form) it measures:

  micro        bench/convert_bench (parsing kernels) and bench/store_bench (dtype conversion per
               kernel, Checksum64), bytes/s
  conversion   embstore convert (1 and all threads) vs np.loadtxt(dtype=float32),
               pandas.read_csv(engine='c'), pyarrow.csv.read_csv (best of --repeat rounds,
               default 3), gensim load_word2vec_format
  scaling      embstore convert over rows (10k .. 4M) and threads, with pandas and np.loadtxt
               up to 1M rows; peak RSS of convert, server and client at each size
  local load   embstore.load of a table file (copy, and the zero-copy view) vs np.load (full read,
               and mmap_mode='r' with and without a full read) and safetensors load_file/safe_open
  serving      bench/serve_bench (embstore serve vs iperf3 and a naive copying gRPC server; 1..64
               concurrent clients: aggregate throughput and server RSS), bench/pull_bench (the C++
               client with 1..N streams, local path vs memcpy), the Python client with 1..N
               streams, and Arrow Flight (pyarrow.flight do_get of the same matrix)
  seed         bench/tf_graph_bench.py: tf.constant vs embstore into a TF1 variable, checkpointed
  lookup       100,000 random keys, verified and not, file and server (as bench/lookup_bench.py)
  trainer      the seed table into a TF1 variable (embstore from the file and from a server vs
               np.load + feed_dict), a TF2 variable, a torch tensor, a Keras Embedding: time and
               peak RSS above the zero-initialized variable
  distributed  four torch.distributed ranks start from a table on a server, three ways: every
               rank loads the whole table, load_sharded, broadcast_load (as
               bench/distributed_bench.py): wall time, bytes served, peak RSS per rank
  object_store the seed table from a local S3 server: embstore pull vs boto3 and
               runai-model-streamer; bytes moved by a partial export
  hdfs         the seed table from a local HDFS (MiniDFSCluster): embstore pull vs Hadoop's Java
               client, hdfs-native and pyarrow; embstore.load and a TF1 variable vs hdfs-native

and writes results.json (with the machine's description and load averages), PNG plots, and the
report docs/benchmarks.md (with --report-dir). Speed is never asserted: the report prints ratios
against the baselines measured in the same run, and says where embstore is behind.

Options: --out-dir (JSON and plots; default build/bench-report), --report-dir (where
benchmarks.md and img/ go; default: none unless --publish, which means docs/), --build-dir
(default $EMBSTORE_BUILD_DIR, build/release, build/bench, build/dev), --work-dir (generated data;
default a temporary dir under /dev/shm when it has room), --skip PHASE (repeatable).

Each phase is a module of bench/harness/phases/; what it measures, in child processes of their
own, is in bench/harness/contenders/; the report is bench/harness/report/.
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
from harness import phases  # noqa: E402
from harness.data import (GENSIM_ROWS, SEED_DIM, SEED_ROWS, find_build_dir,  # noqa: E402
                          gen_text, word2vec_form, work_dir)
from harness.machine import machine_description  # noqa: E402
from harness.phases import (conversion, distributed, hdfs, local, lookup,  # noqa: E402
                            micro, object_store, scaling, seed, serving, sync, trainer,
                            writers)
from harness.report.publish import publish, summarize  # noqa: E402
from harness.timing import log  # noqa: E402

# Run order. A phase that fails is recorded in results["errors"] and the rest still run.
PHASES = {"micro": micro.run, "conversion": conversion.run, "scaling": scaling.run,
          "local": local.run, "serving": serving.run, "seed": seed.run, "lookup": lookup.run,
          "trainer": trainer.run, "distributed": distributed.run,
          "object_store": object_store.run, "hdfs": hdfs.run, "writers": writers.run,
          "sync": sync.run}
# Phases that read the seed table; they convert it themselves when conversion is skipped.
NEED_SEED_TABLE = ("local", "serving", "seed", "lookup", "trainer", "object_store", "hdfs",
                   "sync")
# What a build dir must hold.
BUILD_OUTPUTS = ["cli/embstore", "bench/embstore_gen_text", "bench/serve_bench",
                 "bench/pull_bench", "bench/convert_bench", "bench/store_bench",
                 "tests/embstore_make_test_table"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--quick", action="store_true", help="small sizes; about two minutes")
    ap.add_argument("--out-dir", default=str(ROOT / "build" / "bench-report"),
                    help="results.json and plots go here (and benchmarks.md without "
                    "--report-dir); default build/bench-report")
    ap.add_argument("--report-dir", help="also write benchmarks.md (+ img/, benchmarks.json) here")
    ap.add_argument("--publish", action="store_true", help="same as --report-dir docs")
    ap.add_argument("--build-dir", help="the build with cli/embstore and the bench targets "
                    "(default $EMBSTORE_BUILD_DIR, then build/release, build/bench, build/dev)")
    ap.add_argument("--work-dir", help="generated data (default: a temp dir, /dev/shm if roomy)")
    ap.add_argument("--rows", type=int, help="seed rows (default 938280; --quick 20000)")
    ap.add_argument("--skip", action="append", default=[], choices=list(PHASES),
                    metavar="PHASE", help="leave out a phase (repeatable): "
                    + ", ".join(PHASES))
    ap.add_argument("--repeat", type=int, help="conversion rounds, best time of each contender "
                    "kept (default 3; --quick 1)")
    ap.add_argument("--report-from", metavar="JSON",
                    help="measure nothing: rewrite the plots and report from a results JSON")
    ap.add_argument("--tf-large", action="store_true",
                    help="also run the seed scenario on a table over 2 GB (adds minutes)")
    args = ap.parse_args()
    if args.publish:
        args.report_dir = str(ROOT / "docs")
    return args


def convert_seed_table(ctx):
    """The seed table for phases that read it when the conversion phase did not make it."""
    ctx.seed_table = ctx.store / "seed.emb"
    subprocess.run([str(ctx.build / "cli" / "embstore"), "convert", str(ctx.text["e18"]),
                    str(ctx.seed_table), "--force"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_phases(ctx, skip, results):
    """Generates the data under ctx.work, then runs every phase not in `skip` into `results`."""
    ctx.store = ctx.work / "store"
    ctx.store.mkdir()
    log(f"generating data in {ctx.work}")
    t0 = time.perf_counter()
    ctx.text = {f: gen_text(ctx.build, ctx.work / f"seed_{f}.txt", ctx.rows, ctx.dim, f)
                for f in ("e18", "g8")}
    # gensim reads 5-15k rows/s here (one to three minutes for the seed), so it gets the
    # first GENSIM_ROWS rows in word2vec form, and embstore converts that same file.
    ctx.w2v_rows = min(ctx.rows, GENSIM_ROWS)
    ctx.text["w2v"] = word2vec_form(ctx.text["g8"], ctx.work / "seed_w2v.txt", ctx.w2v_rows,
                                    ctx.dim)
    results["data_seconds"] = time.perf_counter() - t0
    for phase, run in PHASES.items():
        if phase in skip:
            continue
        if phase in NEED_SEED_TABLE and ctx.seed_table is None:
            convert_seed_table(ctx)
        log(f"phase {phase}")
        t0 = time.perf_counter()
        try:
            results[phase] = run(ctx)
        except Exception as e:  # one broken contender must not lose the rest of the run
            results["errors"][phase] = f"{type(e).__name__}: {e}"
            log(f"phase {phase} failed: {results['errors'][phase]}")
        results.setdefault("phase_seconds", {})[phase] = time.perf_counter() - t0
        if phase == "conversion" and ctx.seed_table is not None:
            # The text is no longer needed; free the tmpfs for the scaling phase's files.
            for path in ctx.text.values():
                path.unlink(missing_ok=True)


def main():
    args = parse_args()
    if args.report_from:
        results = json.loads(pathlib.Path(args.report_from).read_text())
        summarize(results)
        return publish(results, pathlib.Path(args.out_dir), args.report_dir, list(PHASES))

    ctx = phases.RunContext(
        quick=args.quick, tf_large=args.tf_large,
        repeat=args.repeat if args.repeat is not None else (1 if args.quick else 3),
        build=find_build_dir(args.build_dir, BUILD_OUTPUTS, "bench/run.py"),
        rows=args.rows or (20_000 if args.quick else SEED_ROWS), dim=SEED_DIM,
        out=pathlib.Path(args.out_dir))
    ctx.out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    results = {"quick": args.quick, "load_average": {"start": list(os.getloadavg())},
               "machine": machine_description(ctx.build), "errors": {}}
    log(f"embstore benchmark report: {'quick' if args.quick else 'full'} run, build {ctx.build}, "
        f"load average {os.getloadavg()[0]:.2f}")
    need = 12e9 if not args.quick else 0.2e9
    with work_dir("embstore-bench-", need, args.work_dir) as work:
        ctx.work = pathlib.Path(work)
        run_phases(ctx, args.skip, results)
    results["load_average"]["end"] = list(os.getloadavg())
    results["total_seconds"] = time.perf_counter() - t_start
    summarize(results)
    return publish(results, ctx.out, args.report_dir, list(PHASES))


if __name__ == "__main__":
    sys.exit(main())
