#!/usr/bin/env python3
"""The seed's Estimator program (tf.estimator, TensorFlow 2.15 and earlier), with embstore.

The original fine-tunes a pretrained item embedding matrix `item_mat` (938,280 x 128) and keeps
the array in the graph twice: the input_fn slices it with
`tf.data.Dataset.from_tensor_slices(item_mat)` and the model_fn initializes its variable with
`tf.constant(item_mat)`. Every checkpoint's .meta file then carries the table (458 MB), and past
2 GB the graph cannot be built at all ("Cannot create a tensor proto whose content is larger than
2GB"). Here each of the two takes one line of embstore, and the graph holds neither:

- input_fn streams the rows with `embstore.tf.dataset(source, table)`, chunk by chunk;
- model_fn creates the variable with a zeros initializer and returns
  `EstimatorSpec(..., scaffold=embstore.tf.scaffold({item_mat: table}, source))`: the table is
  loaded when the session initializes instead of restoring, so the first checkpoint holds it,
  and a run restarted from model_dir keeps its trained values without reading the table.

The model: each item's row is looked up in `item_mat` (trainable, starting from the table) and
projected by a dense layer that learns to give back the pretrained row the input_fn streams.

    python examples/estimator_item_mat.py --source unix:demo/embstore.sock --table sample
"""
from _common import parse_args  # first: it quiets TensorFlow's start-up logging

import tempfile

import tensorflow as tf

import embstore
import embstore.tf


def input_fn(source, table, batch_size, epochs):
    """(features {"item": row index}, label: the item's pretrained row), streamed from the table.
    No array enters the graph, whatever the table's size."""
    rows = embstore.tf.dataset(source, table).enumerate()
    return (rows.map(lambda item, row: ({"item": item}, row))
            .repeat(epochs).batch(batch_size).prefetch(2))


def model_fn(features, labels, mode, params):
    source, table = params["source"], params["table"]
    rows, dim = params["rows"], params["dim"]
    item_mat = tf.compat.v1.get_variable("item_mat", [rows, dim],
                                         initializer=tf.compat.v1.zeros_initializer())
    vectors = tf.nn.embedding_lookup(item_mat, features["item"])
    predictions = tf.keras.layers.Dense(dim, name="projection")(vectors)
    scaffold = embstore.tf.scaffold({item_mat: table}, source)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, scaffold=scaffold)
    loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
    if mode == tf.estimator.ModeKeys.EVAL:
        mse = tf.compat.v1.metrics.mean_squared_error(labels, predictions)
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"mse": mse},
                                          scaffold=scaffold)
    train_op = tf.compat.v1.train.AdagradOptimizer(0.05).minimize(
        loss, global_step=tf.compat.v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, scaffold=scaffold)


def estimator(source, table, model_dir, save_checkpoints_steps=None):
    desc = embstore.Source.resolve(source).describe(table)
    params = {"source": source, "table": table, "rows": desc["rows"], "dim": desc["dim"]}
    config = tf.estimator.RunConfig(model_dir=model_dir,
                                    save_checkpoints_steps=save_checkpoints_steps,
                                    save_checkpoints_secs=None if save_checkpoints_steps else 600,
                                    log_step_count_steps=None)
    return tf.estimator.Estimator(model_fn, config=config, params=params)


def main():
    def extra(ap):
        ap.add_argument("--steps", type=int, default=20, help="training steps")
        ap.add_argument("--batch-size", type=int, default=64)
        ap.add_argument("--model-dir", help="default: a new temporary directory")
    args = parse_args(__doc__.splitlines()[0], extra=extra)
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)  # Estimator deprecation notes
    model_dir = args.model_dir or tempfile.mkdtemp(prefix="estimator-item_mat-")
    est = estimator(args.source, args.table, model_dir)
    est.train(lambda: input_fn(args.source, args.table, args.batch_size, None), steps=args.steps)
    metrics = est.evaluate(lambda: input_fn(args.source, args.table, args.batch_size, 1),
                           steps=10)
    print(f"trained {metrics['global_step']} steps on {args.table} from {args.source}: "
          f"eval mse {metrics['mse']:.4f}; model_dir {model_dir}")


if __name__ == "__main__":
    main()
