"""embstore.save and embstore.convert: tables written from Python.

save() streams a matrix (numpy array, torch tensor, TensorFlow tensor or variable) into a table
chunk by chunk: each chunk of rows is handed to the native writer (embstore._native.Writer), which
rounds it once to the table's dtype, checksums it and appends it. Nothing holds a second copy of
the matrix: the extra memory is one chunk (16 MiB by default) plus the keys; two chunks where
TensorFlow must copy each chunk out (embstore.tf.save says when), the next one while this one is
written. The table appears at
its destination (a .emb path, s3://BUCKET/KEY or hdfs://NAMENODE/PATH) whole or not at all, when
save() returns; an error or an interrupt (KeyboardInterrupt) leaves nothing behind, and an existing
destination is only replaced with force=True.

The framework helpers (embstore.tf.save, embstore.torch.save) describe their variables as a
`Rows` and call write_rows().
"""
import os

import numpy as np

from ._native_import import _native
from .errors import InvalidArgumentError

CHUNK_BYTES = 16 << 20

# Element kinds the native writer takes, by the names numpy, torch and TensorFlow give them.
_KINDS = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
    "half": "f16", "float": "f32", "double": "f64",
}
# Table dtypes save() writes, by every spelling a dtype= argument may use.
_TABLE_DTYPES = {
    "f32": "f32", "float32": "f32", "F32": "f32", "float": "f32",
    "f16": "f16", "float16": "f16", "F16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16", "BF16": "bf16",
}


def _dtype_name(dtype):
    """'float32', 'bfloat16', ... for a numpy, torch or TensorFlow dtype, or a string."""
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, type) and issubclass(dtype, np.generic):
        return np.dtype(dtype).name  # np.float16
    name = getattr(dtype, "name", None)  # numpy and TensorFlow dtypes
    if isinstance(name, str):
        return name
    text = str(dtype)  # torch.float16
    return text.split(".", 1)[1] if text.startswith("torch.") else text


def table_dtype(dtype, kind):
    """The table dtype ('f32', 'f16', 'bf16') of a dtype= argument; None keeps the source's
    (float64 is stored as f32)."""
    if dtype is None:
        return {"f64": "f32"}.get(kind, kind)
    name = _TABLE_DTYPES.get(_dtype_name(dtype))
    if name is None:
        raise InvalidArgumentError(
            f"dtype={dtype!r} is not a table dtype: use 'f32' (float32), 'f16' (float16) or "
            f"'bf16' (bfloat16)")
    return name


def element_kind(dtype, what):
    """The writer's element kind of a source dtype, or a clear error naming `what`."""
    kind = _KINDS.get(_dtype_name(dtype))
    if kind is None:
        raise InvalidArgumentError(
            f"{what} has dtype {_dtype_name(dtype)}; embstore saves float32, float16, bfloat16 "
            f"and float64 matrices")
    return kind


class Rows:
    """A matrix to save, read a chunk of rows at a time.

    read(begin, end) returns rows [begin, end) as a C-contiguous array the native writer accepts
    (numpy, or a CPU torch tensor), whose elements are `kind` ('f32', 'f16', 'bf16', 'f64';
    2-byte kinds may come as uint16/int16 bit patterns).

    prefetch: read() is a copy (TensorFlow's session.run or .numpy()), so the next chunk is read
    on a second thread while this one is written: the copy overlaps the write, for one more chunk
    of memory."""

    def __init__(self, rows, dim, kind, read, what, prefetch=False):
        self.rows, self.dim, self.kind, self.read, self.what = int(rows), int(dim), kind, read, what
        self.prefetch = bool(prefetch)


def _check_shape(shape, what):
    if len(shape) != 2:
        raise InvalidArgumentError(
            f"{what} has shape {tuple(shape)}; a table is a 2-D matrix [rows, dim]")
    rows, dim = int(shape[0]), int(shape[1])
    if dim < 1:
        raise InvalidArgumentError(f"{what} has shape {tuple(shape)}; dim must be at least 1")
    return rows, dim


def numpy_rows(array, what="the array"):
    if not array.flags.c_contiguous:
        raise InvalidArgumentError(
            f"{what} is not C-contiguous (strides {array.strides}); embstore streams rows "
            f"without copying the matrix: pass np.ascontiguousarray(...) if a copy is acceptable")
    rows, dim = _check_shape(array.shape, what)
    kind = element_kind(array.dtype, what)
    if kind == "bf16":  # ml_dtypes' bfloat16: hand over the bit patterns
        array = array.view(np.uint16)
    return Rows(rows, dim, kind, lambda b, e: array[b:e], what)


def torch_rows(tensor, what="the tensor"):
    import torch
    t = tensor.detach()
    if type(t).__name__ == "DTensor" or t.layout != torch.strided:
        raise InvalidArgumentError(
            f"{what} is a {'DTensor' if type(t).__name__ == 'DTensor' else str(t.layout)}; "
            f"use embstore.torch.save, which saves each rank's shard")
    if not t.is_contiguous():
        raise InvalidArgumentError(
            f"{what} is not contiguous (strides {tuple(t.stride())}); embstore streams rows "
            f"without copying the matrix: pass tensor.contiguous() if a copy is acceptable")
    rows, dim = _check_shape(t.shape, what)
    kind = element_kind(t.dtype, what)

    def read(b, e):
        chunk = t[b:e]
        if chunk.device.type != "cpu":
            chunk = chunk.to("cpu")
        return chunk.view(torch.int16) if kind == "bf16" else chunk
    return Rows(rows, dim, kind, read, what)


def tf_eager_rows(value, what="the variable"):
    shape = value.shape
    if shape.rank is None or any(d is None for d in shape):
        raise InvalidArgumentError(f"{what} has no static shape ({shape})")
    rows, dim = _check_shape(shape, what)
    kind = element_kind(value.dtype, what)
    # A variable on the host is read without a copy, as one snapshot (embstore.tf.save says how).
    from .tf._save import eager_view
    whole = eager_view(value)

    def read(b, e):
        chunk = value[b:e].numpy() if whole is None else whole[b:e]
        return chunk.view(np.uint16) if kind == "bf16" else chunk
    return Rows(rows, dim, kind, read, what)


def rows_of(data):
    """A Rows for a numpy array, torch tensor, or eager TensorFlow tensor or variable."""
    if isinstance(data, np.ndarray):
        return numpy_rows(data)
    module = type(data).__module__ or ""
    if module.startswith("torch"):
        return torch_rows(data)
    if module.startswith(("tensorflow", "keras", "tf_keras")):
        # A Keras 3 variable holds its TensorFlow variable in .value (a property).
        value = getattr(data, "value", None) if "keras" in module else None
        return tf_eager_rows(value if value is not None and not callable(value) else data)
    raise InvalidArgumentError(
        f"cannot save a {type(data).__module__}.{type(data).__name__}: pass a numpy array, a "
        f"torch tensor, or a TensorFlow tensor or variable")


def _check_keys(keys, rows):
    if keys is None:
        return None
    if isinstance(keys, (str, bytes)):
        raise InvalidArgumentError("keys= must be a sequence of strings, one a row, not a string")
    keys = list(keys)
    if len(keys) != rows:
        raise InvalidArgumentError(f"keys= has {len(keys)} keys for {rows} rows")
    for i, k in enumerate(keys):
        if isinstance(k, bytes):
            try:
                keys[i] = k.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InvalidArgumentError(f"key {k!r} of row {i} is not UTF-8") from e
        elif not isinstance(k, str):
            raise InvalidArgumentError(f"key {k!r} of row {i} is a {type(k).__name__}, not a str")
        if not keys[i]:
            raise InvalidArgumentError(f"key of row {i} is empty; keys must be 1 to 65535 bytes")
    return keys


def _metadata(metadata):
    if metadata is None:
        return {}
    out = {}
    for k, v in dict(metadata).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidArgumentError(f"metadata= maps strings to strings; got {k!r}: {v!r}")
        out[k] = v
    return out


def _chunks(src, step):
    """(begin, end, rows) of `src`, `step` rows at a time; with src.prefetch, the next chunk is
    read on a second thread while the caller writes this one (a read's error surfaces in order)."""
    ranges = [(b, min(src.rows, b + step)) for b in range(0, src.rows, step)]
    if not src.prefetch or len(ranges) < 2:
        for b, e in ranges:
            yield b, e, src.read(b, e)
        return
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1, thread_name_prefix="embstore-save-read") as pool:
        pending = pool.submit(src.read, *ranges[0])
        for i, (b, e) in enumerate(ranges):
            chunk = pending.result()
            pending = pool.submit(src.read, *ranges[i + 1]) if i + 1 < len(ranges) else None
            yield b, e, chunk
            chunk = None


def write_rows(src, dest, *, keys=None, dtype=None, metadata=None, force=False,
               on_overflow="error", chunk_rows=None, progress=None, durable=True,
               row_hashes=True):
    """Writes the matrix `src` (a Rows) as a table at `dest`; returns what finish() reports."""
    dest = os.fspath(dest)
    keys = _check_keys(keys, src.rows)
    writer = _native.Writer(dest, src.dim, table_dtype(dtype, src.kind), keys is not None,
                            bool(force), _metadata(metadata), on_overflow, 0, bool(durable),
                            bool(row_hashes), src.rows)
    try:
        step = int(chunk_rows) if chunk_rows else max(1, CHUNK_BYTES // (src.dim * 4))
        if step < 1:
            raise InvalidArgumentError(f"chunk_rows={chunk_rows!r} must be at least 1")
        for b, e, chunk in _chunks(src, step):
            writer.append(chunk, src.kind, None if keys is None else keys[b:e])
            if progress is not None and progress(e, src.rows) is False:
                from .errors import CancelledError
                raise CancelledError(f"saving {dest!r}: cancelled by the progress callback")
        return writer.finish(progress)
    except BaseException:
        writer.abort()
        raise


def save(data, dest, *, keys=None, dtype=None, metadata=None, force=False, on_overflow="error",
         chunk_rows=None, progress=None, durable=True, row_hashes=True):
    """Saves a matrix as a table file at `dest` (a .emb path, s3://BUCKET/KEY, hdfs://...).

    data: a 2-D numpy array, torch tensor, or eager TensorFlow tensor or variable (float32,
    float16, bfloat16 or float64), C-contiguous. TF1 graph variables, partitioned variables and
    sharded torch tensors have their own writers: embstore.tf.save and embstore.torch.save.
    keys: one str a row (unique, 1 to 65535 UTF-8 bytes), stored for lookups by key.
    dtype: the table's dtype, 'f32', 'f16' or 'bf16'; default the data's own (float64 is stored
    as f32). Each value is rounded once, to nearest even, from the data's own precision, as
    `embstore convert` rounds text.
    on_overflow: a finite value too large for the dtype is an error naming its row and column
    ('error'), or stored as infinity ('inf').
    force: replace an existing table (atomically, once the new one is complete).
    progress: called as progress(rows_done, rows) after each chunk (and with bytes during an
    upload); returning False cancels.
    durable: a local table is fsynced before it is published, so it survives a machine crash
    once save() returns; durable=False skips that wait (as np.save does) and the table still
    appears whole or not at all.
    row_hashes: store each row's hash (docs/FORMAT.md, version 3: 8 bytes a row), so a copy of
    this table can later be brought up to date by the rows that changed (embstore.update,
    `embstore pull --update`), from an object store too.
    Returns {'path', 'rows', 'dim', 'dtype', 'uploaded_bytes'}; for an s3:// or hdfs:// dest
    also 'delta_rows', 'delta_bytes' and 'delta_skipped': replacing an earlier version (with
    force=True) uploads the rows that changed beside the table, as DEST.delta, so copies of that
    version update with one GET (docs/FORMAT.md, "Deltas"); 'delta_skipped' says why there is
    none when delta_rows is 0.
    """
    return write_rows(rows_of(data), dest, keys=keys, dtype=dtype, metadata=metadata,
                      force=force, on_overflow=on_overflow, chunk_rows=chunk_rows,
                      progress=progress, durable=durable, row_hashes=row_hashes)


def convert(src, dest, *, format="auto", dtype="f32", delimiter=None, comments="#", skip_rows=0,
            threads=0, force=False, on_overflow="error", on_duplicate_key="error",
            metadata=None, progress=None):
    """Converts a text embedding file (np.savetxt matrix, word2vec, GloVe, fastText .vec,
    word2vec binary; gzip too) into a table, as `embstore convert` does, with the same options
    and errors (docs/CONVERT.md). `dest` is a .emb path, s3://... or hdfs://...

    Returns the conversion's statistics: rows, dim, dtype, format, input_bytes, output_bytes,
    seconds, threads, kernel, ...
    """
    dtype = table_dtype(dtype, "f32")
    return _native.convert(os.fspath(src), os.fspath(dest), format, dtype, delimiter, comments,
                           int(skip_rows), int(threads), bool(force), on_overflow,
                           on_duplicate_key, _metadata(metadata), progress)
