"""TF1 graph mode: initialize() feeds assign ops through placeholders; scaffold() does it in a
Scaffold's init_fn; init_hook() makes each variable's initializer load its rows."""
import threading
import weakref

import numpy as np

from .._core import LoadArgs, Source, _chunks_into, load as _load
from .._pages import release_zero_pages, starts_with_zero_pages, zero_pages_into
from ..errors import FailedPreconditionError, InvalidArgumentError
from ._common import (_check_rows_fit, _check_shape, _chunk_rows, _np_dtype, _is_resource,
                      _partitions, _rows_arg, _scatter_rows, _var_name, tf)


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
            self.find_zeros = None
            if _is_resource(variable) and variable.shape.is_fully_defined():
                current = tf.raw_ops.ReadVariableOp(resource=variable.handle,
                                                    dtype=variable.dtype.base_dtype)
                self.find_zeros = tf.numpy_function(self._keep_if_zeros, [current], tf.bool,
                                                    stateful=True, name="find_zero_pages")
                loaded = tf.numpy_function(self._load_pending, [], variable.dtype.base_dtype,
                                           stateful=True, name="load")
                loaded.set_shape(variable.shape)
                self.adopt = tf.raw_ops.AssignVariableOp(resource=variable.handle, value=loaded,
                                                         name="adopt")
        # The sessions this feeder has written the variable in; the variable's old buffer, found
        # holding zeros, until _load_pending takes its pages; the thread releasing them where
        # they cannot move; the read _load_pending does, and what it raised.
        self._written = weakref.WeakSet()
        self._donor = None
        self._releasing = None
        self._pending = None
        self._error = None

    def _keep_if_zeros(self, value):
        """In the session, on the variable's buffer (shared, not copied: the variable has not
        been read sparsely yet): whether it starts with zero pages, which the load then takes
        over (_load_pending)."""
        if not starts_with_zero_pages(value):
            return np.bool_(False)
        self._donor = value
        return np.bool_(True)

    def _load_pending(self):
        """In the session: every row of the variable, read straight into a new array that
        TensorFlow takes without a copy and AssignVariableOp adopts as the variable's buffer
        (nothing else holds it). The array is made of the old buffer's zero pages, moved, so the
        load needs no new memory; where they cannot move, a thread returns them to the kernel
        while the rows land in a new 64-byte aligned array."""
        src, table, begin, end, kwargs = self._pending
        donor, self._donor = self._donor, None
        try:
            out = None
            if donor is not None:
                out = zero_pages_into(donor, (end - begin,) + tuple(self.variable.shape[1:]),
                                      self.np_dtype)
                if out is None:
                    # The thread's reference keeps the buffer allocated until its pages are
                    # released.
                    self._releasing = threading.Thread(
                        target=release_zero_pages, args=(donor,),
                        name="embstore-release-zero-pages", daemon=True)
                    self._releasing.start()
            del donor
            return _load(src, table, rows=(begin, end), dtype=self.load_dtype, out=out,
                         **kwargs).astype(self.np_dtype, copy=False)
        except BaseException as e:  # re-raised by run(), as embstore raised it
            self._error = e
            raise

    def _holds_folded_zeros(self, session):
        """Before the first write in `session`: whether the variable's buffer starts with zeros
        whose pages the load may take over, so the variable may take a new buffer instead.

        In graph mode Grappler folds a zeros initializer into a constant that the session keeps,
        and a resource variable initialized from it shares the constant's buffer: a write into
        the variable would copy it out of the constant and leave the constant holding a second
        variable's worth of memory that nobody reads again. The load moves those zero pages
        into the array it fills instead, and the constant's range still reads zeros
        (embstore._pages; where pages cannot move, a thread returns them to the kernel faster
        than the rows land), so peak memory stays about one variable. The read that finds the
        buffer shares it only until the variable's first sparse access, which is why this runs
        once per session, before embstore's first write."""
        if self.find_zeros is None or session in self._written:
            return False
        self._written.add(session)
        return bool(session.run(self.find_zeros))

    def _finish_release(self):
        if self._releasing is not None:
            self._releasing.join()
            self._releasing = None

    def run(self, session, src, table, first_row, chunk_rows, **read_kwargs):
        """read_kwargs: a LoadArgs' read keywords."""
        rows = int(self.variable.shape[0])
        desc = src.describe(table)
        try:
            if self._holds_folded_zeros(session):
                # The old buffer is going: the variable adopts a new one holding the rows, read
                # once, with no chunks and no copy on the way.
                self._pending = (src, table, first_row, first_row + rows, read_kwargs)
                try:
                    session.run(self.adopt)
                except tf.errors.OpError:
                    if self._error is not None:
                        raise self._error from None
                    raise
                return
            # In place: the fed arrays are 64-byte aligned, so the session takes them without a
            # copy; the scatter copies each row into the variable. Reading the next chunk
            # overlaps the write.
            chunk = _chunk_rows(chunk_rows, int(self.variable.shape[1]),
                                np.dtype(self.np_dtype).itemsize)
            for off, arr in _chunks_into(src, table, desc, first_row, first_row + rows, chunk,
                                         self.np_dtype, **read_kwargs):
                session.run(self.op, {self.begin: off, self.values: arr})
        finally:
            self._pending = None
            self._donor = None
            self._error = None
            self._finish_release()


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


def _run_feeders(session, feeders, src, chunk_rows, read_kwargs):
    for feeder, table, rows, first, variable in feeders:
        begin = _check_shape(variable, src, src.describe(table), rows)
        feeder.run(session, src, table, begin + first, chunk_rows, **read_kwargs)


def initialize(session, mapping, source, *, chunk_rows=None, **load_kwargs):
    """TF1 graph mode: fills variables from tables in `session`.

    mapping: {variable: "table"} or {variable: ("table", (begin, end))}.
    The first call for a variable adds a few placeholders and assign ops per variable
    (partition) to the session's graph; later calls reuse them, also once the graph is finalized.
    The table's values are read at run time and never stored in the graph. A resource variable
    that holds zeros (a zeros initializer) adopts one new array of its rows while its old pages
    go back to the kernel; any other variable is written in place, chunk_rows at a time.
    """
    specs = _specs(mapping)
    feeders = _feeders(session.graph, specs, "initialize")
    args = LoadArgs(load_kwargs, "embstore.tf")
    _run_feeders(session, feeders, args.resolve(source), chunk_rows, args.read)


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
    args = LoadArgs(load_kwargs, "embstore.tf")

    def init_fn(_, session):
        if base is not None and base.init_fn is not None:
            base.init_fn(session)
        _run_feeders(session, feeders, args.resolve(source), chunk_rows, args.read)

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


def _allocate(part):
    """An op that gives ref variable `part` a buffer of its shape without writing it, or None
    when its shape is not fully known.

    The chunks overwrite every row, so running the variable's own initializer first would only
    cost time and memory: in graph mode Grappler folds a zeros_initializer into a constant that
    the session keeps and that shares the variable's buffer, and the first scatter then copies
    the whole variable (two variables' worth for the life of the session). Empty is never folded
    (TensorFlow marks it do-not-optimize) and leaves its pages untouched until the rows land.
    """
    if not part.shape.is_fully_defined():
        return None
    empty = tf.raw_ops.Empty(shape=part.shape.as_list(), dtype=part.dtype.base_dtype, init=False,
                             name="allocate")
    return tf.compat.v1.assign(part, empty, validate_shape=True, name="allocate").op


def _install_loading_initializer(owner, part, first, load, chunk_rows):
    """Makes `part`'s initializer load its rows of the table instead of running its own
    initializer (every row is overwritten, and a folded zeros constant would double the variable
    in memory, see _allocate).

    A resource variable gets all its rows from one numpy_function: the array is read straight
    from the source (64-byte aligned, owned by nobody else), and AssignVariableOp adopts its
    buffer as the variable's, so the rows are copied once and nothing but the variable is
    allocated. A ref variable's Assign copies its input, so it gets an empty buffer and then its
    rows chunk by chunk, each fetched by a numpy_function and written by a scatter update.

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

    def fetched(off, n, after=None):
        with tf.control_dependencies([after] if after is not None else []):
            values = tf.numpy_function(lambda: fetch(off, n), [], part.dtype.base_dtype,
                                       stateful=True, name="load")
        values.set_shape([n] + dims)
        return values

    with part.graph.as_default(), tf.compat.v1.name_scope("embstore_init"):
        if _is_resource(part) and part.shape.is_fully_defined():
            last = tf.raw_ops.AssignVariableOp(resource=part.handle, value=fetched(0, nrows),
                                               name="assign")
        else:
            last = _allocate(part) or own_init
            for off in range(0, nrows, chunk):
                # The control dependency orders the chunks: one chunk in memory at a time.
                last = _scatter_rows(part, off, fetched(off, min(chunk, nrows - off), last))
                if not isinstance(last, tf.Operation):
                    last = last.op
        part._initializer_op = tf.group(last, name="initializer")
    installed[part.name] = (owner, own_init)


class _InitHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, mapping, source, chunk_rows, load_kwargs):
        self._specs = _specs(mapping)
        args = LoadArgs(load_kwargs, "embstore.tf")
        self._source = _LazySource(source, args.connect)
        self._chunk_rows = chunk_rows
        self._load_kwargs = args.read

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
    begin(), it replaces each variable's initializer by one that loads the variable's rows of the
    table instead (every row is overwritten, so the old initializer does not run; a resource
    variable adopts the loaded array as its buffer, a ref variable is filled chunk_rows at a
    time). So the table is loaded exactly when the session initializes the
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
