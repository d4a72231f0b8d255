#!/usr/bin/env python3
"""MonitoredTrainingSession (and Estimator-style loops) with embstore's SessionRunHook.

The hook makes the table part of the variable's initialization: a fresh run's first checkpoint
already holds the table, and a run that restores a checkpoint keeps its restored values without
reading the table.

    python examples/monitored_session_hook.py --source unix:demo/embstore.sock --table sample
"""
from _common import parse_args  # first: it quiets TensorFlow's start-up logging

import tempfile

import tensorflow as tf

import embstore
import embstore.tf


def main():
    args = parse_args(__doc__.splitlines()[0])
    desc = embstore.Source.resolve(args.source).describe(args.table)
    ckpt = tempfile.mkdtemp(prefix="hooked-")
    with tf.Graph().as_default():
        emb = tf.compat.v1.get_variable("embedding", [desc["rows"], desc["dim"]],
                                        initializer=tf.compat.v1.zeros_initializer())
        step = tf.compat.v1.train.get_or_create_global_step()
        loss = tf.reduce_sum(tf.nn.embedding_lookup(emb, [0, 1]))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
        hook = embstore.tf.init_hook({emb: args.table}, args.source)
        with tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=[hook]) as s:
            for _ in range(3):
                _, value = s.run([train, loss])
    print(f"trained 3 steps on {args.table} ({desc['rows']} x {desc['dim']}) from {args.source}; "
          f"last loss {value:.4f}; checkpoints in {ckpt}")


if __name__ == "__main__":
    main()
