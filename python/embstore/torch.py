"""PyTorch integration: embedding weights straight from embstore.

- load_into(tensor, source, table): fills an existing tensor (CPU, pinned or CUDA) in place.
  A CPU tensor is written directly, with no intermediate copy; a CUDA tensor is filled through a
  pinned staging buffer of one chunk.
- embedding(source, table): a torch.nn.Embedding holding the table.
- from_file(path): zero copy. The table file is mapped copy-on-write (torch.from_file), so the
  weight shares the page cache with every other process that maps it until something writes it.
"""
import os

try:
    import torch
except ImportError as e:  # embstore itself works without PyTorch; this module does not
    raise ImportError(
        "embstore.torch needs PyTorch, which is not installed: pip install 'embstore[torch]' "
        "(or torch)") from e

from ._core import Source, _read_narrowed, _row_range, _target_dtype
from .errors import InvalidArgumentError

__all__ = ["embedding", "from_file", "load_into"]

DEFAULT_CHUNK_BYTES = 64 << 20

_TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
_TABLE_DTYPES = {v: k for k, v in _TORCH_DTYPES.items()}


def _connect_kwargs(kwargs):
    keys = ("token", "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "rpc_timeout",
            "load_balancing")
    return {k: kwargs.pop(k) for k in keys if k in kwargs}


def _table_arg(src, table):
    return None if src.kind == "file" else table


def load_into(tensor, source, table=None, *, rows=None, chunk_rows=None, **load_kwargs):
    """Fills `tensor` ([rows, dim], float32 / float16 / bfloat16, any device) with table rows.

    rows: (begin, end) or a slice of the table; default all rows. Returns the tensor.
    A float32 tensor takes any table exactly; a float16 or bfloat16 tensor takes its own dtype
    as stored, or narrower-rounded values of other dtypes (a finite value out of range is an
    error).
    """
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"load_into fills a torch.Tensor, not {type(tensor).__name__}")
    src = Source.resolve(source, **_connect_kwargs(load_kwargs))
    read_kwargs = _read_kwargs(load_kwargs)
    desc = src.describe(table)
    name = _table_arg(src, table)
    begin, end = _row_range(rows, desc["rows"])
    want = (end - begin, desc["dim"])
    if tuple(tensor.shape) != want:
        raise InvalidArgumentError(f"tensor has shape {list(tensor.shape)}, but table "
                                   f"{desc['name']!r} rows [{begin}, {end}) are {list(want)}")
    if tensor.dtype not in _TABLE_DTYPES:
        raise InvalidArgumentError(f"a {desc['dtype']} table fills float32, float16 or bfloat16 "
                                   f"tensors, not {tensor.dtype}")
    np_dtype, how = _target_dtype(_TABLE_DTYPES[tensor.dtype], desc["dtype"])
    if want[0] == 0:
        return tensor

    def read(r0, r1, out):
        # `out`: a writable, C-contiguous numpy array of np_dtype over the destination rows.
        if how == "narrow":
            _read_narrowed(src, name, r0, r1, out, desc, **read_kwargs)
        else:
            src.read_rows(name, r0, r1, out, how == "f32", **read_kwargs)

    def as_numpy(t):
        return t.detach().view(torch.uint8).numpy().view(np_dtype).reshape(t.shape[0], -1)

    with torch.no_grad():
        if tensor.device.type == "cpu" and tensor.is_contiguous():
            read(begin, end, as_numpy(tensor))  # straight into the tensor's memory
            return tensor
        # Elsewhere (CUDA, non-contiguous): stage one chunk at a time in pinned memory.
        itemsize = tensor.element_size()
        chunk = int(chunk_rows or max(1, DEFAULT_CHUNK_BYTES // (desc["dim"] * itemsize)))
        pin = tensor.device.type == "cuda"
        staging = torch.empty((min(chunk, want[0]), desc["dim"]), dtype=tensor.dtype,
                              pin_memory=pin)
        for off in range(0, want[0], chunk):
            n = min(chunk, want[0] - off)
            part = staging[:n]
            read(begin + off, begin + off + n, as_numpy(part))
            tensor[off:off + n].copy_(part, non_blocking=False)
    return tensor


def _read_kwargs(kwargs):
    allowed = {"streams", "timeout", "verify", "progress", "local"}
    extra = set(kwargs) - allowed
    if extra:
        raise InvalidArgumentError(f"unexpected arguments {sorted(extra)}")
    out = dict(kwargs)
    if out.get("timeout") is None:
        out.pop("timeout", None)
    return out


def embedding(source, table=None, *, freeze=True, rows=None, dtype=torch.float32, device=None,
              padding_idx=None, **load_kwargs):
    """A torch.nn.Embedding whose weight is the table (or rows (begin, end) of it)."""
    src = Source.resolve(source, **_connect_kwargs(load_kwargs))
    desc = src.describe(table)
    begin, end = _row_range(rows, desc["rows"])
    if end == begin:
        raise InvalidArgumentError(f"rows=({begin}, {end}) of table {desc['name']!r} is empty: an "
                                   f"embedding needs at least one row")
    weight = torch.empty((end - begin, desc["dim"]), dtype=dtype,
                         device=device if device is not None else "cpu")
    load_into(weight, src, table, rows=(begin, end), **load_kwargs)
    return torch.nn.Embedding.from_pretrained(weight, freeze=freeze, padding_idx=padding_idx)


def from_file(path):
    """The matrix of a local table file as a tensor mapped copy-on-write: zero copy, writable.

    Returns a [rows, dim] tensor of the stored dtype (float32, float16 or bfloat16).
    """
    t = Source.resolve(path)
    if t.kind != "file":
        raise InvalidArgumentError(f"from_file needs a table file, not {path!r}")
    native = t._view_table(None)
    dtype = _TORCH_DTYPES[native.dtype]
    itemsize = torch.tensor([], dtype=dtype).element_size()
    size = os.path.getsize(native.path) // itemsize
    # MAP_PRIVATE over the whole file; the matrix starts page-aligned at data_offset.
    flat = torch.from_file(native.path, shared=False, size=size, dtype=dtype)
    first = native.data_offset // itemsize
    return flat[first:first + native.rows * native.dim].view(native.rows, native.dim)

