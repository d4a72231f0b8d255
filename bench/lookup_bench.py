#!/usr/bin/env python3
"""What verified key lookups cost: 100,000 random keys from the seed-sized table (938,280 x 128
float32 with keys), from the file and through a server, verified and not.

    .venv/bin/python bench/lookup_bench.py [--rows N] [--keys K] [--build-dir DIR]

A lookup never returns a row from a block that fails its checksum (docs/FORMAT.md): the first
lookup on a mapping checks the key tensors (keys.checksums) and every block it touches, and
later lookups skip blocks already checked. Each case runs in a fresh process, so "first" pays
for those checks and "again" shows the remembered state. Prints a Markdown table (the one in
docs/benchmarks.md, "Verified key lookups") and the JSON it came from. bench/run.py's lookup
phase (bench/harness/phases/lookup.py) runs the same.
"""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from harness.data import SEED_ROWS, find_build_dir, work_dir  # noqa: E402
from harness.phases.lookup import DEFAULT_KEYS, markdown, measure  # noqa: E402

BUILD_OUTPUTS = ["cli/embstore", "tests/embstore_make_test_table"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=SEED_ROWS,
                    help=f"rows of the 128-column table (default {SEED_ROWS})")
    ap.add_argument("--keys", type=int, default=DEFAULT_KEYS,
                    help=f"random keys looked up (default {DEFAULT_KEYS})")
    ap.add_argument("--build-dir", help="where the embstore build is (default $EMBSTORE_BUILD_DIR, "
                    "then build/release, build/bench, build/dev)")
    args = ap.parse_args()
    build = find_build_dir(args.build_dir, BUILD_OUTPUTS, "lookup_bench.py")
    with work_dir("embstore-lookup-") as work:
        res = measure(build, work, args.rows, args.keys)
    print("\n".join(markdown(res)))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
