#!/usr/bin/env python3
"""Rows of a table as a tf.data input pipeline, streamed from the store as they are consumed.

    python examples/tf_data_pipeline.py --source unix:demo/embstore.sock --table sample
"""
from _common import parse_args  # first: it quiets TensorFlow's start-up logging

import tensorflow as tf

import embstore.tf


def main():
    args = parse_args(__doc__.splitlines()[0])
    ds = embstore.tf.dataset(args.source, args.table, with_keys=True).batch(256)
    batches = rows = 0
    for keys, vectors in ds.prefetch(tf.data.AUTOTUNE):
        batches += 1
        rows += int(vectors.shape[0])
    print(f"{rows} (key, vector) pairs in {batches} batches of up to 256 from {args.source}")


if __name__ == "__main__":
    main()
