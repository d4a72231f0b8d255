"""TensorFlow integration: fill variables from embstore without putting the table in the graph.

The usual way, `tf.compat.v1.get_variable(..., initializer=tf.constant(np.loadtxt(path)))`, stores
the whole array as a Const node: the GraphDef and the .meta file grow by the table's size and
past 2 GB the graph cannot be built at all. Everything here feeds the values at run time instead:

- TF2 eager: assign(variable, source, table) writes the variable chunk by chunk.
- TF1 graph mode: initialize(session, {variable: table}, source) runs one small assign op per
  variable, fed through placeholders.
- MonitoredTrainingSession and Estimator-style loops: init_hook(...) makes loading the table part
  of each variable's initializer, and scaffold(...) returns a Scaffold whose init_fn loads it.
  Either way the table is loaded exactly when the session initializes its variables instead of
  restoring a checkpoint, before the first checkpoint is written.
- Keras: Initializer(source, table) as `embeddings_initializer`; its config holds only the
  reference (source, table, rows), never the array, and keras.models.load_model takes the
  weights from the file without contacting the source.
- tf.data: dataset(source, table) streams rows.

Partitioned variables (tf.compat.v1 partitioners, tf.distribute ShardedVariable) load each
partition's own row range. Under ParameterServerStrategy, assign() has each ps task load the
shards it holds, in its own process; mirrored variables (MultiWorkerMirroredStrategy) are filled
in every local copy by each worker. docs/PYTHON.md gives the measured peak memory of each path.
"""
import importlib
import json
import os
import threading
import weakref

import numpy as np

try:
    import tensorflow as tf
except ImportError as e:  # embstore itself works without TensorFlow; this module does not
    raise ImportError(
        "embstore.tf needs TensorFlow, which is not installed: pip install 'embstore[tensorflow]'"
        " (or tensorflow-cpu)") from e

from ._core import Source, _chunks_into, _row_range, load as _load
from .errors import (CancelledError, EmbstoreError, FailedPreconditionError,
                     InvalidArgumentError)

# Rows move in chunks of about this size, through two reused buffers (one read while the other is
# written into the variable): peak memory above the variable is about three chunks.
DEFAULT_CHUNK_BYTES = 32 << 20

__all__ = ["Initializer", "assign", "dataset", "init_hook", "initialize", "scaffold"]


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


def _table_label(src, desc):
    """How error messages name a table: its file, or its name and where it lives."""
    if src.kind == "file":
        return f"table file {src.location!r}"
    where = {"dir": "in store directory", "server": "on server",
             "sharded": "of shard manifest"}.get(src.kind, "in")
    return f"table {desc['name']!r} {where} {src.location!r}"


def _table_rows(src, desc, rows):
    """(begin, end) of rows= within the described table, or an error naming the table."""
    try:
        return _row_range(rows, desc["rows"])
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{_table_label(src, desc)}: {e}") from None


def _check_shape(variable, src, desc, rows):
    shape = _full_shape(variable)
    begin, end = _table_rows(src, desc, rows)
    want = (end - begin, desc["dim"])
    if shape != want:
        raise InvalidArgumentError(
            f"variable {_var_name(variable)!r} has shape {list(shape)}, but "
            f"{_table_label(src, desc)} rows [{begin}, {end}) are {list(want)}")
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


def assign(variable, source, table=None, *, rows=None, chunk_rows=None, **load_kwargs):
    """TF2 eager: fills `variable` with the table's rows, chunk by chunk.

    variable: a tf.Variable (or a partitioned / sharded one) of shape [rows, dim].
    rows: (begin, end) of the table to load; default all rows.
    Extra keyword arguments go to embstore.load (streams=, timeout=, token=, tls_ca=, ...).
    Returns the variable.

    Under tf.distribute: a mirrored variable (MirroredStrategy, MultiWorkerMirroredStrategy) is
    filled in each of this process's copies from one read; call assign() on every worker, as the
    rest of a MultiWorkerMirroredStrategy program runs. The shards of a ShardedVariable placed on
    parameter server tasks (ParameterServerStrategy) are loaded by the tasks that hold them: each
    reads its own rows from the source, and no row passes through this process (see
    _assign_where_held).
    """
    rows = _rows_arg(rows)
    _check_rows_fit(variable, rows)
    connect = _connect_kwargs(load_kwargs)
    read_kwargs = _read_kwargs(load_kwargs)
    parts = _partitions(variable)
    held = [(p, first) for p, first in parts if _on_parameter_server(p)]
    if held:
        _assign_where_held(variable, held, source, table, rows, chunk_rows, connect, read_kwargs)
    here = [(p, first) for p, first in parts if not _on_parameter_server(p)]
    if not here:
        return variable
    src = Source.resolve(source, **connect)
    desc = src.describe(table)
    begin = _check_shape(variable, src, desc, rows)
    for part, first in here:
        copies = _local_copies(part)
        np_dtype, _ = _np_dtype(part)
        chunk = _chunk_rows(chunk_rows, desc["dim"], np.dtype(np_dtype).itemsize)
        start = begin + first
        for off, arr in _chunks_into(src, table, desc, start, start + int(part.shape[0]), chunk,
                                     np_dtype, **read_kwargs):
            for copy in copies:
                _scatter_rows(copy, off, arr)
    return variable


def _local_copies(variable):
    """The copies of a mirrored variable held by this process (one per local device), or
    [variable]. Each is a plain resource variable that a scatter update can write."""
    if isinstance(variable, tf.distribute.DistributedValues):
        values = getattr(variable, "values", None) or variable._values
        return list(values)
    return [variable]


# --- Shards on parameter servers load where they live ------------------------------------------
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
                f"{_table_label(src, desc)} rows [{begin}, {end}) are {want}")
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
    from . import errors
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


def _read_kwargs(load_kwargs):
    """The keyword arguments of embstore.load that reading rows takes (streams, timeout, verify,
    progress, local); anything else is a mistake worth naming."""
    allowed = {"streams", "timeout", "verify", "progress", "local"}
    extra = set(load_kwargs) - allowed
    if extra:
        raise InvalidArgumentError(f"unexpected arguments {sorted(extra)}; embstore.tf loads take "
                                   f"{sorted(allowed)} and the connection keywords")
    out = dict(load_kwargs)
    if out.get("timeout") is None:
        out.pop("timeout", None)
    return out


def _connect_kwargs(kwargs):
    keys = ("token", "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "rpc_timeout",
            "load_balancing")
    return {k: kwargs.pop(k) for k in keys if k in kwargs}


def _graph_of(specs):
    graphs = {id(p.graph): p.graph for v, _, _ in specs for p, _ in _partitions(v)}
    if len(graphs) > 1:
        raise InvalidArgumentError("the variables of one mapping must live in one graph")
    return next(iter(graphs.values()), None) or tf.compat.v1.get_default_graph()


class _Feeder:
    """Graph-side machinery to fill one variable: placeholders for a row range and its values,
    and one assign op. Built once per variable; its size does not depend on the table's."""

    def __init__(self, variable):
        self.variable = variable
        np_dtype, self.load_dtype = _np_dtype(variable)
        self.np_dtype = np_dtype
        with tf.compat.v1.name_scope("embstore_init"):
            self.begin = tf.compat.v1.placeholder(tf.int64, [], name="begin")
            self.values = tf.compat.v1.placeholder(variable.dtype.base_dtype,
                                                   [None] + variable.shape.as_list()[1:],
                                                   name="values")
            self.op = _scatter_rows(variable, self.begin, self.values)
            if not isinstance(self.op, tf.Operation):
                self.op = self.op.op

    def run(self, session, src, table, first_row, chunk_rows, **load_kwargs):
        rows = int(self.variable.shape[0])
        desc = src.describe(table)
        chunk = _chunk_rows(chunk_rows, int(self.variable.shape[1]),
                            np.dtype(self.np_dtype).itemsize)
        # The fed arrays are 64-byte aligned, so the session takes them without a copy; the
        # scatter copies each row into the variable. Reading the next chunk overlaps the write.
        for off, arr in _chunks_into(src, table, desc, first_row, first_row + rows, chunk,
                                     self.np_dtype, **_read_kwargs(load_kwargs)):
            session.run(self.op, {self.begin: off, self.values: arr})


def _specs(mapping):
    """[(variable, table, rows)] of {variable: table or (table, rows)}, rows checked."""
    out = []
    for variable, spec in mapping.items():
        table, rows = (spec if isinstance(spec, tuple) else (spec, None))
        rows = _rows_arg(rows)
        _check_rows_fit(variable, rows)
        out.append((variable, table, rows))
    return out


# Feeders already built, per graph and variable (partition) name: initialize() adds its ops to a
# graph once, and can run again after the graph was finalized.
_FEEDERS = weakref.WeakKeyDictionary()


def _feeders(graph, specs, caller):
    """[(feeder, table, rows, first_row, variable)] for the checked mapping `specs`."""
    built = _FEEDERS.setdefault(graph, {})
    out = []
    for variable, table, rows in specs:
        for part, first in _partitions(variable):
            feeder = built.get(part.name)
            if feeder is None:
                if graph.finalized:
                    raise FailedPreconditionError(
                        f"embstore.tf.{caller}(): the graph is finalized, so embstore cannot add "
                        f"the assign op for variable {_var_name(part)!r}. Call "
                        f"embstore.tf.initialize() once before the graph is finalized (later "
                        f"calls reuse its ops), or build embstore.tf.init_hook() or "
                        f"embstore.tf.scaffold() before MonitoredTrainingSession starts")
                with graph.as_default():
                    feeder = built[part.name] = _Feeder(part)
            out.append((feeder, table, rows, first, variable))
    return out


def _run_feeders(session, feeders, src, chunk_rows, load_kwargs):
    for feeder, table, rows, first, variable in feeders:
        begin = _check_shape(variable, src, src.describe(table), rows)
        feeder.run(session, src, table, begin + first, chunk_rows, **load_kwargs)


def initialize(session, mapping, source, *, chunk_rows=None, **load_kwargs):
    """TF1 graph mode: fills variables from tables in `session`.

    mapping: {variable: "table"} or {variable: ("table", (begin, end))}.
    The first call for a variable adds a few placeholders and one assign op per variable
    (partition) to the session's graph; later calls reuse them, also once the graph is finalized.
    The table's values are fed at run time and never stored in the graph.
    """
    specs = _specs(mapping)
    feeders = _feeders(session.graph, specs, "initialize")
    src = Source.resolve(source, **_connect_kwargs(load_kwargs))
    _run_feeders(session, feeders, src, chunk_rows, load_kwargs)


def scaffold(mapping, source, *, base=None, chunk_rows=None, **load_kwargs):
    """A tf.compat.v1.train.Scaffold whose init_fn fills the variables from the tables.

    For MonitoredTrainingSession(scaffold=...) and EstimatorSpec(scaffold=...). The session
    manager calls init_fn only when it initializes the variables instead of restoring a
    checkpoint, and before any hook runs, so the first checkpoint already holds the table and a
    restored run keeps its trained values. Call it in the variables' graph before the session is
    created (it adds its assign ops then). The graph gets only placeholders and assign ops.

    mapping: as for initialize().
    base: a Scaffold to copy the other fields from; its own init_fn runs first.
    """
    specs = _specs(mapping)
    feeders = _feeders(_graph_of(specs), specs, "scaffold")
    connect = _connect_kwargs(load_kwargs)

    def init_fn(_, session):
        if base is not None and base.init_fn is not None:
            base.init_fn(session)
        src = Source.resolve(source, **connect)
        _run_feeders(session, feeders, src, chunk_rows, load_kwargs)

    return tf.compat.v1.train.Scaffold(init_fn=init_fn, copy_from_scaffold=base)


class _LazySource:
    """Resolves the source on first use, so a session that restores a checkpoint never
    connects to it."""

    def __init__(self, source, connect):
        self._source, self._connect, self._src = source, connect, None

    def get(self):
        if self._src is None:
            self._src = Source.resolve(self._source, **self._connect)
        return self._src

    def release(self):
        """Drops the connection or mapping; the next get() opens it again."""
        self._src = None


# The loading initializers init_hook() installed, per graph and variable (partition) name:
# (the hook that installed it, the variable's own initializer).
_INSTALLED = weakref.WeakKeyDictionary()


def _row_loader(variable, table, rows, source, load_kwargs):
    """load(first, n, dtype): rows [first, first + n) of the variable, from the table."""
    def load(first, n, dtype):
        src = source.get()
        begin = _check_shape(variable, src, src.describe(table), rows)
        return _load(src, table, rows=(begin + first, begin + first + n), dtype=dtype,
                     **load_kwargs)
    return load


def _install_loading_initializer(owner, part, first, load, chunk_rows):
    """Makes `part`'s initializer run its own initializer, then load its rows of the table
    chunk by chunk, each chunk fetched by a numpy_function and written by a scatter update.

    Whatever initializes the variables (Scaffold's default init_op, global_variables_initializer)
    now loads the table, and a session that restores a checkpoint runs none of it. This is how
    tf.compat.v1.train.init_from_checkpoint warm-starts variables, too.
    """
    installed = _INSTALLED.setdefault(part.graph, {})
    previous = installed.get(part.name)
    if previous is not None and previous[0] is owner:
        return  # this hook's begin() already ran for this graph (a second session)
    own_init = previous[1] if previous is not None else part.initializer
    np_dtype, load_dtype = _np_dtype(part)
    nrows = int(part.shape[0])
    dims = part.shape.as_list()[1:]
    chunk = _chunk_rows(chunk_rows, int(np.prod(dims, dtype=np.int64)), np.dtype(np_dtype).itemsize)

    def fetch(off, n):
        return load(first + off, n, load_dtype).astype(np_dtype, copy=False)

    with part.graph.as_default(), tf.compat.v1.name_scope("embstore_init"):
        last = own_init
        for off in range(0, nrows, chunk):
            n = min(chunk, nrows - off)
            # The control dependency orders the chunks: one chunk in memory at a time.
            with tf.control_dependencies([last]):
                values = tf.numpy_function(lambda off=off, n=n: fetch(off, n), [],
                                           part.dtype.base_dtype, stateful=True, name="load")
            values.set_shape([n] + dims)
            last = _scatter_rows(part, off, values)
            if not isinstance(last, tf.Operation):
                last = last.op
        part._initializer_op = tf.group(last, name="initializer")
    installed[part.name] = (owner, own_init)


class _InitHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, mapping, source, chunk_rows, load_kwargs):
        self._specs = _specs(mapping)
        self._source = _LazySource(source, _connect_kwargs(load_kwargs))
        self._chunk_rows = chunk_rows
        self._load_kwargs = load_kwargs

    def begin(self):
        # MonitoredSession calls begin() before its Scaffold builds the default init_op and
        # finalizes the graph, so the variables' initializers can still be replaced here.
        graph = tf.compat.v1.get_default_graph()
        if graph.finalized:
            raise FailedPreconditionError(
                "embstore.tf.init_hook: the graph is already finalized, so the variables' "
                "initializers cannot load the table; create the MonitoredTrainingSession before "
                "finalizing the graph, or use embstore.tf.scaffold()")
        for variable, table, rows in self._specs:
            load = _row_loader(variable, table, rows, self._source, self._load_kwargs)
            for part, first in _partitions(variable):
                if part.graph is not graph:
                    raise InvalidArgumentError(
                        f"variable {_var_name(part)!r} is not in the session's graph")
                _install_loading_initializer(self, part, first, load, self._chunk_rows)

    def after_create_session(self, session, coord):
        # The session has initialized (and loaded) or restored its variables: do not keep a
        # server connection or the table file's mapping open for the rest of the training.
        self._source.release()


def init_hook(mapping, source, *, checkpoint_dir=None, chunk_rows=None, **load_kwargs):
    """A SessionRunHook that makes the variables' initializers load the tables.

    For tf.compat.v1.train.MonitoredTrainingSession(hooks=[...]) and Estimator-style loops. In
    begin(), it replaces each variable's initializer by one that runs the old one, then loads the
    variable's rows of the table. So the table is loaded exactly when the session initializes the
    variables: a session that restores a checkpoint keeps the restored values and never contacts
    the source, and the first checkpoint (written right after the session is created) already
    holds the table.

    mapping: as for initialize().
    checkpoint_dir: no longer needed (the session itself decides between restoring and
        initializing); accepted and ignored.

    The variables must be initialized by an init op built after begin(): the Scaffold's default
    one, or global_variables_initializer() called later. A Scaffold(init_op=...) built before
    the session was created keeps the old initializers; use scaffold() then. The graph holds
    numpy_function ops that call back into this process: a graph imported from this run's .meta
    file cannot run these initializers (restoring its checkpoints works as usual).
    """
    del checkpoint_dir
    return _InitHook(mapping, source, chunk_rows, load_kwargs)


try:
    _KerasInitializer = tf.keras.initializers.Initializer
    _register_keras = tf.keras.utils.register_keras_serializable(package="embstore",
                                                                  name="Initializer")
    _keras_custom_objects = tf.keras.utils.get_custom_objects
except AttributeError:  # pragma: no cover
    _KerasInitializer = object

    def _register_keras(cls):
        return cls

    def _keras_custom_objects():
        return {}


def _keras_loading():
    """True while keras.models.load_model rebuilds a model from its file. It loads the saved
    weights right after, so initial values would only be overwritten.

    Keras 3 holds an ObjectSharingScope open exactly then (and while saving, when no initializer
    runs). Keras 2 (tf.keras of TensorFlow 2.15 and earlier, or tf_keras) does the same for
    `.keras` files, and loads `.h5` files and SavedModel directories inside its
    `in_tf_saved_model_scope`. Any other Keras: False, and load_model loads the table, then
    overwrites it with the saved weights."""
    root = _KerasInitializer.__module__.split(".")[0]  # "keras" or "tf_keras"
    try:
        global_state = importlib.import_module(root + ".src.backend.common.global_state")
    except ImportError:
        global_state = None
    if global_state is not None:  # Keras 3
        return global_state.get_global_attribute("shared_objects/id_to_obj_map") is not None
    try:  # Keras 2
        serialization = importlib.import_module(root + ".src.saving.serialization_lib")
        legacy = importlib.import_module(root + ".src.saving.legacy.saved_model.utils")
    except ImportError:  # pragma: no cover - a Keras laid out differently
        return False
    return bool(getattr(serialization.SHARED_OBJECTS, "enabled", False)
                or legacy.in_tf_saved_model_scope())


@_register_keras
class EmbstoreInitializer(_KerasInitializer):
    """Keras initializer that loads a table: `Embedding(..., embeddings_initializer=
    embstore.tf.Initializer("localhost:7070", "item_mat"))`.

    get_config() holds only (source, table, rows), so saved models and their configs stay small;
    the values live in the weights, where they belong. It is registered as "embstore>Initializer",
    so keras.models.load_model needs only `import embstore.tf`; while load_model rebuilds the
    model, the initializer returns zeros instead of loading (the saved weights replace them), so
    a saved model loads without its source.

    Its class name, which Keras writes into configs beside the registered name, is
    EmbstoreInitializer: Keras 2 loads `.h5` files and SavedModels by that bare class name, and
    "Initializer" would find Keras's own base class. embstore.tf.Initializer is the same class.
    """

    def __init__(self, source, table=None, rows=None, **load_kwargs):
        self.source = os.fspath(source) if isinstance(source, os.PathLike) else source
        self.table = table
        rows = _rows_arg(rows)
        if isinstance(rows, slice):
            raise InvalidArgumentError("Initializer takes rows=(begin, end), not a slice")
        self.rows = rows
        self.load_kwargs = load_kwargs

    def __call__(self, shape, dtype=None, partition_shape=None, partition_offset=None,
                 **kwargs):
        """The weight of `shape`; with partition_shape and partition_offset (TensorFlow's
        partitioned initialization: ParameterServerStrategy asks for each shard that way), only
        that block of rows."""
        dtype = tf.as_dtype(dtype or tf.float32)
        if _keras_loading():
            return tf.zeros(partition_shape or shape, dtype)
        load_kwargs = dict(self.load_kwargs)
        src = Source.resolve(self.source, **_connect_kwargs(load_kwargs))
        desc = src.describe(self.table)
        begin, end = _table_rows(src, desc, self.rows)
        want = [end - begin, desc["dim"]]
        if [int(d) for d in shape] != want:
            raise InvalidArgumentError(
                f"layer asks for a {list(shape)} weight, but {_table_label(src, desc)} rows "
                f"[{begin}, {end}) are {want}")
        if partition_shape is not None:
            first = begin + int((partition_offset or [0])[0])
            begin, end = first, first + int(partition_shape[0])
        load_dtype = {tf.float32: "float32", tf.float16: "float16",
                      tf.bfloat16: "bfloat16"}.get(dtype, "float32")
        arr = _load(src, self.table, rows=(begin, end), dtype=load_dtype, **load_kwargs)
        return _tensor_sharing(arr, dtype)

    def get_config(self):
        source = self.source.location if isinstance(self.source, Source) else self.source
        return {"source": source, "table": self.table,
                "rows": list(self.rows) if self.rows is not None else None}

    @classmethod
    def from_config(cls, config):
        return cls(config["source"], config.get("table"), config.get("rows"))


Initializer = EmbstoreInitializer
# Keras 2's legacy loader looks classes up by their bare name among the custom objects.
_keras_custom_objects()["EmbstoreInitializer"] = EmbstoreInitializer


def _tensor_sharing(arr, dtype):
    """A tensor over `arr`'s memory (DLPack, no copy; the tensor keeps the array alive), so the
    weight Keras makes from it is the one copy of the table. Falls back to a copy where DLPack
    cannot carry the dtype (numpy has no DLPack bfloat16)."""
    if arr.dtype == dtype.as_numpy_dtype and arr.dtype != np.dtype(tf.bfloat16.as_numpy_dtype):
        try:
            return tf.experimental.dlpack.from_dlpack(arr.__dlpack__())
        except (AttributeError, TypeError, ValueError, tf.errors.OpError):
            pass
    return tf.convert_to_tensor(arr, dtype=dtype)


def dataset(source, table=None, *, rows=None, batch_rows=None, with_keys=False, dtype="float32",
            **load_kwargs):
    """A tf.data.Dataset of the table's rows (or (key, row) pairs with with_keys=True), read from
    the source chunk by chunk as the pipeline consumes them."""
    rows = _rows_arg(rows)
    src = Source.resolve(source, **_connect_kwargs(load_kwargs))
    desc = src.describe(table)
    name = table if src.kind != "file" else None
    begin, end = _table_rows(src, desc, rows)
    dim = desc["dim"]
    chunk = int(batch_rows or _chunk_rows(None, dim, 4) // 8 or 1)
    if with_keys and not desc["has_keys"]:
        raise InvalidArgumentError(f"{_table_label(src, desc)} has no keys")

    def chunks():
        for off in range(begin, end, chunk):
            n = min(chunk, end - off)
            arr = _load(src, name, rows=(off, off + n), dtype=dtype, **load_kwargs)
            if with_keys:
                yield np.array(src.keys(name, off, off + n), dtype=object), arr
            else:
                yield arr

    out_dtype = tf.float32 if dtype == "float32" else tf.as_dtype(np.dtype(dtype))
    vec = tf.TensorSpec([None, dim], out_dtype)
    sig = (tf.TensorSpec([None], tf.string), vec) if with_keys else vec
    ds = tf.data.Dataset.from_generator(chunks, output_signature=sig)
    return ds.unbatch()
