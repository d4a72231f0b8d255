"""TF1 graph mode: initialize() and scaffold() run a variable's loading ops in a session;
init_hook() makes them the variable's initializer. One mechanism underneath all three (_Loader):
numpy_function ops that read the rows straight from the source into arrays TensorFlow takes
without a copy, written into the variable by AssignVariableOp (a resource variable adopts the
array as its buffer) or by scatter updates chunk by chunk."""
import weakref

import numpy as np

from .._native_import import _native
from .._core import LoadArgs, Source, _chunks_into, _fill, aligned_empty
from ..errors import FailedPreconditionError, InvalidArgumentError
from ._common import (_check_rows_fit, _check_shape, _chunk_rows, _np_dtype, _is_resource,
                      _partitions, _rows_arg, _scatter_rows, _var_name, tf)


def _graph_of(specs):
    graphs = {id(p.graph): p.graph for v, _, _ in specs for p, _ in _partitions(v)}
    if len(graphs) > 1:
        raise InvalidArgumentError("the variables of one mapping must live in one graph")
    return next(iter(graphs.values()), None) or tf.compat.v1.get_default_graph()


def _bytes(array):
    """A C-contiguous array's buffer as uint8, for the binding's page calls (it knows no
    bfloat16)."""
    return array.reshape(-1).view(np.uint8)


class _Request:
    """What one loading run reads for a variable: its rows of a table, described once, when the
    request is made (`begin`: the table row of the variable's row 0), with the read keywords of
    a LoadArgs."""

    def __init__(self, src, table, variable, rows, read):
        self.src, self.table, self.read = src, table, read
        self.desc = src.describe(table, read.get("local", True))
        self.begin = _check_shape(variable, src, self.desc, rows)


class _Loader:
    """The loading ops of one variable (partition), built once per graph; their size does not
    depend on the table's. Whatever runs them, the rows come the same way:

    adopt: (resource variables of known shape) one numpy_function reads every row into one
        64-byte aligned array, or into the variable's own zero pages moved (see find_zeros), and
        AssignVariableOp adopts it as the variable's buffer: the rows are copied once, nothing
        else is allocated.
    in_place: the variable is written where it is, a chunk at a time: each chunk is read by a
        numpy_function (the next one on a helper thread meanwhile) and written by a scatter
        update that runs before the next chunk is asked for; memory above the variable is two
        chunks.
    find_zeros: (resource variables) whether the variable's buffer starts with zero pages, a
        folded zeros initializer's: in graph mode Grappler folds a zeros initializer into a
        constant that the session keeps and that the variable shares, so a write into the
        variable would copy it and leave the constant holding a second variable's worth of
        memory. adopt then moves those pages into the array it fills (_native.take_zero_pages),
        and the constant's range still reads zeros, so peak memory stays about one variable.

    The numpy_functions read the request that run() (or the installed initializer) sets, so the
    ops serve every call, before and after the graph is finalized. A loader made for an
    initializer (init_hook) builds only the ops the initializer runs.
    """

    def __init__(self, part, first, chunk_rows, own_init=None, for_initializer=False):
        self.part, self.first = part, first
        self.np_dtype = np.dtype(_np_dtype(part)[0])
        self.nrows = int(part.shape[0])
        self.dims = part.shape.as_list()[1:]
        self.chunk = _chunk_rows(chunk_rows, int(np.prod(self.dims, dtype=np.int64)),
                                 self.np_dtype.itemsize)
        self._make_request = None  # () -> _Request, for the run in progress
        self._request = None
        self._chunks = None        # the in-place run's chunk reader
        self._donor = None         # the variable's old buffer, found holding zeros
        self._error = None         # what a numpy_function raised, re-raised by run()
        # The sessions whose variable embstore has written (find_zeros is for the first write).
        self._written = weakref.WeakSet()
        base = part.dtype.base_dtype
        whole = _is_resource(part) and part.shape.is_fully_defined()
        self.adopt = self.find_zeros = self.in_place = None
        with tf.compat.v1.name_scope("embstore_init"):
            if whole:
                loaded = tf.numpy_function(self._all_rows, [], base, stateful=True, name="load")
                loaded.set_shape(part.shape)
                self.adopt = tf.raw_ops.AssignVariableOp(resource=part.handle, value=loaded,
                                                         name="adopt")
            if for_initializer:
                # Not initialized yet: a ref variable first gets a buffer (or its own
                # initializer, when its shape is not fully known).
                last = self.adopt if whole else self._chain(self._allocate() or own_init)
                self.initializer = tf.group(last, name="initializer")
            else:
                if whole:
                    current = tf.raw_ops.ReadVariableOp(resource=part.handle, dtype=base)
                    self.find_zeros = tf.numpy_function(self._keep_if_zeros, [current], tf.bool,
                                                        stateful=True, name="find_zero_pages")
                self.in_place = self._chain(None)

    def _allocate(self):
        """For an initializer: an op that gives a ref variable a buffer of its shape without
        writing it. Empty is never folded (TensorFlow marks it do-not-optimize) and leaves its
        pages untouched until the rows land, where the variable's own zeros initializer would be
        folded into a constant that the first scatter copies."""
        part = self.part
        if not part.shape.is_fully_defined():
            return None
        empty = tf.raw_ops.Empty(shape=part.shape.as_list(), dtype=part.dtype.base_dtype,
                                 init=False, name="allocate")
        return tf.compat.v1.assign(part, empty, validate_shape=True, name="allocate").op

    def _chain(self, first_op):
        """Scatters of every chunk, one after another, after `first_op` (None: the variable is
        initialized already). Returns the last op."""
        last = first_op
        count = max(1, -(-self.nrows // self.chunk))
        for k in range(count):
            off = k * self.chunk
            n = min(self.chunk, self.nrows - off)
            with tf.control_dependencies([last] if last is not None else []):
                values = tf.numpy_function(lambda k=k: self._next_chunk(k), [],
                                           self.part.dtype.base_dtype, stateful=True, name="load")
            values.set_shape([n] + self.dims)
            last = _scatter_rows(self.part, off, values)
            if not isinstance(last, tf.Operation):
                last = last.op
        return last

    def _current(self):
        if self._request is None:
            self._request = self._make_request()
        return self._request

    def _keep_if_zeros(self, value):
        """In the session, on the variable's buffer (shared, not copied: the variable has not
        been read sparsely yet)."""
        if not value.flags.c_contiguous or not _native.starts_with_zero_pages(_bytes(value)):
            return np.bool_(False)
        self._donor = value
        return np.bool_(True)

    def _all_rows(self):
        """In the session: every row, into a new array that nothing else holds."""
        try:
            r = self._current()
            begin = r.begin + self.first
            shape = (self.nrows,) + tuple(self.dims)
            donor, self._donor = self._donor, None
            out = None
            if donor is not None:
                nbytes = int(np.prod(shape, dtype=np.int64)) * self.np_dtype.itemsize
                pages = _native.take_zero_pages(_bytes(donor), nbytes)
                if pages is not None:
                    out = pages.view(self.np_dtype).reshape(shape)
            del donor
            if out is None:
                out = aligned_empty(shape, self.np_dtype)
            _fill(r.src, r.table, r.desc, begin, begin + self.nrows, out, **r.read)
            return out
        except BaseException as e:  # re-raised by run(), as embstore raised it
            self._error = e
            raise
        finally:
            self._request = None

    def _next_chunk(self, k):
        """In the session: chunk k of the in-place run (chunk k + 1 is read meanwhile)."""
        try:
            if k == 0:
                r = self._current()
                begin = r.begin + self.first
                self._chunks = _chunks_into(r.src, r.table, r.desc, begin, begin + self.nrows,
                                            self.chunk, self.np_dtype, **r.read)
            _, rows = next(self._chunks)
            if (k + 1) * self.chunk >= self.nrows:
                self._finish()
            return rows
        except BaseException as e:
            self._error = e
            self._finish()
            raise

    def _finish(self):
        if self._chunks is not None:
            self._chunks.close()
            self._chunks = None
        self._request = None

    def install(self, make_request):
        """Makes this (for_initializer) loader's ops the variable's initializer: `make_request`
        is called once per initialization."""
        self._make_request = make_request
        # Whatever initializes the variables (Scaffold's default init_op,
        # global_variables_initializer) now loads the table, and a session that restores a
        # checkpoint runs none of it, as init_from_checkpoint warm-starts variables.
        self.part._initializer_op = self.initializer

    def run(self, session, request):
        """Loads the variable in `session` (initialized already) from `request`: adopt when its
        buffer holds a folded zeros initializer (the old buffer is going), else in place."""
        self._make_request = lambda: request
        self._request = None
        try:
            adopt = False
            if self.find_zeros is not None and session not in self._written:
                # Only before embstore's first write in this session: the read shares the
                # variable's buffer only until its first sparse access.
                self._written.add(session)
                adopt = bool(session.run(self.find_zeros))
            try:
                session.run(self.adopt if adopt else self.in_place)
            except tf.errors.OpError:
                if self._error is not None:
                    raise self._error from None
                raise
        finally:
            self._make_request = None
            self._donor = None
            self._error = None
            self._finish()


def _specs(mapping):
    """[(variable, table, rows)] of {variable: table or (table, rows)}, rows checked."""
    out = []
    for variable, spec in mapping.items():
        table, rows = (spec if isinstance(spec, tuple) else (spec, None))
        rows = _rows_arg(rows)
        _check_rows_fit(variable, rows)
        out.append((variable, table, rows))
    return out


# Loaders already built, per graph and variable (partition) name: initialize() adds its ops to a
# graph once (chunked by the first call's chunk_rows), and can run again after the graph was
# finalized.
_LOADERS = weakref.WeakKeyDictionary()


def _loaders(graph, specs, chunk_rows, caller):
    """[(loader, table, rows, variable)] for the checked mapping `specs`."""
    built = _LOADERS.setdefault(graph, {})
    out = []
    for variable, table, rows in specs:
        for part, first in _partitions(variable):
            loader = built.get(part.name)
            if loader is None:
                if graph.finalized:
                    raise FailedPreconditionError(
                        f"embstore.tf.{caller}(): the graph is finalized, so embstore cannot add "
                        f"the loading ops for variable {_var_name(part)!r}. Call "
                        f"embstore.tf.initialize() once before the graph is finalized (later "
                        f"calls reuse its ops), or build embstore.tf.init_hook() or "
                        f"embstore.tf.scaffold() before MonitoredTrainingSession starts")
                with graph.as_default():
                    loader = built[part.name] = _Loader(part, first, chunk_rows)
            out.append((loader, table, rows, variable))
    return out


def _run_loaders(session, loaders, src, read):
    requests = {}  # one per variable, for all its partitions
    for loader, table, rows, variable in loaders:
        request = requests.get(id(variable))
        if request is None:
            request = requests[id(variable)] = _Request(src, table, variable, rows, read)
        loader.run(session, request)


def initialize(session, mapping, source, *, chunk_rows=None, **load_kwargs):
    """TF1 graph mode: fills variables from tables in `session`.

    mapping: {variable: "table"} or {variable: ("table", (begin, end))}.
    The first call for a variable adds its loading ops (a few per chunk) to the session's graph;
    later calls reuse them, also once the graph is finalized. The table's values are read at run
    time and never stored in the graph. A resource variable that holds zeros (a zeros
    initializer) adopts one new array of its rows, made of its old zero pages; any other variable
    is written in place, chunk_rows at a time.
    """
    specs = _specs(mapping)
    loaders = _loaders(session.graph, specs, chunk_rows, "initialize")
    args = LoadArgs(load_kwargs, "embstore.tf")
    _run_loaders(session, loaders, args.resolve(source), args.read)


def scaffold(mapping, source, *, base=None, chunk_rows=None, **load_kwargs):
    """A tf.compat.v1.train.Scaffold whose init_fn fills the variables from the tables.

    For MonitoredTrainingSession(scaffold=...) and EstimatorSpec(scaffold=...). The session
    manager calls init_fn only when it initializes the variables instead of restoring a
    checkpoint, and before any hook runs, so the first checkpoint already holds the table and a
    restored run keeps its trained values. Call it in the variables' graph before the session is
    created (it adds its loading ops then). The graph holds no table values.

    mapping: as for initialize().
    base: a Scaffold to copy the other fields from; its own init_fn runs first.
    """
    specs = _specs(mapping)
    loaders = _loaders(_graph_of(specs), specs, chunk_rows, "scaffold")
    args = LoadArgs(load_kwargs, "embstore.tf")

    def init_fn(_, session):
        if base is not None and base.init_fn is not None:
            base.init_fn(session)
        _run_loaders(session, loaders, args.resolve(source), args.read)

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


class _InitHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, mapping, source, chunk_rows, load_kwargs):
        self._specs = _specs(mapping)
        args = LoadArgs(load_kwargs, "embstore.tf")
        self._source = _LazySource(source, args.connect)
        self._chunk_rows = chunk_rows
        self._read = args.read

    def begin(self):
        # MonitoredSession calls begin() before its Scaffold builds the default init_op and
        # finalizes the graph, so the variables' initializers can still be replaced here.
        graph = tf.compat.v1.get_default_graph()
        if graph.finalized:
            raise FailedPreconditionError(
                "embstore.tf.init_hook: the graph is already finalized, so the variables' "
                "initializers cannot load the table; create the MonitoredTrainingSession before "
                "finalizing the graph, or use embstore.tf.scaffold()")
        installed = _INSTALLED.setdefault(graph, {})
        for variable, table, rows in self._specs:
            for part, first in _partitions(variable):
                if part.graph is not graph:
                    raise InvalidArgumentError(
                        f"variable {_var_name(part)!r} is not in the session's graph")
                previous = installed.get(part.name)
                if previous is not None and previous[0] is self:
                    continue  # this hook's begin() already ran for this graph (a second session)
                own_init = previous[1] if previous is not None else part.initializer
                with graph.as_default():
                    loader = _Loader(part, first, self._chunk_rows, own_init,
                                     for_initializer=True)
                    loader.install(self._request_maker(variable, table, rows))
                installed[part.name] = (self, own_init)

    def _request_maker(self, variable, table, rows):
        def make():
            return _Request(self._source.get(), table, variable, rows, self._read)
        return make

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
