#!/usr/bin/env python3
"""Distributed loads (issue #15): four torch.distributed ranks (gloo, one host) start from the
seed-sized table (938,280 x 128 float32) on a server, read with local=False, three ways:

  every rank loads all   each rank loads the whole table, then keeps its Shard(0) rows
  load_sharded           each rank reads only its Shard(0) rows into its DTensor shard
  broadcast_load         each rank reads a quarter and broadcasts it: a full replica everywhere

    .venv/bin/python bench/distributed_bench.py [--rows N] [--ranks R] [--build-dir DIR]

For each way: the job's wall time (first rank in to last rank out, best of --repeats), the bytes
the server sent (embstore_bytes_served_total, read from its metrics endpoint before and after),
and each rank's peak RSS above its resident memory just before the load (VmHWM, reset through
/proc/self/clear_refs; the destination tensor is allocated and touched before that), the largest
over the ranks. Prints a Markdown table and the JSON it came from. The ranks are
bench/harness/contenders/distributed_ranks.py; measure() is bench/harness/phases/distributed.py,
which bench/run.py runs as its distributed phase.
"""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from harness.data import SEED_ROWS, find_build_dir, work_dir  # noqa: E402
from harness.phases.distributed import markdown, measure  # noqa: E402,F401  (measure: API)

BUILD_OUTPUTS = ["cli/embstore", "tests/embstore_make_test_table"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=SEED_ROWS,
                    help=f"rows of the 128-column table (default {SEED_ROWS})")
    ap.add_argument("--ranks", type=int, default=4, help="torch.distributed ranks (default 4)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of each way; the best counts (default 3)")
    ap.add_argument("--build-dir", help="where the embstore build is (default $EMBSTORE_BUILD_DIR, "
                    "then build/release, build/bench, build/dev)")
    args = ap.parse_args()
    build = find_build_dir(args.build_dir, BUILD_OUTPUTS, "distributed_bench.py")
    with work_dir("embstore-distributed-") as work:
        res = measure(build, work, args.rows, args.ranks, args.repeats)
    print("\n".join(markdown(res)))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
