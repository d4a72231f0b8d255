"""Shared by the embstore.tf modules: partitions and shapes of variables, row ranges, chunk
sizes, dtypes, the scatter that writes rows, and the keyword arguments loads take."""
import numpy as np
import tensorflow as tf

from .._core import _row_range
from ..errors import InvalidArgumentError

# Rows move in chunks of about this size, through two reused buffers (one read while the other is
# written into the variable): peak memory above the variable is about three chunks.
DEFAULT_CHUNK_BYTES = 32 << 20


def _partitions(variable):
    """[(variable, first_row)] of a possibly partitioned variable, in row order."""
    if hasattr(variable, "_get_variable_list"):  # tf.compat.v1 PartitionedVariable
        parts = variable._get_variable_list()
    elif hasattr(variable, "variables") and not isinstance(variable, tf.Variable):
        parts = list(variable.variables)  # tf.distribute ShardedVariable
    else:
        return [(variable, 0)]
    out, row = [], 0
    for p in parts:
        info = getattr(p, "_save_slice_info", None)
        if info is not None and (any(info.var_offset[1:]) or
                                 list(info.var_shape[1:]) != list(info.full_shape[1:])):
            # Slices along columns (fixed_size_partitioner(n, axis=1)): each holds some columns
            # of every row. Summing their rows would report a shape the variable does not have.
            full = [int(d) for d in info.full_shape]
            shapes = ", ".join(str([int(d) for d in q.shape]) for q in parts)
            raise InvalidArgumentError(
                f"variable {_var_name(variable)!r} has shape {full} in {len(parts)} slices "
                f"along columns ({shapes}); embstore fills variables partitioned by rows "
                f"(axis=0, as fixed_size_partitioner(n) or min_max_variable_partitioner make "
                f"them), since each slice then holds whole rows of the table")
        first = info.var_offset[0] if info is not None else row
        out.append((p, first))
        row = first + int(p.shape[0])
    return out


def _full_shape(variable):
    parts = _partitions(variable)
    rows = sum(int(p.shape[0]) for p, _ in parts)
    return (rows,) + tuple(int(d) for d in parts[0][0].shape[1:])


def _var_name(variable):
    return getattr(variable, "name", None) or repr(variable)


def _rows_arg(rows):
    """Checks the form of a rows= argument before any table is opened: None, a slice, or
    (begin, end) with 0 <= begin <= end. Returns None, the slice, or (begin, end)."""
    if rows is None or isinstance(rows, slice):
        return rows
    try:
        begin, end = rows
        begin, end = int(begin), int(end)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"rows= must be (begin, end) or a slice, not {rows!r}") from None
    if begin < 0 or end < begin:
        raise InvalidArgumentError(
            f"rows=({begin}, {end}) is not a row range: expected 0 <= begin <= end")
    return begin, end


def _check_rows_fit(variable, rows):
    """With an explicit (begin, end), the variable's row count is known before the table is
    opened: reject an empty or wrongly sized range now, not after a download."""
    if rows is None or isinstance(rows, slice):
        return
    begin, end = rows
    have = _full_shape(variable)[0]
    if end - begin != have:
        what = "is empty" if end == begin else f"holds {end - begin} rows"
        raise InvalidArgumentError(
            f"rows=({begin}, {end}) {what}, but variable {_var_name(variable)!r} has {have} rows")


def _table_rows(src, desc, rows):
    """(begin, end) of rows= within the described table, or an error naming the table."""
    try:
        return _row_range(rows, desc["rows"])
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{src.where(desc)}: {e}") from None


def _check_shape(variable, src, desc, rows):
    shape = _full_shape(variable)
    begin, end = _table_rows(src, desc, rows)
    want = (end - begin, desc["dim"])
    if shape != want:
        raise InvalidArgumentError(
            f"variable {_var_name(variable)!r} has shape {list(shape)}, but "
            f"{src.where(desc)} rows [{begin}, {end}) are {list(want)}")
    return begin


def _chunk_rows(chunk_rows, dim, itemsize):
    if chunk_rows:
        return int(chunk_rows)
    return max(1, DEFAULT_CHUNK_BYTES // max(1, dim * itemsize))


def _np_dtype(variable):
    """(numpy dtype of the variable, the load dtype that gives it): F16/BF16 tables load exactly
    into float32 variables, a table of the variable's own dtype as it is, and an F32 table into a
    float16/bfloat16 variable rounded."""
    dt = variable.dtype.base_dtype if hasattr(variable.dtype, "base_dtype") else variable.dtype
    if dt == tf.float32:
        return np.float32, "float32"
    if dt == tf.float16:
        return np.float16, "float16"
    if dt == tf.bfloat16:
        return tf.bfloat16.as_numpy_dtype, "bfloat16"
    raise InvalidArgumentError(f"variable {variable.name!r} has dtype {dt.name}; embstore fills "
                               f"float32, float16 and bfloat16 variables")


def _scatter_rows(variable, first, values):
    """The op that writes `values` into rows [first, first + len(values)) of `variable` in place.

    A scatter update copies each row straight into the variable's buffer. A sliced assign
    (variable[a:b].assign) goes through StridedSliceAssign, several times slower, and for a
    resource variable reads the variable first, which can make the write copy the whole buffer.
    """
    n = tf.shape(values, out_type=tf.int64)[0]
    indices = tf.range(tf.cast(first, tf.int64), tf.cast(first, tf.int64) + n)
    if _is_resource(variable):
        return tf.raw_ops.ResourceScatterUpdate(resource=variable.handle, indices=indices,
                                                updates=values)
    return tf.compat.v1.scatter_update(variable, indices, values)


def _is_resource(variable):
    return isinstance(variable, tf.Variable) and getattr(variable, "handle", None) is not None \
        and variable.handle.dtype == tf.resource


