"""The trainer load path: the seed table into framework memory. A TF1 graph-mode variable
filled by embstore (from the table file, and from a server) against the hand-written workaround
(np.load of the same array as .npy, then one placeholder/feed_dict assign); a TF2 eager
variable; a torch tensor; a Keras Embedding.

Each case reports its time and its peak RSS above the zero-initialized variable: VmHWM after
the load, less the mark reset just before it (harness.procfs).
"""
import os
import time

from harness.procfs import peak_rss_mib, reset_peak_rss

CASES = ["tf1 workaround", "tf1 embstore (local table)", "tf1 embstore (server, local=False)",
         "tf1 init_hook (local table)",
         "tf2 eager assign", "torch load_into", "keras Embedding (weight included)"]


def _tf1(case, table, npy, target, rows, dim, out):
    import numpy as np
    import tensorflow as tf
    graph = tf.Graph()
    with graph.as_default():
        variable = tf.compat.v1.get_variable("item_mat", [rows, dim],
                                             initializer=tf.compat.v1.zeros_initializer())
        if case == "tf1 workaround":
            placeholder = tf.compat.v1.placeholder(tf.float32, [rows, dim])
            assign = variable.assign(placeholder)
        if case != "tf1 workaround":
            import embstore.tf
        if case == "tf1 init_hook (local table)":
            embstore.tf.init_hook({variable: None}, table).begin()
        init = tf.compat.v1.global_variables_initializer()
        sess = tf.compat.v1.Session(graph=graph)
        if case == "tf1 init_hook (local table)":
            base = reset_peak_rss()
            t0 = time.perf_counter()
            sess.run(init)
            out["seconds"] = time.perf_counter() - t0
            out["extra_mib"] = peak_rss_mib() - base - rows * dim * 4 / 2**20
            out["check"] = float(sess.run(variable[rows - 1, dim - 1]))
            return
        t0 = time.perf_counter()
        sess.run(init)
        out["init_seconds"] = time.perf_counter() - t0
        base = reset_peak_rss()
        t0 = time.perf_counter()
        if case == "tf1 workaround":
            matrix = np.load(npy)
            sess.run(assign, {placeholder: matrix})
            del matrix
        elif case == "tf1 embstore (local table)":
            embstore.tf.initialize(sess, {variable: None}, table)
        else:
            embstore.tf.initialize(sess, {variable: "seed"}, target, local=False)
        out["seconds"] = time.perf_counter() - t0
        out["extra_mib"] = peak_rss_mib() - base
        out["check"] = float(sess.run(variable[rows - 1, dim - 1]))


def run_case(case, table, npy, target, rows, dim):
    """Loads `table` (or, for the workaround, `npy`; for the server case, table "seed" from
    `target`) into a rows x dim variable or tensor the way `case` (one of CASES) does."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    rows, dim = int(rows), int(dim)
    out = {"case": case}
    if case.startswith("tf1"):
        _tf1(case, table, npy, target, rows, dim, out)
    elif case == "tf2 eager assign":
        import tensorflow as tf
        import embstore.tf
        variable = tf.Variable(tf.zeros([rows, dim]))
        base = reset_peak_rss()
        t0 = time.perf_counter()
        embstore.tf.assign(variable, table)
        out["seconds"] = time.perf_counter() - t0
        out["extra_mib"] = peak_rss_mib() - base
    elif case == "keras Embedding (weight included)":
        import tensorflow  # noqa: F401  (before keras, as a trainer imports them)
        import keras
        import embstore.tf
        base = reset_peak_rss()
        t0 = time.perf_counter()
        layer = keras.layers.Embedding(rows, dim,
                                       embeddings_initializer=embstore.tf.Initializer(table))
        layer.build((None,))
        out["seconds"] = time.perf_counter() - t0
        out["extra_mib"] = peak_rss_mib() - base - rows * dim * 4 / 2**20
    elif case == "torch load_into":
        import torch
        import embstore.torch
        weight = torch.zeros(rows, dim)
        base = reset_peak_rss()
        t0 = time.perf_counter()
        embstore.torch.load_into(weight, table)
        out["seconds"] = time.perf_counter() - t0
        out["extra_mib"] = peak_rss_mib() - base
    return out
