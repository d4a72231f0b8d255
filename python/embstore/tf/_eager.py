"""TF2 eager: assign() fills a variable chunk by chunk, in every local copy of a mirrored one;
shards on parameter servers are loaded by the tasks that hold them (_parameter_servers)."""
import numpy as np

from .._core import LoadArgs, _chunks_into
from ._common import (_check_rows_fit, _check_shape, _chunk_rows, _np_dtype, _partitions,
                      _rows_arg, _scatter_rows, tf)
from ._parameter_servers import _assign_where_held, _on_parameter_server


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
    args = LoadArgs(load_kwargs, "embstore.tf")
    connect, read_kwargs = args.connect, args.read
    parts = _partitions(variable)
    held = [(p, first) for p, first in parts if _on_parameter_server(p)]
    if held:
        _assign_where_held(variable, held, source, table, rows, chunk_rows, connect, read_kwargs)
    here = [(p, first) for p, first in parts if not _on_parameter_server(p)]
    if not here:
        return variable
    src = args.resolve(source)
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
