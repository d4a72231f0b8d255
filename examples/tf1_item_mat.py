#!/usr/bin/env python3
"""The classic TF1 scenario, without the 2 GB GraphDef wall.

A trainer keeps a pretrained item embedding matrix `item_mat` (938,280 x 128 in the original
setting) in a variable and writes periodic checkpoints. Initializing it with
tf.constant(np.loadtxt(...)) bakes the array into the graph: the .meta file of every checkpoint
grows by the table's size. Here the variable is created with a zeros initializer and filled from
embstore after the session starts, so the graph holds no copy of the table.

    python examples/tf1_item_mat.py --source unix:demo/embstore.sock --table sample
"""
from _common import parse_args  # first: it quiets TensorFlow's start-up logging

import os
import tempfile

import tensorflow as tf

import embstore
import embstore.tf


def main():
    args = parse_args(__doc__.splitlines()[0], extra=lambda ap: ap.add_argument(
        "--steps", type=int, default=3, help="training steps, one checkpoint each"))
    desc = embstore.Source.resolve(args.source).describe(args.table)
    rows, dim = desc["rows"], desc["dim"]
    workdir = tempfile.mkdtemp(prefix="item_mat-")
    tf.compat.v1.disable_eager_execution()
    item_mat = tf.compat.v1.get_variable("item_mat", [rows, dim],
                                         initializer=tf.compat.v1.zeros_initializer())
    ids = tf.compat.v1.placeholder(tf.int64, [None])
    lookup = tf.nn.embedding_lookup(item_mat, ids)
    saver = tf.compat.v1.train.Saver(max_to_keep=2)
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        embstore.tf.initialize(sess, {item_mat: args.table}, args.source)
        for step in range(args.steps):
            sess.run(lookup, {ids: [step % rows]})
            path = saver.save(sess, os.path.join(workdir, "model"), global_step=step)
    meta = os.path.getsize(path + ".meta")
    print(f"item_mat {rows} x {dim} loaded from {args.source}; checkpoint {path}: "
          f".meta is {meta / 1024:.1f} KiB (the table is {rows * dim * 4 / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
