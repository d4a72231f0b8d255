"""Sources, table descriptions and load(): the numpy layer every framework module builds on."""
import numbers
import os
import time

import numpy as np

from ._native_import import _native
from .errors import (CancelledError, DeadlineExceededError, InvalidArgumentError,
                     MissingKeysError)

ALIGNMENT = 64


def aligned_empty(shape, dtype, alignment=ALIGNMENT):
    """A writable, C-contiguous array whose data starts on an `alignment`-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


def _bfloat16():
    try:
        import ml_dtypes
    except ImportError as e:  # pragma: no cover - ml_dtypes is a test dependency
        raise InvalidArgumentError(
            "BF16 rows need the ml_dtypes package for numpy's bfloat16 type "
            "(pip install ml_dtypes), or ask for dtype='float32'") from e
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(table_dtype):
    """numpy dtype of a table dtype name ("F32", "F16", "BF16")."""
    if table_dtype == "F32":
        return np.dtype(np.float32)
    if table_dtype == "F16":
        return np.dtype(np.float16)
    if table_dtype == "BF16":
        return _bfloat16()
    raise InvalidArgumentError(f"unknown table dtype {table_dtype!r}")


# How messages name where a table lives, by the kind of its location (client/open_source.h):
# (what the location is, how a table of it is named).
_WHERE = {
    "file": ("table file", "table file {location!r}"),
    "directory": ("store directory", "table {name!r} in store directory {location!r}"),
    "server": ("server", "table {name!r} on server {location!r}"),
    "manifest": ("shard manifest", "table {name!r} of shard manifest {location!r}"),
    "object": ("S3 object", "table {name!r} in object {location!r}"),
    "object prefix": ("S3 prefix", "table {name!r} under prefix {location!r}"),
}


class Source:
    """Where tables come from: any location embstore opens (client::OpenSource, the one resolver
    shared with the CLI): a table file, a store directory, a server, a shard manifest, or an
    s3:// object or prefix.

    Build one with Source.resolve(). It opens each table once, the first time it is asked for
    it (a file's mapping, a server's connections and the table's description, its pinned
    version), and keeps it for every later load: reuse a Source for the chunks of one load and
    for several loads. A Source pins the version of each table it opened; resolve a new one to
    see a table that was replaced on a server.
    """

    def __init__(self, location, kind, several, connect):
        self.location = location
        self.kind = kind          # what the location is: a key of _WHERE
        self._several = several   # it holds several tables, so loads name one
        self._connect = connect   # _native.ConnectOptions, for servers (and shards' servers)
        self._sources = {}        # (table or None, local) -> _native.Source
        self._views = {}          # path -> _native.Table, for zero-copy views

    @classmethod
    def resolve(cls, source, *, token=None, tls=False, tls_ca=None, tls_cert=None, tls_key=None,
                tls_server_name=None, rpc_timeout=30.0, load_balancing=None):
        if isinstance(source, Source):
            return source
        if not isinstance(source, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"source must be a table file, a store directory, a server target, a shard "
                f"manifest or an s3:// address, not {type(source).__name__}")
        location = os.fspath(source)
        kind, several = _native.classify(location)
        connect = _native.ConnectOptions(
            token=token or "", tls=bool(tls), tls_ca=tls_ca or "", tls_cert=tls_cert or "",
            tls_key=tls_key or "", tls_server_name=tls_server_name or "",
            rpc_timeout=float(rpc_timeout), load_balancing=load_balancing or "")
        src = cls(location, kind, several, connect)
        if not several:
            src.table(None)  # a location that is one table is opened and checked now
        return src

    def __repr__(self):
        return f"Source({self.kind}, {self.location!r})"

    def where(self, desc):
        """How messages name a table of this source: its file, or its name and location."""
        return _WHERE[self.kind][1].format(name=desc["name"], location=self.location)

    def table(self, table=None, local=True, timeout=None):
        """The native source of one table (embstore._native.Source): opened and described the
        first time, then kept. `table` names it where the location holds several; where it is one
        table, a given name must be that table's. `local` (servers, manifests): read a server's
        file directly when it is this host's. `timeout` (seconds) bounds opening a server's
        table, connecting included, when it is shorter than rpc_timeout."""
        if table is not None and not isinstance(table, str):
            raise InvalidArgumentError(f"table name must be a string, not {type(table).__name__}")
        # `local` only changes how a server's (or a manifest's servers') tables are read: a file
        # or an object opened once serves both, instead of being opened (for an object: its
        # header and checksums fetched) again.
        key = (table, bool(local) or self.kind not in ("server", "manifest"))
        src = self._sources.get(key)
        if src is None:
            src = _native.Source.open(self.location, table, self._connect, bool(local),
                                      float(timeout or 0.0))
            self._sources[key] = src
            if not self._several:  # the same table, by its name or by none
                self._sources.setdefault((None, key[1]), src)
                self._sources.setdefault((src.desc()["name"], key[1]), src)
        return src

    def describe(self, table=None, local=True, timeout=None):
        """{"name", "rows", "dim", "dtype", "has_keys", "metadata", ...} of a table, as it was
        when this Source first opened it."""
        return self.table(table, local, timeout).desc()

    def list_tables(self):
        """The sorted names of the tables at this location."""
        return _native.list_tables(self.location, self._connect)

    def read_rows(self, table, begin, end, out, to_f32, *, streams=0, timeout=0.0, verify=True,
                  progress=None, local=True):
        """Rows [begin, end) into the C-contiguous writable array `out` (written in place).
        Returns the read's statistics (bytes, seconds, streams, resumes, local, ...)."""
        options = _native.ReadOptions(streams=int(streams or 0), timeout=float(timeout or 0.0),
                                      verify=bool(verify), to_f32=bool(to_f32))
        out = out.view(np.uint8)  # any dtype (bfloat16 included) crosses as its bytes
        return self.table(table, local).read_into(begin, end, out, options, progress)

    def file_path(self, table=None, why="copy=False"):
        """The local table file of `table`, for what maps it (zero-copy views); an error naming
        the location where the table is not a local file."""
        path = self.table(table).file_path
        if path is None:
            raise InvalidArgumentError(f"{why} needs a local table file; {self.location!r} is "
                                       f"a {_WHERE[self.kind][0]}")
        return path

    def _view_table(self, table=None, why="copy=False"):
        path = self.file_path(table, why)
        t = self._views.get(path)
        if t is None:
            t = self._views[path] = _native.Table(path)
        return t

    def view(self, table=None, rows=None, verify=True):
        """Zero-copy read-only view of rows [begin, end) (rows=: as for load) of a local table's
        matrix in its stored dtype. With verify, the checksum blocks of those rows are checked
        first (each block once for the life of the mapping; hashing runs at memory speed): a
        view is never handed out over a block that fails."""
        t = self._view_table(table)
        begin, end = _row_range(rows, t.rows)
        if verify:
            t.verify_rows(begin, end)
        return t.view().view(numpy_dtype(t.dtype)).reshape(t.rows, t.dim)[begin:end]

    def update_into(self, table, out, *, streams=0, timeout=0.0, local=True, started=None):
        """Brings `out` (the table's shape, its stored dtype) up to this source's version by the
        rows that differ (client/update.h); returns the sync's statistics. needs_full in them
        (with full_reason) means nothing was done. `started`: _native.CopyHashes of out, made before
        this source was opened."""
        options = _native.ReadOptions(streams=int(streams or 0), timeout=float(timeout or 0.0))
        return self.table(table, local).update_into(out.view(np.uint8), options, started)

    def copy_keys(self, table, keys, out, to_f32, *, verify=True, local=True):
        """The rows of `keys` into `out` ([len(keys), dim], the stored dtype, or float32 with
        to_f32), in request order; returns the indices of the keys the table lacks (their rows
        are left as they were). Rows come only from checksum blocks that passed (a server
        verifies them and each row of its reply is checked against the checksum it carries)."""
        options = _native.ReadOptions(verify=bool(verify), to_f32=bool(to_f32))
        return self.table(table, local).copy_keys(list(keys), out.view(np.uint8), options)

    def keys(self, table=None, begin=0, end=None):
        desc = self.describe(table)
        if not desc["has_keys"]:
            raise InvalidArgumentError(f"table {desc['name']!r} has no keys")
        return self.table(table).keys(begin, end)


class LoadArgs:
    """The keywords a tf or torch helper passes on to its loads, split once: `connect` for
    Source.resolve (token, tls, ..., load_balancing) and `read` for every read (streams,
    timeout, verify, progress, local). Anything else is named as a mistake."""

    CONNECT = ("token", "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "rpc_timeout",
               "load_balancing")
    READ = ("streams", "timeout", "verify", "progress", "local")

    def __init__(self, kwargs, who="embstore"):
        extra = set(kwargs) - set(self.CONNECT) - set(self.READ)
        if extra:
            raise InvalidArgumentError(
                f"unexpected arguments {sorted(extra)}; {who} loads take {sorted(self.READ)} "
                f"and the connection keywords {sorted(self.CONNECT)}")
        self.connect = {k: v for k, v in kwargs.items() if k in self.CONNECT}
        self.read = {k: v for k, v in kwargs.items()
                     if k in self.READ and not (k == "timeout" and v is None)}

    @property
    def local(self):
        return self.read.get("local", True)

    def resolve(self, source):
        return Source.resolve(source, **self.connect)


def _row_range(rows, nrows):
    if rows is None:
        return 0, nrows
    if isinstance(rows, slice):
        start, stop, step = rows.indices(nrows)
        if step != 1:
            raise InvalidArgumentError("rows= takes a contiguous range (step 1)")
        return start, max(start, stop)
    try:
        begin, end = rows
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"rows= must be (begin, end) or a slice, not {rows!r}") from None
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
               for v in (begin, end)):
        raise InvalidArgumentError(f"rows= must be two integers (begin, end), not {rows!r}")
    begin, end = int(begin), int(end)
    if begin > end:
        raise InvalidArgumentError(f"rows=({begin}, {end}): begin is after end")
    if not 0 <= begin <= end <= nrows:
        raise InvalidArgumentError(f"rows=({begin}, {end}) is outside the table's {nrows} rows")
    return begin, end


# Spellings of the dtypes a load can produce: numpy's, the CLI's and the table format's.
_DTYPE_NAMES = {
    "float32": "F32", "f32": "F32", "F32": "F32", "float": "F32",
    "float16": "F16", "f16": "F16", "F16": "F16", "half": "F16",
    "bfloat16": "BF16", "bf16": "BF16", "BF16": "BF16",
}


def _table_dtype_of(dtype):
    """The table dtype name ("F32", "F16", "BF16") a dtype= argument asks for; None: native."""
    if dtype is None or (isinstance(dtype, str) and dtype == "native"):
        return None
    if isinstance(dtype, str):
        name = _DTYPE_NAMES.get(dtype)
    else:
        try:
            npd = np.dtype(dtype)
        except TypeError:
            npd = None
        name = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}.get(npd)
        if name is None and npd is not None and npd.name == "bfloat16":
            name = "BF16"
    if name is None:
        raise InvalidArgumentError(
            f"dtype={dtype!r} is not a dtype embstore loads: use 'float32' (or 'f32'), 'float16' "
            f"('f16'), 'bfloat16' ('bf16'), or 'native' for the table's stored dtype")
    return name


def _target_dtype(dtype, stored):
    """(numpy dtype of the result, how to read: "native", "f32" or "narrow")."""
    want = _table_dtype_of(dtype)
    if want is None or want == stored:
        return numpy_dtype(stored), "native"
    if want == "F32":
        return np.dtype(np.float32), "f32"
    return numpy_dtype(want), "narrow"  # F32 -> F16/BF16, F16 <-> BF16: through float32


_NARROW_CHUNK_BYTES = 16 << 20


def _read_narrowed(src, table, begin, end, out, desc, *, progress=None, **read_kwargs):
    """Rows [begin, end) into `out` (float16 or bfloat16) through float32 pieces of 16 MiB.
    A finite value too large for the target dtype is an error, as in `embstore convert`."""
    dim = desc["dim"]
    step = max(1, _NARROW_CHUNK_BYTES // (4 * max(1, dim)))
    scratch = aligned_empty((min(step, max(1, end - begin)), dim), np.float32)
    row_bytes = dim * out.dtype.itemsize
    for r in range(begin, end, step):
        e = min(end, r + step)
        piece = scratch[:e - r]
        src.read_rows(table, r, e, piece, True, **read_kwargs)
        with np.errstate(over="ignore"):
            narrow = piece.astype(out.dtype)
        bad = np.isinf(narrow) & np.isfinite(piece)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise InvalidArgumentError(
                f"table {desc['name']!r} row {r + int(i)}, column {int(j)} holds "
                f"{float(piece[i, j])!r}, which is out of range for {out.dtype.name}; load it "
                f"as float32")
        out[r - begin:e - begin] = narrow
        if progress is not None and progress((e - begin) * row_bytes,
                                             (end - begin) * row_bytes) is False and e < end:
            raise CancelledError(f"loading table {desc['name']!r} was cancelled by the progress "
                                 f"callback")


def _check_keys(keys):
    if isinstance(keys, (str, bytes)):
        raise InvalidArgumentError(
            f"keys= takes a list of strings, not a single {type(keys).__name__} ({keys!r})")
    try:
        keys = list(keys)
    except TypeError:
        raise InvalidArgumentError(
            f"keys= takes a list of strings, not {type(keys).__name__}") from None
    for i, k in enumerate(keys):
        if not isinstance(k, str):
            raise InvalidArgumentError(
                f"keys= takes strings; keys[{i}] is {type(k).__name__} {k!r} (to load rows by "
                f"number, use rows=)")
        try:
            k.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(
                f"keys[{i}] ({k[:80]!r}) is not valid Unicode text: {e.reason} at position "
                f"{e.start} (a lone surrogate, as str(bytes, errors='surrogateescape') makes); "
                f"table keys are UTF-8") from None
    return keys


def load(source, table=None, *, rows=None, keys=None, missing="error", dtype="float32", copy=True,
         streams=0, timeout=None, verify=True, progress=None, local=True, out=None, update=False,
         **connect):
    """Loads a table (or part of it) into a numpy array.

    source: a table file path, a store directory (with `table`), a server target ("host:port" or
        "unix:PATH", with `table`), a shard manifest (a ".json" file, docs/DEPLOY.md), a table
        object "s3://BUCKET/KEY" (only the blocks of the rows asked for are fetched; AWS_*
        variables and profiles configure it, docs/DEPLOY.md), an S3 prefix "s3://BUCKET/PREFIX/"
        (with `table`), or a Source. The CLI reads the same locations the same way (one
        resolver, docs/CLIENT.md).
    rows: (begin, end) or a slice of rows; default all.
    keys: load these keys' rows, in this order, instead of a row range (the trainer's vocabulary
        order). Keys the table lacks are handled by `missing`: "error" raises MissingKeysError,
        "zeros" fills zeros, a callable f(missing_keys, dim) returns their rows.
    dtype: "float32" (default; F16/BF16 are converted exactly), "float16" or "bfloat16" (an F32
        table is rounded to nearest; a finite value out of range is an error), or "native" for
        the stored dtype. The CLI's spellings "f32", "f16", "bf16" and numpy dtypes work too.
    copy: False returns a read-only zero-copy view of a local file's matrix (stored dtype). With
        verify (the default) the checksum blocks of its rows are checked first, at memory speed
        (CorruptionError names a bad block); copy=False, verify=False returns it unchecked.
    streams: parallel streams from a server (0: the client's default).
    timeout: seconds for the whole load (None: no limit), for every source; for a server it
        bounds connecting and describing the table too (DeadlineExceededError).
    verify: check block checksums of local reads and views too (streamed chunks are always
        checked).
    progress: callable(done_bytes, total_bytes), called a few times a second and once at the end,
        for every source; return False to cancel (CancelledError).
    local: read a server's table straight from its file when that file is on this host.
    out: an existing C-contiguous, writable numpy array of the result's shape and dtype to fill
        and return instead of a new one (reusing memory across loads saves the kernel's work of
        handing out and zeroing fresh pages, a third of a fast network load's time).
    update: with out= holding an earlier version of the whole table in its stored dtype, fetch
        only the rows that changed (embstore.update) instead of every row; a different shape or
        dtype, or a source without row hashes, loads the whole table into out (with a warning).
    Connection keywords for servers: token, tls, tls_ca, tls_cert, tls_key, tls_server_name,
    rpc_timeout, and load_balancing ("pick_first" or "round_robin", for a "dns:///" target that
    resolves to a pool of servers).

    The result is writable and 64-byte aligned (unless copy=False).
    """
    if timeout is not None and (not isinstance(timeout, (int, float)) or
                                isinstance(timeout, bool) or timeout <= 0):
        raise InvalidArgumentError(f"timeout= must be a positive number of seconds, not "
                                   f"{timeout!r}")
    if progress is not None and not callable(progress):
        raise InvalidArgumentError("progress= must be a callable(done_bytes, total_bytes)")
    # The timeout bounds the whole load: connecting to a server and describing the table too.
    started = time.monotonic()
    src = Source.resolve(source, **connect)
    if update:
        if out is None or rows is not None or keys is not None or not copy:
            raise InvalidArgumentError(
                "update=True brings out= (an earlier version of the whole table) up to date: "
                "give out=, and no rows=, keys= or copy=False")
        stats = _update(out, src, table, streams=streams, timeout=timeout, local=local)
        if not stats["needs_full"]:
            return out
        if stats.get("shape_changed"):
            raise InvalidArgumentError(
                f"update=True: {stats['full_reason']}; load it without out= (or into an array "
                f"of its new shape)")
        import warnings
        warnings.warn(f"embstore.load(update=True): full fetch: {stats['full_reason']}",
                      stacklevel=2)
    desc = src.describe(table, local, timeout=timeout)
    if timeout is not None:
        timeout = _time_left(timeout, started, src, desc)
    name = desc["name"]
    out_dtype, how = _target_dtype(dtype, desc["dtype"])
    if not copy:
        if keys is not None or how != "native":
            raise InvalidArgumentError(
                "copy=False returns the stored matrix as it is: no keys= and dtype='native' "
                f"(the table holds {desc['dtype']})")
        return src.view(table, rows=rows, verify=verify)
    if keys is not None:
        if rows is not None:
            raise InvalidArgumentError("give rows= or keys=, not both")
        if out is not None:
            raise InvalidArgumentError("out= fills row ranges; keys= returns a new array")
        keys = _check_keys(keys)
        if not desc["has_keys"]:
            raise InvalidArgumentError(
                f"table {name!r} has no keys (converted from a matrix without tokens, or saved "
                f"without keys=), so keys= cannot look rows up; load rows= instead")
        return _load_keys(src, table, desc, keys, missing, out_dtype, how, verify, local)
    begin, end = _row_range(rows, desc["rows"])
    if out is None:
        out = aligned_empty((end - begin, desc["dim"]), out_dtype)
    else:
        _check_out(out, (end - begin, desc["dim"]), out_dtype)
    kw = dict(streams=streams, timeout=timeout or 0.0, verify=verify, progress=progress,
              local=local)
    if how == "narrow":
        _read_narrowed(src, table, begin, end, out, desc, **kw)
    else:
        src.read_rows(table, begin, end, out, how == "f32", **kw)
    return out


def _update(out, source, table=None, *, streams=0, timeout=None, local=True, **connect):
    """Brings `out`, a C-contiguous array holding an earlier version of a whole table in its
    stored dtype, up to the version `source` holds now, fetching only the rows that changed.

    The source's row hashes (stored in the table, or computed by a server) are compared with
    out's rows; the rows that differ are fetched (each checked), and every checksum block of the
    result is checked against the source's before anything is written into `out`, so on error
    `out` is unchanged, and afterwards it holds exactly the source's version. A table without
    row hashes in an object store is compared by checksum blocks instead. Returns the sync's
    statistics: changed_rows, moved_bytes (hashes and rows), table_bytes, seconds, ...;
    needs_full and full_reason when `out` does not have the table's shape and dtype or the
    source cannot be compared (a shard manifest): then nothing was done.
    """
    src = Source.resolve(source, **connect)
    if (not isinstance(out, np.ndarray) or not out.flags.c_contiguous or
            not out.flags.writeable):
        raise InvalidArgumentError("update needs out= as a C-contiguous, writable numpy array")
    # Hashing out's rows is most of the work: it starts now, while the source is opened.
    started = (_native.CopyHashes(out.view(np.uint8), out.shape[1] * out.itemsize)
               if out.ndim == 2 and out.size > 0 else None)
    desc = src.describe(table, local, timeout=timeout)
    want = numpy_dtype(desc["dtype"])
    if out.shape != (desc["rows"], desc["dim"]) or out.dtype != want:
        return {"needs_full": True, "up_to_date": False, "shape_changed": True,
                "full_reason": f"out= is {out.shape} {out.dtype}; {src.where(desc)} is now "
                               f"({desc['rows']}, {desc['dim']}) {want}"}
    return src.update_into(table, out, streams=streams, timeout=timeout or 0.0, local=local,
                           started=started)


update = _update  # the public name; load() has a parameter of the same name


def _time_left(timeout, started, src, desc):
    """Seconds left of a load's `timeout` that started at `started` (time.monotonic())."""
    left = timeout - (time.monotonic() - started)
    if left <= 0:
        raise DeadlineExceededError(
            f"loading table {desc['name']!r} from {src.location!r} passed its timeout "
            f"({timeout:g} s) while opening it")
    return left


def _check_out(out, shape, dtype):
    if not isinstance(out, np.ndarray):
        raise InvalidArgumentError(f"out= must be a numpy array, not {type(out).__name__}")
    if out.shape != shape or out.dtype != dtype:
        raise InvalidArgumentError(f"out= is {out.dtype}{list(out.shape)}; the load gives "
                                   f"{np.dtype(dtype)}{list(shape)}")
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise InvalidArgumentError("out= must be C-contiguous and writable")


def _load_keys(src, table, desc, keys, missing, out_dtype, how, verify, local):
    if not (missing in ("error", "zeros") or callable(missing)):
        raise InvalidArgumentError(
            f"missing= must be 'error', 'zeros' or a callable, not {missing!r}")
    dim = desc["dim"]
    out = aligned_empty((len(keys), dim), out_dtype)
    # Rows land in `out` directly, converted on the way when asked; narrower dtypes go through
    # float32 first.
    buf = aligned_empty((len(keys), dim), np.float32) if how == "narrow" else out
    absent = np.asarray(src.copy_keys(table, keys, buf, how != "native", verify=verify,
                                      local=local), dtype=np.int64)
    if len(absent) and missing == "error":
        raise MissingKeysError(desc["name"], [keys[i] for i in absent])
    if how == "narrow":
        present = np.setdiff1d(np.arange(len(keys)), absent)
        with np.errstate(over="ignore"):
            narrow = buf[present].astype(out_dtype)
        bad = np.isinf(narrow) & np.isfinite(buf[present])
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise InvalidArgumentError(
                f"table {desc['name']!r} key {keys[present[i]]!r}, column {int(j)} holds "
                f"{float(buf[present[i], j])!r}, which is out of range for {out_dtype.name}; load "
                f"it as float32")
        out[present] = narrow
    if len(absent):
        if missing == "zeros":
            out[absent] = 0
        else:
            fill = np.asarray(missing([keys[i] for i in absent], dim))
            if fill.shape != (len(absent), dim):
                raise InvalidArgumentError(
                    f"missing= callable returned shape {fill.shape}, expected {(len(absent), dim)}")
            out[absent] = fill
    return out


def _fill(src, table, desc, begin, end, out, **read_kwargs):
    """Rows [begin, end) of a described table into `out`, whose dtype says how: the stored
    dtype as it is, float32 converted exactly, or a narrower dtype rounded (through float32)."""
    _, how = _target_dtype(out.dtype, desc["dtype"])
    if how == "narrow":
        _read_narrowed(src, table, begin, end, out, desc, **read_kwargs)
    else:
        src.read_rows(table, begin, end, out, how == "f32", **read_kwargs)


def _chunks_into(src, table, desc, begin, end, chunk_rows, dtype, **read_kwargs):
    """Yields (offset, rows) over rows [begin, end) of a table, chunk_rows at a time, from a fixed
    pair of aligned buffers: the next chunk is read on a helper thread (the read releases the
    GIL) while the caller consumes the current one. `rows` is valid until the next iteration;
    `offset` counts from `begin`. Memory: two chunks, whatever the table's size."""
    import concurrent.futures
    total = end - begin
    if total <= 0:
        return
    n0 = min(chunk_rows, total)
    bufs = [aligned_empty((n0, desc["dim"]), dtype) for _ in range(2 if total > n0 else 1)]

    def read(k):
        off = k * chunk_rows
        n = min(chunk_rows, total - off)
        view = bufs[k % len(bufs)][:n]
        _fill(src, table, desc, begin + off, begin + off + n, view, **read_kwargs)
        return off, view

    count = (total + chunk_rows - 1) // chunk_rows
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(read, 0)
        for k in range(count):
            off, view = pending.result()
            if k + 1 < count:
                pending = pool.submit(read, k + 1)
            try:
                yield off, view
            except GeneratorExit:
                if k + 1 < count:
                    pending.cancel()
                    try:
                        pending.result()
                    except Exception:  # noqa: BLE001 - the caller stopped; its error wins
                        pass
                raise
