"""Shards on parameter servers load where they live (assign() under ParameterServerStrategy)."""
import json
import os
import threading

import numpy as np

from .._core import Source, load as _load
from ..errors import CancelledError, EmbstoreError, FailedPreconditionError, InvalidArgumentError
from ._common import (_chunk_rows, _full_shape, _np_dtype, _scatter_rows,
                      _table_rows, _var_name, tf)

#
# Under ParameterServerStrategy the coordinator creates each shard of a ShardedVariable on a
# "ps" task. Feeding the rows from the coordinator would pull the whole table through it and push
# it out again. Instead, assign() runs, on each shard's own device, a function of PyFunc ops that
# call _load_where_held in the process that executes them: the ps task itself, which reads its
# rows from the source and scatters them into the shard in place. A PyFunc finds its Python
# callback by a token in the executing process's registry; the token is fixed here and
# registered by `import embstore.tf`, so every task that holds shards must import embstore.tf
# before serving (docs/PYTHON.md, "Distributed training").

_WHERE_HELD_TOKEN = "embstore.tf.load_where_held.v1"
_ERROR_MARK = "embstore-error:"


def _on_parameter_server(variable):
    device = getattr(variable, "device", "") or ""
    return tf.DeviceSpec.from_string(device).job == "ps"


class _HeldSources:
    """The sources a ps task has open, by (source, connection options), kept for the chunks of
    one shard and dropped after its last one."""

    def __init__(self):
        self._open = {}
        self._lock = threading.Lock()

    def get(self, source, connect):
        key = (source, json.dumps(connect, sort_keys=True))
        with self._lock:
            if key not in self._open:
                self._open[key] = Source.resolve(source, **connect)
            return self._open[key]

    def release(self, source, connect):
        with self._lock:
            self._open.pop((source, json.dumps(connect, sort_keys=True)), None)


_HELD_SOURCES = _HeldSources()


def _load_where_held(spec, off, n):
    """PyFunc callback, run by the task that holds a shard: rows [off, off + n) of the shard.
    Errors are raised as ValueError (InvalidArgument to TensorFlow) whose message starts with
    the embstore error's class name, so the coordinator can raise the same class."""
    try:
        spec = json.loads(bytes(spec).decode())
        off, n = int(off), int(n)
        src = _HELD_SOURCES.get(spec["source"], spec["connect"])
        table = spec["table"]
        desc = src.describe(table)
        rows = spec["rows"]
        if isinstance(rows, dict):
            rows = slice(*rows["slice"])
        begin, end = _table_rows(src, desc, rows)
        want = [end - begin, desc["dim"]]
        if want != spec["shape"]:
            raise InvalidArgumentError(
                f"variable {spec['variable']!r} has shape {spec['shape']}, but "
                f"{src.where(desc)} rows [{begin}, {end}) are {want}")
        first = begin + spec["first"] + off
        np_dtype = np.dtype(spec["np_dtype"]) if spec["np_dtype"] != "bfloat16" \
            else tf.bfloat16.as_numpy_dtype
        arr = _load(src, table, rows=(first, first + n), dtype=spec["load_dtype"],
                    **spec["read"]).astype(np_dtype, copy=False)
        if off + n >= spec["shard_rows"]:
            _HELD_SOURCES.release(spec["source"], spec["connect"])
        return arr
    except EmbstoreError as e:
        _HELD_SOURCES.release(spec["source"], spec["connect"])
        raise ValueError(f"{_ERROR_MARK}{type(e).__name__}: {e}") from None


def _register_where_held():
    from tensorflow.python.ops import script_ops  # the PyFunc registry; no public API for it
    # The registry holds its callbacks weakly; this module keeps _load_where_held alive.
    script_ops._py_funcs._funcs[_WHERE_HELD_TOKEN] = _load_where_held


_register_where_held()


def _assign_where_held(variable, held, source, table, rows, chunk_rows, connect, read_kwargs):
    """Loads each (shard, first_row) of `held` on the task that holds it (see above)."""
    if isinstance(source, Source):
        source = source.location
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidArgumentError("shards on parameter servers need a source named by a path or "
                                   f"a server target, not {type(source).__name__}")
    progress = read_kwargs.pop("progress", None)
    full = _full_shape(variable)
    total = full[0]
    done = 0
    for part, first in held:
        np_dtype, load_dtype = _np_dtype(part)
        nrows = int(part.shape[0])
        dims = part.shape.as_list()[1:]
        chunk = _chunk_rows(chunk_rows, int(np.prod(dims, dtype=np.int64)),
                            np.dtype(np_dtype).itemsize)
        spec = json.dumps({
            "source": os.fspath(source), "table": table, "connect": connect, "read": read_kwargs,
            "rows": {"slice": [rows.start, rows.stop, rows.step]} if isinstance(rows, slice)
            else (None if rows is None else list(rows)),
            "variable": _var_name(variable), "shape": list(full),
            "first": first, "shard_rows": nrows, "load_dtype": load_dtype,
            "np_dtype": "bfloat16" if load_dtype == "bfloat16" else np.dtype(np_dtype).name})

        def load(part=part, spec=spec, nrows=nrows, dims=dims, chunk=chunk):
            with tf.device(part.device):
                last = None
                for off in range(0, nrows, chunk):
                    n = min(chunk, nrows - off)
                    # One chunk in memory at a time: each load waits for the previous write.
                    with tf.control_dependencies([last] if last is not None else []):
                        values = tf.raw_ops.PyFunc(
                            input=[tf.constant(spec), tf.constant(off, tf.int64),
                                   tf.constant(n, tf.int64)],
                            token=_WHERE_HELD_TOKEN, Tout=[part.dtype.base_dtype])[0]
                    values.set_shape([n] + dims)
                    last = _scatter_rows(part, off, values)

        try:
            tf.function(load, autograph=False)()
        except tf.errors.OpError as e:
            raise _held_error(e, part) from None
        done += nrows
        if progress is not None and progress(done, total) is False:
            raise CancelledError(f"loading {_var_name(variable)!r} cancelled by progress()")


def _held_error(e, part):
    """The embstore error a ps task raised, as the same class here, naming the task."""
    from .. import errors
    where = f" (on {part.device})"
    msg = e.message
    if _ERROR_MARK in msg:
        name, _, text = msg.split(_ERROR_MARK, 1)[1].partition(": ")
        text = text.split("\n", 1)[0]
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, EmbstoreError):
            return cls(text + where)
    if _WHERE_HELD_TOKEN in msg:
        return FailedPreconditionError(
            f"the task holding shard {_var_name(part)!r}{where} cannot load it: it has not "
            f"imported embstore.tf (\"Could not find callback with key={_WHERE_HELD_TOKEN}\"); "
            f"every task that holds shards must `import embstore.tf` before it serves")
    return e
