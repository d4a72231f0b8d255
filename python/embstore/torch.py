"""PyTorch integration: embedding weights straight from embstore.

- load_into(tensor, source, table): fills an existing tensor (CPU, pinned or CUDA) in place.
  A CPU tensor is written directly, with no intermediate copy; a CUDA tensor is filled through a
  pinned staging buffer of one chunk.
- embedding(source, table): a torch.nn.Embedding holding the table.
- from_file(path): zero copy. The table file is mapped copy-on-write (torch.from_file), so the
  weight shares the page cache with every other process that maps it until something writes it.
"""
import os

import torch

from ._core import Source
from .errors import InvalidArgumentError

__all__ = ["embedding", "from_file", "load_into"]

DEFAULT_CHUNK_BYTES = 64 << 20

_TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def _connect_kwargs(kwargs):
    keys = ("token", "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "rpc_timeout",
            "load_balancing")
    return {k: kwargs.pop(k) for k in keys if k in kwargs}


def _table_arg(src, table):
    return None if src.kind == "file" else table


def load_into(tensor, source, table=None, *, rows=None, chunk_rows=None, **load_kwargs):
    """Fills `tensor` ([rows, dim], float32 / float16 / bfloat16, any device) with table rows.

    rows: (begin, end) of the table; default all rows. Returns the tensor.
    """
    src = Source.resolve(source, **_connect_kwargs(load_kwargs))
    desc = src.describe(table)
    name = _table_arg(src, table)
    begin, end = rows if rows is not None else (0, desc["rows"])
    want = (end - begin, desc["dim"])
    if tuple(tensor.shape) != want:
        raise InvalidArgumentError(f"tensor has shape {list(tensor.shape)}, but table "
                                   f"{desc['name']!r} rows [{begin}, {end}) are {list(want)}")
    stored = _TORCH_DTYPES[desc["dtype"]]
    if tensor.dtype == torch.float32:
        to_f32 = stored != torch.float32
    elif tensor.dtype == stored:
        to_f32 = False
    else:
        raise InvalidArgumentError(f"a {desc['dtype']} table fills float32 or {stored} tensors, "
                                   f"not {tensor.dtype}")
    if tensor.device.type == "cpu" and tensor.is_contiguous():
        # Write straight into the tensor's memory, viewed as bytes.
        with torch.no_grad():
            flat = tensor.detach().view(torch.uint8) if tensor.dtype != torch.uint8 else tensor
            out = flat.numpy().reshape(want[0], -1)
            src.read_rows(name, begin, end, out, to_f32, **_read_kwargs(load_kwargs))
        return tensor
    # Elsewhere (CUDA, non-contiguous): stage one chunk at a time in pinned memory.
    itemsize = torch.tensor([], dtype=tensor.dtype).element_size()
    chunk = int(chunk_rows or max(1, DEFAULT_CHUNK_BYTES // (desc["dim"] * itemsize)))
    pin = tensor.device.type == "cuda"
    staging = torch.empty((min(chunk, want[0]), desc["dim"]), dtype=tensor.dtype, pin_memory=pin)
    with torch.no_grad():
        for off in range(0, want[0], chunk):
            n = min(chunk, want[0] - off)
            part = staging[:n]
            out = part.view(torch.uint8).numpy().reshape(n, -1)
            src.read_rows(name, begin + off, begin + off + n, out, to_f32,
                          **_read_kwargs(load_kwargs))
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
    begin, end = rows if rows is not None else (0, desc["rows"])
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
    native = t._local(None)
    dtype = _TORCH_DTYPES[native.dtype]
    itemsize = torch.tensor([], dtype=dtype).element_size()
    size = os.path.getsize(native.path) // itemsize
    # MAP_PRIVATE over the whole file; the matrix starts page-aligned at data_offset.
    flat = torch.from_file(native.path, shared=False, size=size, dtype=dtype)
    first = native.data_offset // itemsize
    return flat[first:first + native.rows * native.dim].view(native.rows, native.dim)

