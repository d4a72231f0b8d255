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
- save(session, variable, dest): the trained variable written back as a table (graph mode,
  eager, Keras weights, partitioned variables), a chunk at a time.

Partitioned variables (tf.compat.v1 partitioners, tf.distribute ShardedVariable) load each
partition's own row range. Under ParameterServerStrategy, assign() has each ps task load the
shards it holds, in its own process; mirrored variables (MultiWorkerMirroredStrategy) are filled
in every local copy by each worker. docs/PYTHON.md gives the measured peak memory of each path.
"""
try:
    import tensorflow as tf  # noqa: F401
except ImportError as e:  # embstore itself works without TensorFlow; this package does not
    raise ImportError(
        "embstore.tf needs TensorFlow, which is not installed: pip install 'embstore[tensorflow]'"
        " (or tensorflow-cpu)") from e

# One module a job: _eager (assign), _parameter_servers (shards loaded where they live; importing
# it registers the PyFunc callback ps tasks run), _graph (initialize, scaffold, init_hook),
# _keras (Initializer), _data (dataset), _common (what they share).
from ._common import DEFAULT_CHUNK_BYTES  # noqa: E402,F401
from ._data import dataset  # noqa: E402
from ._eager import assign  # noqa: E402
from ._graph import init_hook, initialize, scaffold  # noqa: E402
from ._keras import EmbstoreInitializer, Initializer  # noqa: E402,F401
from ._save import save  # noqa: E402

__all__ = ["Initializer", "assign", "dataset", "init_hook", "initialize", "save", "scaffold"]
