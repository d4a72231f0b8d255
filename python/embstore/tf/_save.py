"""embstore.tf.save: a trained variable written as a table, chunk by chunk.

A variable on the host is read without a copy: inside a graph (a TF1 session's, a tf.function's),
a numpy_function receives its arguments as numpy arrays over the tensors' own buffers, and a read
of a resource variable is the variable's buffer, so one op hands over every partition whole. The
arrays keep those buffers alive, and TensorFlow copies a variable's buffer before it updates it
while a read holds it (copy on write): what is saved is one consistent snapshot of the variable,
even if training goes on meanwhile (it then costs the variable one copy, made by TensorFlow).

Elsewhere each chunk is copied out of TensorFlow: on a GPU (a whole read would be copied to the
host at once), in a remote session, for reference variables (legacy TF1, updated in place), and in
a finalized graph (no op can be added there). TF1 graph mode then reads each chunk through one
small slice op a partition, fed its first row, so the session never hands over more than a chunk;
eager mode and Keras slice the variable directly. Partitioned variables (tf.compat.v1
partitioners, tf.distribute ShardedVariable) are written as one table, their partitions in row
order.
"""
import threading
import weakref

import numpy as np
import tensorflow as tf

from tensorflow.python.ops import resource_variable_ops

from .._save import Rows, element_kind, write_rows
from ..errors import InvalidArgumentError
from ._common import _partitions, _var_name

# Set to False to read host variables in copied chunks as on a GPU (the tests cover both ways).
ZERO_COPY = True


def _keras_value(variable):
    # A Keras 3 variable holds its TensorFlow variable in .value (a property, not a method).
    value = getattr(variable, "value", None)
    if value is not None and not callable(value) and "keras" in (type(variable).__module__ or ""):
        return value
    return variable


def _parts(variable, name):
    """[(part, first_row, rows)] in row order, checked to cover rows [0, total) exactly."""
    parts = sorted(_partitions(_keras_value(variable)), key=lambda p: int(p[1]))
    out, row = [], 0
    for p, first in parts:
        p = _keras_value(p)
        if p.shape.rank != 2 or any(d is None for d in p.shape):
            raise InvalidArgumentError(
                f"variable {name!r} has shape {p.shape}; a table is a 2-D matrix [rows, dim] "
                f"with a static shape")
        if int(first) != row:
            raise InvalidArgumentError(
                f"variable {name!r}: its partition {_var_name(p)!r} starts at row {int(first)}, "
                f"not {row} where the partition before it ends")
        out.append((p, row, int(p.shape[0])))
        row += int(p.shape[0])
    dims = {int(p.shape[1]) for p, _, _ in out}
    if len(dims) != 1:
        raise InvalidArgumentError(f"variable {name!r}: its partitions have dims {sorted(dims)}")
    return out, row, dims.pop()


class _Views:
    """Hands over the numpy arrays a numpy_function op received (module docstring): take(run)
    runs the op (run()) and returns its arguments. One take at a time."""

    def __init__(self):
        self._lock = threading.Lock()
        self._got = None

    def grab(self, *arrays):
        self._got = arrays
        return np.int64(len(arrays))

    def take(self, run):
        with self._lock:
            self._got = None
            try:
                run()
                return list(self._got)
            finally:
                self._got = None


_VIEWS = _Views()


def _on_host(device):
    return bool(device) and tf.DeviceSpec.from_string(device).device_type in ("CPU", "XLA_CPU")


def _viewable(p):
    return ZERO_COPY and resource_variable_ops.is_resource_variable(p)


def _graph_views(session, parts):
    """The partitions' values as zero-copy arrays, read in one step; None where they cannot be
    (see the module docstring)."""
    graph = session.graph
    if graph.finalized or not all(_viewable(p) for p, _, _ in parts):
        return None
    if getattr(session, "sess_str", None) not in ("", b""):
        return None  # a remote session: the values are not in this process
    try:
        host_only = all(d.device_type in ("CPU", "XLA_CPU") for d in session.list_devices())
    except (AttributeError, tf.errors.OpError):
        return None
    if not host_only and not all(_on_host(p.device) for p, _, _ in parts):
        return None  # a partition without a device may be on a GPU
    ops = _SLICE_OPS.setdefault(graph, {})
    key = ("views",) + tuple(p.name for p, _, _ in parts)
    if key not in ops:
        with graph.as_default(), tf.name_scope("embstore_save"):
            ops[key] = tf.numpy_function(_VIEWS.grab, [p for p, _, _ in parts], tf.int64,
                                         name="views")
    return _VIEWS.take(lambda: session.run(ops[key]))


# dtype -> tf.function handing its argument (a variable's read) to _VIEWS.grab.
_EAGER_VIEW_FNS = {}


def _eager_views(parts):
    if not all(_viewable(p) and _on_host(p.device) for p, _, _ in parts):
        return None
    views = []
    for p, _, _ in parts:
        dtype = p.dtype.base_dtype
        if dtype not in _EAGER_VIEW_FNS:
            _EAGER_VIEW_FNS[dtype] = tf.function(
                lambda x: tf.numpy_function(_VIEWS.grab, [x], tf.int64),
                input_signature=[tf.TensorSpec(None, dtype)], autograph=False)
        views += _VIEWS.take(lambda fn=_EAGER_VIEW_FNS[dtype], p=p: fn(p))
    return views


def eager_view(variable):
    """A host resource variable's value as a zero-copy array (embstore.save of a variable in
    eager mode), or None."""
    views = _eager_views([(variable, 0, None)])
    return None if views is None else views[0]


def _graph_readers(session, parts, name):
    """One read(begin, n) a partition: a slice op fed its first row and length."""
    graph = session.graph
    readers = []
    if graph.finalized:
        # No op can be added: each partition is read whole, once, when its first chunk is asked
        # for (memory: one partition, not one chunk).
        for p, _, _ in parts:
            cache = {}

            def read(b, n, p=p, cache=cache):
                if "value" not in cache:
                    cache.clear()
                    cache["value"] = session.run(p)  # its existing read op: no new op
                return cache["value"][b:b + n]
            readers.append(read)
        return readers
    for p, _, _ in parts:
        begin, size, op = _slice_op(graph, p)
        readers.append(lambda b, n, op=op, begin=begin, size=size:
                       session.run(op, {begin: b, size: n}))
    return readers


# graph -> {partition name: (begin, size, slice op)}: a variable saved again (every N steps of a
# training loop) reuses its op, so the graph does not grow with every save and the session runs
# the executor it already built for it.
_SLICE_OPS = weakref.WeakKeyDictionary()


def _slice_op(graph, part):
    ops = _SLICE_OPS.setdefault(graph, {})
    if part.name not in ops:
        with graph.as_default(), tf.name_scope("embstore_save"):
            begin = tf.compat.v1.placeholder(tf.int64, [], name="begin")
            size = tf.compat.v1.placeholder(tf.int64, [], name="size")
            op = tf.slice(part, tf.stack([begin, tf.constant(0, tf.int64)]),
                          tf.stack([size, tf.constant(-1, tf.int64)]))
        ops[part.name] = (begin, size, op)
    return ops[part.name]


def _eager_readers(parts):
    return [lambda b, n, p=p: p[b:b + n].numpy() for p, _, _ in parts]


def save(session, variable, dest, *, keys=None, dtype=None, metadata=None, force=False,
         on_overflow="error", chunk_rows=None, progress=None, durable=True,
         row_hashes=True):
    """Writes a variable's current value as a table at `dest` (.emb path, s3://, hdfs://).

    session: the tf.compat.v1.Session (or MonitoredSession) holding the variable in graph mode;
    None in eager mode (TF2, Keras weights: model.get_layer(...).embeddings).
    variable: a variable [rows, dim], partitioned (tf.compat.v1 partitioners, ShardedVariable)
    or not; partitions are written in row order as one table.
    The other arguments are embstore.save's. A resource variable on the host is read without a
    copy, as one snapshot of all its partitions (module docstring). Elsewhere rows are read a
    chunk at a time (16 MiB by default), so the table is never held twice; in a finalized
    graph, where no op can be added, each partition is read whole instead.
    """
    name = _var_name(variable)
    parts, rows, dim = _parts(variable, name)
    kind = element_kind(parts[0][0].dtype.base_dtype, f"variable {name!r}")
    if session is None:
        if not tf.executing_eagerly():
            raise InvalidArgumentError(
                f"embstore.tf.save(None, {name!r}, ...) in graph mode: pass the session that "
                f"holds the variable's value")
        views = _eager_views(parts)
    else:
        views = _graph_views(session, parts)
    if views is not None:
        readers = [lambda b, n, a=a: a[b:b + n] for a in views]
    elif session is None:
        readers = _eager_readers(parts)
    else:
        readers = _graph_readers(session, parts, name)

    def read(b, e):
        pieces = []
        for (p, first, n), reader in zip(parts, readers):
            lo, hi = max(b, first), min(e, first + n)
            if lo < hi:
                pieces.append(reader(lo - first, hi - lo))
        chunk = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        return chunk.view("uint16") if kind == "bf16" else chunk

    # Without views each read is a copy out of TensorFlow (session.run, .numpy()): the next
    # chunk's copy runs on a second thread while this one is written (write_rows).
    return write_rows(Rows(rows, dim, kind, read, f"variable {name!r}", prefetch=views is None),
                      dest,
                      keys=keys, dtype=dtype, metadata=metadata, force=force,
                      on_overflow=on_overflow, chunk_rows=chunk_rows, progress=progress,
                      durable=durable, row_hashes=row_hashes)
