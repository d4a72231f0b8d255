#!/usr/bin/env python3
"""A Keras Embedding layer initialized from embstore.

The initializer's config holds only (source, table): saving the model does not copy the table
into its config, only into its weights.

    python examples/keras_embedding.py --source unix:demo/embstore.sock --table sample
"""
from _common import parse_args  # first: it quiets TensorFlow's start-up logging

import json

import numpy as np
import tensorflow as tf

import embstore
import embstore.tf


def main():
    args = parse_args(__doc__.splitlines()[0])
    desc = embstore.Source.resolve(args.source).describe(args.table)
    layer = tf.keras.layers.Embedding(
        desc["rows"], desc["dim"], trainable=False,
        embeddings_initializer=embstore.tf.Initializer(args.source, args.table))
    model = tf.keras.Sequential([tf.keras.Input(shape=(None,), dtype="int32"), layer,
                                 tf.keras.layers.GlobalAveragePooling1D()])
    out = model(np.array([[0, 1, 2]]))
    config = json.dumps(model.get_config())
    print(f"model output {tuple(out.shape)}; model config is {len(config)} bytes "
          f"for a {desc['rows']} x {desc['dim']} table")


if __name__ == "__main__":
    main()
