"""PyTorch integration: embedding weights straight from embstore.

- load_into(tensor, source, table): fills an existing tensor (CPU, pinned or CUDA) in place.
  A CPU tensor is written directly, with no intermediate copy; a CUDA tensor is filled through a
  pinned staging buffer of one chunk.
- embedding(source, table): a torch.nn.Embedding holding the table.
- from_file(path): zero copy. The table file is mapped copy-on-write (torch.from_file), so the
  weight shares the page cache with every other process that maps it until something writes it.

Distributed training (torch.distributed; docs/PYTHON.md, "Distributed training"):

- load_sharded(dtensor, source, table): each rank reads only the rows of its own shard of a
  DTensor (Shard(0), Shard(1) and Replicate placements, FSDP2 parameters included).
- broadcast_load(tensor, source, table, group): a replicated tensor (DDP) filled on every rank of
  a group while the source is read about once: each rank reads 1/W of the rows, and broadcasts
  complete the table everywhere.
- StorageReader(source, {fqn: table}): a torch.distributed.checkpoint StorageReader, so
  dcp.load(state_dict, storage_reader=...) fills any (sharded) state dict from tables.

Writing back: save(module_or_tensor, dest) writes a trained weight as a table, a chunk at a time;
a row-sharded DTensor (FSDP2) is written by every rank holding rows, as one shard table each and
a manifest that load_sharded and every other reader open as one table.
"""
import os

try:
    import torch
except ImportError as e:  # embstore itself works without PyTorch; this module does not
    raise ImportError(
        "embstore.torch needs PyTorch, which is not installed: pip install 'embstore[torch]' "
        "(or torch)") from e

import numpy as np

from ._core import LoadArgs, Source, _chunks_into, _fill, _row_range, numpy_dtype
from ._native_import import _native
from ._save import element_kind, table_dtype, torch_rows, write_rows
from .errors import FailedPreconditionError, InvalidArgumentError

__all__ = ["StorageReader", "broadcast_load", "embedding", "from_file", "load_into",
           "load_sharded", "save"]

DEFAULT_CHUNK_BYTES = 64 << 20
# Column shards read whole rows; each of the two staging buffers holds this much of them.
COLUMN_CHUNK_BYTES = 32 << 20

_TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
_TABLE_DTYPES = {v: k for k, v in _TORCH_DTYPES.items()}


class _Table:
    """One table of a source, described once: what every entry point below needs to fill a
    tensor, opened with `args` (a LoadArgs)."""

    def __init__(self, source, table, args, rows=None):
        self.src = args.resolve(source)
        self.read_kwargs = args.read
        # Describe through the native source the reads will use (local= picks which one).
        self.desc = self.src.describe(table, args.local)
        self.name = table
        self.begin, self.end = _row_range(rows, self.desc["rows"])
        self.shape = (self.end - self.begin, self.desc["dim"])

    def where(self):
        rows = "" if self.shape[0] == self.desc["rows"] else f" rows [{self.begin}, {self.end})"
        return f"table {self.desc['name']!r}{rows}"

    def check(self, tensor, what="tensor"):
        if tuple(tensor.shape) != self.shape:
            raise InvalidArgumentError(f"{what} has shape {list(tensor.shape)}, but "
                                       f"{self.where()} is {list(self.shape)}")
        if tensor.dtype not in _TABLE_DTYPES:
            raise InvalidArgumentError(f"a {self.desc['dtype']} table fills float32, float16 or "
                                       f"bfloat16 tensors, not {tensor.dtype}")

    def fill(self, tensor, row, col=0, chunk_rows=None):
        """Writes table rows [row, row + n), columns [col, col + m) into `tensor` ([n, m], any
        device or layout), in place. `row` counts from the start of the table."""
        n, m = tensor.shape
        if n == 0 or m == 0:
            return
        if tensor.dtype not in _TABLE_DTYPES:
            raise InvalidArgumentError(f"a {self.desc['dtype']} table fills float32, float16 or "
                                       f"bfloat16 tensors, not {tensor.dtype}")
        dim = self.desc["dim"]
        np_dtype = numpy_dtype(_TABLE_DTYPES[tensor.dtype])
        itemsize = tensor.element_size()
        with torch.no_grad():
            if m == dim and tensor.device.type == "cpu" and tensor.is_contiguous():
                # Straight into the tensor's memory.
                _fill(self.src, self.name, self.desc, row, row + n, _as_numpy(tensor, np_dtype),
                      **self.read_kwargs)
                return
            if m == dim:
                # Whole rows elsewhere (CUDA, non-contiguous): one chunk at a time through a
                # staging buffer, pinned for CUDA so the copy is a plain DMA.
                chunk = int(chunk_rows or max(1, DEFAULT_CHUNK_BYTES // (dim * itemsize)))
                staging = torch.empty((min(chunk, n), dim), dtype=tensor.dtype,
                                      pin_memory=tensor.device.type == "cuda")
                for off in range(0, n, chunk):
                    k = min(chunk, n - off)
                    part = staging[:k]
                    _fill(self.src, self.name, self.desc, row + off, row + off + k,
                          _as_numpy(part, np_dtype), **self.read_kwargs)
                    tensor[off:off + k].copy_(part)
                return
            # Some columns: the format is row-major, so whole rows are read, chunk by chunk into
            # two reused buffers (the next chunk is read while this one is copied), and only the
            # wanted columns are kept.
            chunk = int(chunk_rows or max(1, COLUMN_CHUNK_BYTES // (dim * itemsize)))
            for off, rows in _chunks_into(self.src, self.name, self.desc, row, row + n, chunk,
                                          np_dtype, **self.read_kwargs):
                part = torch.from_numpy(rows.view(np.uint8)).view(tensor.dtype)
                tensor[off:off + part.shape[0]].copy_(part[:, col:col + m])


def _as_numpy(t, np_dtype):
    """A numpy view of the C-contiguous CPU tensor `t` ([n, dim]) as np_dtype: same memory."""
    return t.detach().view(torch.uint8).numpy().view(np_dtype).reshape(t.shape[0], -1)


def load_into(tensor, source, table=None, *, rows=None, chunk_rows=None, **load_kwargs):
    """Fills `tensor` ([rows, dim], float32 / float16 / bfloat16, any device) with table rows.

    rows: (begin, end) or a slice of the table; default all rows. Returns the tensor.
    A float32 tensor takes any table exactly; a float16 or bfloat16 tensor takes its own dtype
    as stored, or narrower-rounded values of other dtypes (a finite value out of range is an
    error).
    """
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"load_into fills a torch.Tensor, not {type(tensor).__name__}")
    t = _Table(source, table, LoadArgs(load_kwargs, "embstore.torch"), rows)
    t.check(tensor)
    t.fill(tensor, t.begin, chunk_rows=chunk_rows)
    return tensor


def embedding(source, table=None, *, freeze=True, rows=None, dtype=torch.float32, device=None,
              padding_idx=None, **load_kwargs):
    """A torch.nn.Embedding whose weight is the table (or rows (begin, end) of it)."""
    args = LoadArgs(load_kwargs, "embstore.torch")
    src = args.resolve(source)
    desc = src.describe(table, args.local)
    begin, end = _row_range(rows, desc["rows"])
    if end == begin:
        raise InvalidArgumentError(f"rows=({begin}, {end}) of table {desc['name']!r} is empty: an "
                                   f"embedding needs at least one row")
    weight = torch.empty((end - begin, desc["dim"]), dtype=dtype,
                         device=device if device is not None else "cpu")
    load_into(weight, src, table, rows=(begin, end), **args.read)
    return torch.nn.Embedding.from_pretrained(weight, freeze=freeze, padding_idx=padding_idx)


def from_file(path, *, verify=True):
    """The matrix of a local table file as a tensor mapped copy-on-write: zero copy, writable.

    Returns a [rows, dim] tensor of the stored dtype (float32, float16 or bfloat16). With
    verify (the default), every checksum block is checked before the tensor is returned
    (CorruptionError names a bad block); verify=False maps it unchecked.
    """
    native = Source.resolve(path)._view_table(None, why="from_file")
    if verify:
        native.verify_rows(0, native.rows)
    dtype = _TORCH_DTYPES[native.dtype]
    itemsize = torch.tensor([], dtype=dtype).element_size()
    size = os.path.getsize(native.path) // itemsize
    # MAP_PRIVATE over the whole file; the matrix starts page-aligned at data_offset.
    flat = torch.from_file(native.path, shared=False, size=size, dtype=dtype)
    first = native.data_offset // itemsize
    return flat[first:first + native.rows * native.dim].view(native.rows, native.dim)


# ---- Distributed training ------------------------------------------------------------------

def _distributed():
    if not torch.distributed.is_available():
        raise InvalidArgumentError("this PyTorch build has no torch.distributed")
    return torch.distributed


def load_sharded(dtensor, source, table=None, *, rows=None, chunk_rows=None, **load_kwargs):
    """Fills this rank's shard of a DTensor ([rows, dim] globally) from the table, in place.

    Each rank reads only the rows of its local shard: torch's own placement arithmetic
    (compute_local_shape_and_global_offset, as torch.distributed.checkpoint uses) gives the
    shard's shape and global offset. Placements may mix Shard(0), Shard(1) and Replicate() on a
    1-D or 2-D mesh; FSDP2 (fully_shard) parameters are Shard(0) DTensors. A shard of whole rows
    is written in place (CPU) or through one staging chunk (CUDA); a column shard (Shard(1))
    reads its rows in full, 32 MiB at a time, and keeps its columns. Ranks holding replicas read
    the same rows each; no collective is called. Returns the dtensor.
    """
    _distributed()
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    if not isinstance(dtensor, DTensor):
        raise InvalidArgumentError(
            f"load_sharded fills a DTensor, not {type(dtensor).__name__}; use load_into for a "
            "tensor of one process, broadcast_load for a tensor replicated on every rank")
    for p in dtensor.placements:
        if not (type(p) is Replicate or (type(p) is Shard and p.dim in (0, 1))):
            raise InvalidArgumentError(
                f"load_sharded takes Shard(0), Shard(1) and Replicate() placements, not {p!r} "
                f"(placements {tuple(dtensor.placements)})")
    t = _Table(source, table, LoadArgs(load_kwargs, "embstore.torch"), rows)
    t.check(dtensor, "DTensor")
    mesh = dtensor.device_mesh
    if mesh.get_coordinate() is None:
        return dtensor  # this rank holds no part of it
    shape, offset = compute_local_shape_and_global_offset(dtensor.shape, mesh,
                                                          dtensor.placements)
    with torch.no_grad():
        local = dtensor.to_local()
        if local.device.type == "meta":
            raise InvalidArgumentError(
                "the DTensor's local shard is on the meta device: allocate it first "
                "(module.to_empty(device=...)), then load")
        if tuple(local.shape) != tuple(shape):
            raise InvalidArgumentError(
                f"this rank's local shard has shape {list(local.shape)}, but placements "
                f"{tuple(dtensor.placements)} give it {list(shape)}")
        t.fill(local, t.begin + offset[0], offset[1], chunk_rows)
    return dtensor


def _blocks(rows, parts):
    """Row bounds splitting `rows` into `parts` contiguous blocks whose sizes differ by one."""
    return [rows * i // parts for i in range(parts + 1)]


def broadcast_load(tensor, source, table=None, group=None, *, rows=None, chunk_rows=None,
                   **load_kwargs):
    """Fills the same [rows, dim] tensor on every rank of `group` (default: the whole job), as a
    DDP-replicated weight, while reading the table about once per group.

    Every rank of the group must call it. Rank r of W reads rows [r*N/W, (r+1)*N/W) into its own
    part of `tensor` (in place for a CPU tensor, through one staging chunk for CUDA); then one
    broadcast per rank, from that rank, completes the table everywhere: gloo for CPU tensors,
    NCCL for CUDA tensors on a group that has it. Before broadcasting, the ranks agree (one small
    all_reduce) that every read succeeded and that their tensors have the same shape: a rank
    whose read failed raises its own error, the others raise FailedPreconditionError naming it,
    so none waits forever in a broadcast. `tensor` must be contiguous. Returns the tensor.
    """
    dist = _distributed()
    if not dist.is_initialized():
        raise InvalidArgumentError("broadcast_load needs torch.distributed initialized "
                                   "(torch.distributed.init_process_group, or torchrun)")
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(
            f"broadcast_load fills a torch.Tensor, not {type(tensor).__name__}")
    from torch.distributed.tensor import DTensor
    if isinstance(tensor, DTensor):
        raise InvalidArgumentError("broadcast_load fills a plain tensor replicated on every rank; "
                                   "use load_sharded for a DTensor")
    me = dist.get_rank(group)
    if me < 0:
        return tensor  # not a member of `group`
    world = dist.get_world_size(group)
    shape = tuple(tensor.shape) if tensor.dim() == 2 else (-1, -1)
    error, t = None, None
    try:
        t = _Table(source, table, LoadArgs(load_kwargs, "embstore.torch"), rows)
        t.check(tensor)
        if not tensor.is_contiguous():
            raise InvalidArgumentError("broadcast_load needs a contiguous tensor (broadcasts "
                                       "send its rows as one block per rank)")
        bounds = _blocks(shape[0], world)
        with torch.no_grad():
            t.fill(tensor[bounds[me]:bounds[me + 1]], t.begin + bounds[me],
                   chunk_rows=chunk_rows)
    except Exception as e:  # noqa: BLE001 - raised below, once the others have heard of it
        error = e
    # Before any broadcast, the ranks agree that every read succeeded and that their tensors
    # match: one all_reduce of a row per rank (failed, rows, row bytes).
    agree = torch.zeros((world, 3), dtype=torch.int64, device=tensor.device)
    agree[me] = torch.tensor([int(error is not None), shape[0], shape[1] * tensor.element_size()])
    dist.all_reduce(agree, group=group)
    agree = agree.cpu().tolist()
    if error is not None:
        raise error
    what = t.where()
    bad = [i for i in range(world) if agree[i][0]]
    if bad:
        raise FailedPreconditionError(
            f"broadcast_load of {what}: group rank(s) {bad} could not read their rows (their "
            f"own errors say why); nothing was broadcast")
    if any(row[1:] != agree[me][1:] for row in agree):
        raise InvalidArgumentError(
            f"broadcast_load of {what}: the ranks' tensors differ ([rows, bytes per row] by "
            f"group rank: {[row[1:] for row in agree]}); nothing was broadcast")
    # Each block goes out as bytes: every backend broadcasts uint8, whatever the tensor's dtype.
    works = []
    with torch.no_grad():
        flat = tensor.view(torch.uint8).view(-1)
        row_bytes = agree[me][2]
        for i in range(world):
            if bounds[i + 1] > bounds[i] and row_bytes:
                block = flat[bounds[i] * row_bytes:bounds[i + 1] * row_bytes]
                src = i if group is None else dist.get_global_rank(group, i)
                works.append(dist.broadcast(block, src=src, group=group, async_op=True))
        for w in works:
            w.wait()
    return tensor


def _weight_of(module_or_tensor):
    """The 2-D weight to save: the tensor itself, an Embedding's weight, or a module's only
    2-D parameter."""
    if isinstance(module_or_tensor, torch.Tensor):
        return module_or_tensor
    if not isinstance(module_or_tensor, torch.nn.Module):
        raise InvalidArgumentError(
            f"embstore.torch.save takes a tensor or a module, not {type(module_or_tensor).__name__}")
    weight = getattr(module_or_tensor, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return weight
    found = [(n, p) for n, p in module_or_tensor.named_parameters() if p.dim() == 2]
    if len(found) != 1:
        names = ", ".join(n for n, _ in found) or "none"
        raise InvalidArgumentError(
            f"{type(module_or_tensor).__name__} has no .weight and {len(found)} 2-D parameters "
            f"({names}); pass the tensor to save")
    return found[0][1]


def _shard_paths(dest):
    dest = os.fspath(dest)
    if not dest.endswith(".shards.json") or "://" in dest:
        raise InvalidArgumentError(
            f"a sharded DTensor is saved as one table a shard plus a manifest: dest must be a "
            f"local NAME.shards.json path on a filesystem every rank shares, not {dest!r}")
    stem = os.path.basename(dest)[:-len(".shards.json")]
    return dest, os.path.dirname(os.path.abspath(dest)), stem


def _save_sharded(dtensor, dest, keys, kwargs):
    """Each distinct row range of a Shard(0)/Replicate DTensor written once (by the lowest rank
    holding it) as NAME-i.emb; then rank 0 writes the manifest. Every rank of the job calls it."""
    import torch.distributed as dist
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    for p in dtensor.placements:
        if not (type(p) is Replicate or (type(p) is Shard and p.dim == 0)):
            raise InvalidArgumentError(
                f"embstore.torch.save writes DTensors sharded by rows (Shard(0)) or replicated, "
                f"not {p!r} (placements {tuple(dtensor.placements)}): a column shard holds no "
                f"whole rows")
    manifest, folder, stem = _shard_paths(dest)
    rows, dim = int(dtensor.shape[0]), int(dtensor.shape[1])
    mesh = dtensor.device_mesh
    mine = None
    if mesh.get_coordinate() is not None:
        shape, offset = compute_local_shape_and_global_offset(dtensor.shape, mesh,
                                                              dtensor.placements)
        if shape[0] > 0:
            mine = (int(offset[0]), int(offset[0]) + int(shape[0]))
    me, world = dist.get_rank(), dist.get_world_size()
    ranges = [None] * world
    dist.all_gather_object(ranges, mine)
    spans = sorted({r for r in ranges if r is not None})
    writer_of = {}
    for rank, r in enumerate(ranges):
        if r is not None and r not in writer_of:
            writer_of[r] = rank
    error, written = None, None
    try:
        if any(a[1] != b[0] for a, b in zip(spans, spans[1:])) or (
                spans and (spans[0][0] != 0 or spans[-1][1] != rows)):
            raise InvalidArgumentError(f"the ranks' row ranges {spans} do not tile rows [0, {rows})")
        if os.path.exists(manifest) and not kwargs.get("force"):
            raise _already_exists(manifest)
        if mine is not None and writer_of[mine] == me:
            i = spans.index(mine)
            path = os.path.join(folder, f"{stem}-{i}.emb")
            local = dtensor.to_local()
            shard_keys = None if keys is None else list(keys)[mine[0]:mine[1]]
            write_rows(torch_rows(local, f"rank {me}'s shard of the DTensor"), path,
                       keys=shard_keys, **kwargs)
            written = path
    except Exception as e:  # noqa: BLE001 - raised below, once the others have heard of it
        error = e
    failed = [None] * world
    dist.all_gather_object(failed, None if error is None else f"{type(error).__name__}: {error}")
    bad = {r: m for r, m in enumerate(failed) if m is not None}
    if not bad and me == 0:
        try:
            shards = [(b, e, f"./{stem}-{i}.emb", f"{stem}-{i}")
                      for i, (b, e) in enumerate(spans)]
            kind = table_dtype(kwargs.get("dtype"), element_kind(dtensor.dtype, "the DTensor"))
            _native.write_shard_manifest(manifest, stem, rows, dim, kind.upper(), shards,
                                         bool(kwargs.get("force")))
        except Exception as e:  # noqa: BLE001
            bad[0] = f"{type(e).__name__}: {e}"
            error = e
    done = [None] * world
    dist.all_gather_object(done, bad.get(0) if me == 0 else None)
    if done[0] is not None and 0 not in bad:
        bad[0] = done[0]
    if bad:
        if written is not None:  # no manifest names it: leave nothing behind
            try:
                os.remove(written)
            except OSError:
                pass
        if error is not None:
            raise error
        raise FailedPreconditionError(
            f"saving {manifest!r}: rank(s) {sorted(bad)} failed ({'; '.join(bad.values())}); "
            f"no manifest was written")
    return {"path": manifest, "rows": rows, "dim": dim, "shards": len(spans), "written": written}


def _already_exists(path):
    from .errors import AlreadyExistsError
    return AlreadyExistsError(f"{path!r} already exists; use force=True to replace it")


def save(module_or_tensor, dest, *, keys=None, dtype=None, metadata=None, force=False,
         on_overflow="error", chunk_rows=None, progress=None, durable=True,
         row_hashes=True):
    """Writes a trained weight as a table at `dest` (.emb path, s3://, hdfs://).

    module_or_tensor: a 2-D tensor (CPU or CUDA; CUDA rows are copied a chunk at a time), an
    nn.Embedding/EmbeddingBag (its weight) or a module with one 2-D parameter.
    A DTensor sharded by rows (Shard(0), FSDP2's fully_shard) or replicated: every rank of the
    job calls save; the lowest rank holding each row range writes it as NAME-i.emb next to
    `dest`, which must be a local NAME.shards.json on a filesystem the ranks share, and rank 0
    then writes the manifest. load_sharded, embstore.load and the CLI read it back as one table.
    The other arguments are embstore.save's.
    """
    t = _weight_of(module_or_tensor)
    kwargs = dict(dtype=dtype, metadata=metadata, force=force, on_overflow=on_overflow,
                  chunk_rows=chunk_rows, progress=progress, durable=durable,
                  row_hashes=row_hashes)
    if type(t).__name__ == "DTensor":
        _distributed()
        return _save_sharded(t.detach(), dest, keys, kwargs)
    return write_rows(torch_rows(t), dest, keys=keys, **kwargs)


def _table_spec(fqn, spec):
    """A {fqn: table} value: "table", or ("table", (begin, end))."""
    if isinstance(spec, tuple) and len(spec) == 2 and not isinstance(spec[1], (str, bytes)):
        return spec[0], spec[1]
    if spec is None or isinstance(spec, str):
        return spec, None
    raise InvalidArgumentError(f"tables[{fqn!r}] must be a table name or (name, (begin, end)), "
                               f"not {spec!r}")


def _storage_reader_class():
    """Defines StorageReader on first use: torch.distributed.checkpoint takes about 0.4 s to
    import, which users of the rest of this module need not pay."""
    dist = _distributed()
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata, Metadata,
                                                       StorageMeta, TensorProperties,
                                                       TensorStorageMetadata)
    from torch.distributed.checkpoint.planner import LoadItemType
    from torch.futures import Future
    del dist

    class StorageReader(dcp.StorageReader):
        """A torch.distributed.checkpoint StorageReader over embstore tables.

            dcp.load(state_dict, storage_reader=embstore.torch.StorageReader(
                "host:7070", {"model.emb.weight": "words"}))

        `tables` maps state-dict keys (fully qualified names, as DCP flattens them) to a table
        name, or to (name, (begin, end)) for part of one. Each key's metadata is one chunk
        covering the table; DCP's planner intersects it with each rank's shards, so every rank
        reads only the row ranges its ReadItems ask for (a column shard reads its rows in full).
        Destinations may be float32, float16 or bfloat16, as with load_into. A state dict that
        holds more than these keys needs DefaultLoadPlanner(allow_partial_load=True).
        `load_kwargs`: the connection and read keywords of load_into (token=, tls..., local=,
        streams=, timeout=, verify=, progress=) and chunk_rows=.
        """

        def __init__(self, source, tables, **load_kwargs):
            super().__init__()
            self._chunk_rows = load_kwargs.pop("chunk_rows", None)
            self._args = LoadArgs(load_kwargs, "embstore.torch")  # unknown keywords fail now
            self._src = self._args.resolve(source)
            if not hasattr(tables, "items"):
                raise InvalidArgumentError(
                    f"tables must map state-dict keys to table names, not "
                    f"{type(tables).__name__}")
            self._specs = {fqn: _table_spec(fqn, spec) for fqn, spec in tables.items()}
            self._tables = {}  # fqn -> _Table, described by read_metadata

        def _table(self, fqn):
            t = self._tables.get(fqn)
            if t is None:
                name, rows = self._specs[fqn]
                t = self._tables[fqn] = _Table(self._src, name, self._args, rows)
            return t

        def reset(self, checkpoint_id=None):
            self._tables = {}

        def read_metadata(self, *args, **kwargs):
            md = {}
            for fqn in self._specs:
                t = self._table(fqn)
                size = torch.Size(t.shape)
                md[fqn] = TensorStorageMetadata(
                    properties=TensorProperties(dtype=_TORCH_DTYPES[t.desc["dtype"]]),
                    size=size,
                    chunks=[ChunkStorageMetadata(offsets=torch.Size([0, 0]), sizes=size)])
            return Metadata(state_dict_metadata=md, storage_data={},
                            storage_meta=StorageMeta(checkpoint_id=self._src.location))

        def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
            pass

        def prepare_local_plan(self, plan):
            return plan

        def prepare_global_plan(self, plans):
            return plans

        def read_data(self, plan, planner):
            for item in plan.items:
                fqn = item.storage_index.fqn
                if item.type == LoadItemType.BYTE_IO or fqn not in self._specs:
                    raise InvalidArgumentError(
                        f"state-dict key {fqn!r} is not a tensor this reader maps to a table")
                t = self._table(fqn)
                dest = planner.resolve_tensor(item).detach()
                row, col = item.storage_offsets
                if tuple(dest.shape) != tuple(item.lengths):
                    raise InvalidArgumentError(
                        f"{fqn!r}: the planner resolved a destination of shape "
                        f"{list(dest.shape)} for {list(item.lengths)} elements of {t.where()}")
                t.fill(dest, t.begin + row, col, self._chunk_rows)
                planner.commit_tensor(item, dest)
            fut = Future()
            fut.set_result(None)
            return fut

        @classmethod
        def validate_checkpoint_id(cls, checkpoint_id):
            return False  # never picked automatically from a checkpoint_id

    StorageReader.__module__ = __name__
    return StorageReader


def __getattr__(name):
    if name == "StorageReader":
        cls = globals()["StorageReader"] = _storage_reader_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
