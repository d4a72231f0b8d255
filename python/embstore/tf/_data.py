"""tf.data: dataset() streams a table's rows as the pipeline consumes them."""
import numpy as np

from .._core import LoadArgs, load as _load
from ..errors import InvalidArgumentError
from ._common import _chunk_rows, _rows_arg, _table_rows, tf


def dataset(source, table=None, *, rows=None, batch_rows=None, with_keys=False, dtype="float32",
            **load_kwargs):
    """A tf.data.Dataset of the table's rows (or (key, row) pairs with with_keys=True), read from
    the source chunk by chunk as the pipeline consumes them."""
    rows = _rows_arg(rows)
    args = LoadArgs(load_kwargs, "embstore.tf")
    src = args.resolve(source)
    desc = src.describe(table)
    begin, end = _table_rows(src, desc, rows)
    dim = desc["dim"]
    chunk = int(batch_rows or _chunk_rows(None, dim, 4) // 8 or 1)
    if with_keys and not desc["has_keys"]:
        raise InvalidArgumentError(f"{src.where(desc)} has no keys")

    def chunks():
        for off in range(begin, end, chunk):
            n = min(chunk, end - off)
            arr = _load(src, table, rows=(off, off + n), dtype=dtype, **args.read)
            if with_keys:
                yield np.array(src.keys(table, off, off + n), dtype=object), arr
            else:
                yield arr

    out_dtype = tf.float32 if dtype == "float32" else tf.as_dtype(np.dtype(dtype))
    vec = tf.TensorSpec([None, dim], out_dtype)
    sig = (tf.TensorSpec([None], tf.string), vec) if with_keys else vec
    ds = tf.data.Dataset.from_generator(chunks, output_signature=sig)
    return ds.unbatch()
