#!/usr/bin/env python3
"""Writes a deterministic sample embedding file in word2vec text format (header "count dim",
then one token and its values per line), the kind of file trainers start from.

Usage: make_sample.py OUT [--rows N] [--dim D] [--seed S]
"""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output text file")
    ap.add_argument("--rows", type=int, default=20000, help="vectors (default 20000)")
    ap.add_argument("--dim", type=int, default=64, help="values per vector (default 64)")
    ap.add_argument("--seed", type=int, default=2026, help="random seed")
    args = ap.parse_args()
    if args.rows < 1 or args.dim < 1:
        sys.exit("make_sample.py: --rows and --dim must be at least 1")
    rng = np.random.default_rng(args.seed)
    m = rng.standard_normal((args.rows, args.dim), dtype=np.float32)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(f"{args.rows} {args.dim}\n")
        for r in range(args.rows):
            f.write(f"token{r} " + " ".join(f"{v:.6g}" for v in m[r]) + "\n")


if __name__ == "__main__":
    main()
