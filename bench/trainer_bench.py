"""The trainer load path (bench/run.py, phase 'trainer'): the seed table into a TF1 graph-mode
variable, against the hand-written workaround (np.load of the same array as .npy, then one
placeholder/feed_dict assign); a TF2 eager variable; a torch tensor; a Keras Embedding. Each case
runs in a fresh process and reports its time and its peak RSS above the zero-initialized
variable (VmHWM, reset through /proc/self/clear_refs just before the load)."""
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
case, table, npy, target, rows, dim = sys.argv[1:7]
rows, dim = int(rows), int(dim)

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024.0

def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return hwm()

out = {"case": case}
if case.startswith("tf1"):
    import tensorflow as tf
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("item_mat", [rows, dim],
                                      initializer=tf.compat.v1.zeros_initializer())
        if case == "tf1 workaround":
            ph = tf.compat.v1.placeholder(tf.float32, [rows, dim])
            op = v.assign(ph)
        sess = tf.compat.v1.Session(graph=g)
        sess.run(tf.compat.v1.global_variables_initializer())
        if case != "tf1 workaround":
            import embstore, embstore.tf
        base = reset()
        t0 = time.perf_counter()
        if case == "tf1 workaround":
            a = np.load(npy)
            sess.run(op, {ph: a})
            del a
        elif case == "tf1 embstore (local table)":
            embstore.tf.initialize(sess, {v: None}, table)
        else:
            embstore.tf.initialize(sess, {v: "seed"}, target, local=False)
        out["seconds"] = time.perf_counter() - t0
        out["extra_mib"] = hwm() - base
        out["check"] = float(sess.run(v[rows - 1, dim - 1]))
elif case == "tf2 eager assign":
    import tensorflow as tf, embstore, embstore.tf
    v = tf.Variable(tf.zeros([rows, dim]))
    base = reset()
    t0 = time.perf_counter()
    embstore.tf.assign(v, table)
    out["seconds"] = time.perf_counter() - t0
    out["extra_mib"] = hwm() - base
elif case == "keras Embedding (weight included)":
    import tensorflow as tf, keras, embstore, embstore.tf
    base = reset()
    t0 = time.perf_counter()
    layer = keras.layers.Embedding(rows, dim,
                                   embeddings_initializer=embstore.tf.Initializer(table))
    layer.build((None,))
    out["seconds"] = time.perf_counter() - t0
    out["extra_mib"] = hwm() - base - rows * dim * 4 / 2**20
elif case == "torch load_into":
    import torch, embstore, embstore.torch
    w = torch.zeros(rows, dim)
    base = reset()
    t0 = time.perf_counter()
    embstore.torch.load_into(w, table)
    out["seconds"] = time.perf_counter() - t0
    out["extra_mib"] = hwm() - base
print(json.dumps(out))
"""

CASES = ["tf1 workaround", "tf1 embstore (local table)", "tf1 embstore (server, local=False)",
         "tf2 eager assign", "torch load_into", "keras Embedding (weight included)"]


def measure(table, npy, target, rows, dim, repeats=3):
    """{case: {"seconds": best, "extra_mib": its peak above the zero variable}}."""
    res = {}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for case in CASES:
        best = None
        for _ in range(repeats):
            p = subprocess.run([sys.executable, "-c", CHILD, case, str(table), str(npy), target,
                                str(rows), str(dim)], capture_output=True, text=True, env=env,
                               check=True)
            r = json.loads(p.stdout.strip().splitlines()[-1])
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        res[case] = best
    return res
