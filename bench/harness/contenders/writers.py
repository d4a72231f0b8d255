"""Writing the seed table out of a trainer's memory to a local file, each case in a fresh
process: the matrix is made first (not timed), then the write is timed and the peak resident
memory above what the process held before it is measured (VmHWM reset just before).

- np.save of the numpy array (page cache only, as np.save leaves it) and np.save then fsync;
- embstore.save of the same array (durable: fsynced before it is published; and durable=False,
  what np.save promises);
- embstore.torch.save of a torch tensor (durable=False, as np.save), against np.save of the
  same tensor (tensor.numpy()) in a process that holds torch too;
- embstore.tf.save of a TF1 graph-mode variable (durable=False; a host variable is read as a
  zero-copy view), against what users do today: session.run(variable) then np.save; and against
  np.save alone of the variable's value, fetched before the clock starts, in a process that
  holds TF too.

Page-cache writes on a virtual machine cost what the memory they land in costs: pages freed
moments ago are cheap, memory the guest has not touched (or gave back to its host) is not, and
a process that imported torch or TensorFlow has used more of it. The same write measured 0.08 s
and 0.7 s here depending on that. So every case first touches and frees memory the size of the
table, each framework's writer is set against np.save in a process with the same imports and the
same matrix, and the phase runs the cases round-robin.
"""
import os
import time

from harness.procfs import peak_rss_mib, reset_peak_rss

CASES = ["np.save", "embstore.save (durable=False)", "np.save + fsync", "embstore.save",
         "np.save (torch tensor)", "embstore.torch.save (durable=False)",
         "np.save (TF1 variable's value)", "session.run + np.save (TF1 variable)",
         "embstore.tf.save (TF1 variable, durable=False)"]


def _matrix(rows, dim):
    import numpy as np
    return np.random.default_rng(0).standard_normal((rows, dim), dtype=np.float32)


def _fsync_np_save(path, a):
    import numpy as np
    with open(path, "wb") as f:
        np.save(f, a)
        f.flush()
        os.fsync(f.fileno())


def save(case, out, rows, dim):
    rows, dim = int(rows), int(dim)
    import numpy as np
    session = None
    if "TF1" in case:
        import tensorflow as tf
        graph = tf.Graph()
        with graph.as_default():
            var = tf.compat.v1.get_variable(
                "emb", [rows, dim], initializer=tf.compat.v1.random_normal_initializer())
            session = tf.compat.v1.Session(graph=graph)
            session.run(var.initializer)
        if case == "np.save (TF1 variable's value)":
            value = session.run(var)
        import embstore.tf
    elif "torch" in case:
        import torch
        tensor = torch.from_numpy(_matrix(rows, dim))
        import embstore.torch
    else:
        a = _matrix(rows, dim)
        import embstore  # noqa: F401
    # Memory the size of the table touched and freed just before the clock starts, in every
    # case alike: the write then lands in pages this guest has just used, whatever its imports
    # and its host did to the rest (see the module's docstring).
    warm = np.ones(rows * dim, dtype=np.float32)
    del warm
    before = reset_peak_rss()
    t0 = time.perf_counter()
    if case == "np.save":
        np.save(out, a)
    elif case == "np.save + fsync":
        _fsync_np_save(out, a)
    elif case == "embstore.save":
        embstore.save(a, out, force=True)
    elif case == "embstore.save (durable=False)":
        embstore.save(a, out, force=True, durable=False)
    elif case == "np.save (torch tensor)":
        np.save(out, tensor.numpy())
    elif case == "np.save (TF1 variable's value)":
        np.save(out, value)
    elif case == "embstore.torch.save (durable=False)":
        embstore.torch.save(tensor, out, force=True, durable=False)
    elif case == "session.run + np.save (TF1 variable)":
        np.save(out, session.run(var))
    elif case == "embstore.tf.save (TF1 variable, durable=False)":
        embstore.tf.save(session, var, out, force=True, durable=False)
    else:
        raise ValueError(case)
    seconds = time.perf_counter() - t0
    return {"case": case, "seconds": seconds, "bytes": os.path.getsize(out),
            "extra_rss_mib": peak_rss_mib() - before}
