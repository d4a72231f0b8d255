"""embstore.tf.save: a trained variable written as a table, chunk by chunk.

TF1 graph mode reads each chunk through one small slice op a partition, fed its first row, so the
session never hands over more than a chunk; eager mode and Keras slice the variable directly.
Partitioned variables (tf.compat.v1 partitioners, tf.distribute ShardedVariable) are written as
one table, their partitions in row order.
"""
import weakref

import numpy as np
import tensorflow as tf

from .._save import Rows, element_kind, write_rows
from ..errors import InvalidArgumentError
from ._common import _partitions, _var_name


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
    The other arguments are embstore.save's. Rows are read a chunk at a time (16 MiB by
    default), so the table is never held twice; in a finalized graph, where no slice op can be
    added, each partition is read whole instead.
    """
    name = _var_name(variable)
    parts, rows, dim = _parts(variable, name)
    kind = element_kind(parts[0][0].dtype.base_dtype, f"variable {name!r}")
    if session is None:
        if not tf.executing_eagerly():
            raise InvalidArgumentError(
                f"embstore.tf.save(None, {name!r}, ...) in graph mode: pass the session that "
                f"holds the variable's value")
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

    # Each read is a copy out of TensorFlow (session.run, .numpy()): the next chunk's copy runs
    # on a second thread while this one is written (write_rows).
    return write_rows(Rows(rows, dim, kind, read, f"variable {name!r}", prefetch=True), dest,
                      keys=keys, dtype=dtype, metadata=metadata, force=force,
                      on_overflow=on_overflow, chunk_rows=chunk_rows, progress=progress,
                      durable=durable, row_hashes=row_hashes)
