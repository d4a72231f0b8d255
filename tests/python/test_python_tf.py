"""embstore.tf with real TensorFlow: eager, TF1 graph mode, hooks, Keras and tf.data.

The point of the package: the table's values reach the variables at run time, so the graph (and
the .meta file of every checkpoint) stays small whatever the table's size.
"""
import inspect
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

import embstore  # noqa: E402
import embstore.tf  # noqa: E402
from conftest import expected_matrix, wait_for_table, write_table  # noqa: E402

ROWS, DIM = 3000, 16  # 192 KB: larger than the 64 KB Const bound the tests check


@pytest.fixture
def table(make_table_bin, tmp_path):
    return str(write_table(make_table_bin, tmp_path / "item_mat.emb", ROWS, DIM, keys=True,
                           block_rows=100))


def test_eager_assign_chunk_by_chunk(table):
    v = tf.Variable(tf.zeros([ROWS, DIM]))
    embstore.tf.assign(v, table, chunk_rows=777)
    np.testing.assert_array_equal(v.numpy(), expected_matrix(ROWS, DIM))


def test_eager_assign_row_range_and_half_precision(table):
    v = tf.Variable(tf.zeros([100, DIM], dtype=tf.float16))
    embstore.tf.assign(v, table, rows=(50, 150))
    np.testing.assert_array_equal(v.numpy().astype(np.float32), expected_matrix(ROWS, DIM)[50:150])


def test_eager_assign_rejects_shape_mismatch(table):
    v = tf.Variable(tf.zeros([ROWS + 1, DIM]))
    with pytest.raises(embstore.errors.InvalidArgumentError, match=r"\[3001, 16\].*\[3000, 16\]"):
        embstore.tf.assign(v, table)


def _const_bytes(graph_def):
    return max([len(n.attr["value"].tensor.tensor_content) for n in graph_def.node
                if n.op == "Const"] or [0])


def test_graph_mode_checkpoint_stays_small_and_exact(table, tmp_path):
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("item_mat", [ROWS, DIM], initializer=tf.zeros_initializer())
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            embstore.tf.initialize(sess, {v: "item_mat"}, table, chunk_rows=1000)
            np.testing.assert_array_equal(sess.run(v), expected_matrix(ROWS, DIM))
            prefix = saver.save(sess, str(tmp_path / "ckpt" / "model"))
    meta = os.path.getsize(prefix + ".meta")
    assert meta < 1 << 20
    assert _const_bytes(g.as_graph_def()) <= 64 << 10

    # The checkpoint holds the exact values.
    restored = tf.train.load_checkpoint(prefix).get_tensor("item_mat")
    np.testing.assert_array_equal(restored, expected_matrix(ROWS, DIM))

    # The old way, for contrast: the table becomes a Const in the graph and the .meta grows by it.
    g2 = tf.Graph()
    with g2.as_default():
        arr = embstore.load(table)
        tf.compat.v1.get_variable("item_mat", initializer=tf.constant(arr))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=g2) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            old = saver.save(sess, str(tmp_path / "old" / "model"))
    assert os.path.getsize(old + ".meta") > arr.nbytes
    assert _const_bytes(g2.as_graph_def()) >= arr.nbytes


def test_graph_mode_partitioned_variable(table):
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable(
            "item_mat", [ROWS, DIM], initializer=tf.zeros_initializer(),
            partitioner=tf.compat.v1.fixed_size_partitioner(3))
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            embstore.tf.initialize(sess, {v: "item_mat"}, table)
            parts = [sess.run(p) for p in v]
    np.testing.assert_array_equal(np.concatenate(parts), expected_matrix(ROWS, DIM))
    assert len(parts) == 3


@pytest.mark.parametrize("kind", ["ref", "resource", "partitioned"])
def test_initialize_writes_in_place_over_trained_values_and_again_once_finalized(kind, table,
                                                                               make_table_bin,
                                                                               tmp_path):
    # Variables that hold other values (trained, or a non-zero initializer) are written where
    # they are, chunk by chunk (701 rows: the last chunk is short); the ops added by the first
    # call serve a second one after the graph is finalized; narrower variables are rounded.
    want = expected_matrix(ROWS, DIM)
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable(
            "item_mat", [ROWS, DIM], initializer=tf.compat.v1.constant_initializer(3.5),
            use_resource=kind != "ref",
            partitioner=tf.compat.v1.fixed_size_partitioner(3) if kind == "partitioned" else None)
        h = tf.compat.v1.get_variable("half", [ROWS, DIM], dtype=tf.bfloat16,
                                      initializer=tf.compat.v1.ones_initializer(),
                                      use_resource=kind != "ref")
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            embstore.tf.initialize(sess, {v: "item_mat", h: "item_mat"}, table, chunk_rows=701)
            read = lambda x: np.concatenate([sess.run(p) for p in x]) if kind == "partitioned" \
                else sess.run(x)  # noqa: E731
            np.testing.assert_array_equal(read(v), want)
            np.testing.assert_array_equal(sess.run(h).astype(np.float32),
                                          want.astype(tf.bfloat16.as_numpy_dtype)
                                          .astype(np.float32))
            sess.run([p.assign(tf.zeros_like(p)) for p, _ in _parts(v)])
            g.finalize()
            embstore.tf.initialize(sess, {v: ("item_mat", (0, ROWS))}, table)
            np.testing.assert_array_equal(read(v), want)
            # A bad block mid-table: embstore's own error, naming the block, not TensorFlow's.
            bad = tmp_path / "bad.emb"
            data = bytearray(open(table, "rb").read())
            data[_data_offset(make_table_bin, table) + 2500 * DIM * 4] ^= 0x40
            bad.write_bytes(bytes(data))
            with pytest.raises(embstore.errors.CorruptionError, match="block"):
                embstore.tf.initialize(sess, {v: None}, bad, chunk_rows=701)


def test_initialize_adopts_into_the_zero_pages_of_a_bfloat16_variable(make_table_bin, tmp_path):
    # Large enough (3.2 MB) for its folded zeros to be taken over; bfloat16 reaches the page
    # move as bytes.
    rows = 100000
    path = write_table(make_table_bin, tmp_path / "wide.emb", rows, DIM)
    g = tf.Graph()
    with g.as_default():
        h = tf.compat.v1.get_variable("wide", [rows, DIM], dtype=tf.bfloat16,
                                      initializer=tf.zeros_initializer(), use_resource=True)
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            embstore.tf.initialize(sess, {h: None}, path)
            got = sess.run(h)
    np.testing.assert_array_equal(got, expected_matrix(rows, DIM).astype(got.dtype))


def _parts(v):
    from embstore.tf._common import _partitions
    return _partitions(v)


def _data_offset(make_table_bin, path):
    import json
    import subprocess
    cli = make_table_bin.parent.parent / "cli" / "embstore"
    return json.loads(subprocess.run([str(cli), "inspect", str(path), "--json"],
                                     capture_output=True, text=True, check=True).stdout)[
        "data_offset"]


def test_column_partitioned_variable_is_refused_with_its_real_shape(table):
    # Once: "variable 'emb' has shape [9000, 4]" for a [3000, 16] variable in 4 column slices.
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable(
            "emb", [ROWS, DIM], initializer=tf.zeros_initializer(),
            partitioner=tf.compat.v1.fixed_size_partitioner(4, axis=1))
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            with pytest.raises(embstore.errors.InvalidArgumentError,
                               match=r"'emb' has shape \[3000, 16\] in 4 slices along columns "
                                     r".*partitioned by rows"):
                embstore.tf.initialize(sess, {v: "item_mat"}, table)


def test_monitored_training_session_hook(table, tmp_path):
    ckpt = str(tmp_path / "train")
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("item_mat", [ROWS, DIM], initializer=tf.zeros_initializer())
        step = tf.compat.v1.train.get_or_create_global_step()
        train = tf.compat.v1.assign_add(step, 1)
        hook = embstore.tf.init_hook({v: "item_mat"}, table, checkpoint_dir=ckpt)
        with tf.compat.v1.train.MonitoredTrainingSession(
                checkpoint_dir=ckpt, hooks=[hook], save_checkpoint_steps=1) as sess:
            np.testing.assert_array_equal(sess.run(v), expected_matrix(ROWS, DIM))
            sess.run(train)
    assert tf.train.latest_checkpoint(ckpt)
    meta = [f for f in os.listdir(ckpt) if f.endswith(".meta")]
    assert meta and all(os.path.getsize(os.path.join(ckpt, f)) < 1 << 20 for f in meta)

    # A restarted run restores from the checkpoint; the hook leaves the restored values alone.
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("item_mat", [ROWS, DIM], initializer=tf.zeros_initializer())
        step = tf.compat.v1.train.get_or_create_global_step()
        train = tf.group(tf.compat.v1.assign(v[0], tf.fill([DIM], 99.0)),
                         tf.compat.v1.assign_add(step, 1))
        hook = embstore.tf.init_hook({v: "item_mat"}, table, checkpoint_dir=ckpt)
        with tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=[hook]) as s:
            assert (s.run(v) == expected_matrix(ROWS, DIM)).all()  # restored, not reloaded
            s.run(train)  # "training" changes the embedding; the final checkpoint keeps it
        with tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=[hook]) as s:
            assert (s.run(v)[0] == 99.0).all()


def test_keras_initializer_config_holds_only_the_reference(table):
    layer = tf.keras.layers.Embedding(
        ROWS, DIM, embeddings_initializer=embstore.tf.Initializer(table, None))
    layer.build((None,))
    np.testing.assert_array_equal(layer.embeddings.numpy(), expected_matrix(ROWS, DIM))
    import json
    config = json.dumps(tf.keras.layers.serialize(layer))
    assert len(config) < 4096
    assert table in config


def test_dataset_streams_rows_and_keys(tmp_path, table):
    rows = list(embstore.tf.dataset(table, batch_rows=500).as_numpy_iterator())
    np.testing.assert_array_equal(np.stack(rows), expected_matrix(ROWS, DIM))
    pairs = list(embstore.tf.dataset(table, rows=(10, 13), with_keys=True).as_numpy_iterator())
    assert [k for k, _ in pairs] == [b"k10", b"k11", b"k12"]


def test_from_a_server(make_table_bin, server):
    write_table(make_table_bin, server.store / "item_mat.emb", ROWS, DIM)
    wait_for_table(server.unix, "item_mat")
    v = tf.Variable(tf.zeros([ROWS, DIM]))
    embstore.tf.assign(v, server.tcp, "item_mat", local=False, streams=2)
    np.testing.assert_array_equal(v.numpy(), expected_matrix(ROWS, DIM))


@pytest.mark.parametrize("rows, message", [
    ((5, 2), r"rows=\(5, 2\) is not a row range"),
    ((10, 10), r"rows=\(10, 10\) is empty, but variable 'v.*' has 100 rows"),
    ((0, 50), r"rows=\(0, 50\) holds 50 rows, but variable 'v.*' has 100 rows"),
    ((2950, 3050), r"table file '.*item_mat.emb': rows=\(2950, 3050\) is outside"),
])
def test_row_ranges_are_checked_before_loading(table, rows, message):
    v = tf.Variable(tf.zeros([100, DIM]), name="v")
    with pytest.raises(embstore.errors.InvalidArgumentError, match=message):
        embstore.tf.assign(v, table, rows=rows)
    with tf.Graph().as_default():
        gv = tf.compat.v1.get_variable("v", [100, DIM], initializer=tf.zeros_initializer())
        ops = len(gv.graph.get_operations())
        if rows[1] <= ROWS:  # shape-only mistakes: rejected before any op or connection
            with pytest.raises(embstore.errors.InvalidArgumentError, match=message):
                embstore.tf.init_hook({gv: ("item_mat", rows)}, table)
            with pytest.raises(embstore.errors.InvalidArgumentError, match=message):
                embstore.tf.scaffold({gv: ("item_mat", rows)}, table)
            with pytest.raises(embstore.errors.InvalidArgumentError, match=message):
                embstore.tf.initialize(None, {gv: ("item_mat", rows)}, table)
            assert len(gv.graph.get_operations()) == ops
    if rows == (5, 2):
        with pytest.raises(embstore.errors.InvalidArgumentError, match=message):
            embstore.tf.Initializer(table, rows=rows)
        with pytest.raises(embstore.errors.InvalidArgumentError, match=message):
            embstore.tf.dataset(table, rows=rows)


def test_keras_shape_error_names_the_table_file(table):
    layer = tf.keras.layers.Embedding(ROWS + 1, DIM,
                                      embeddings_initializer=embstore.tf.Initializer(table))
    with pytest.raises(embstore.errors.InvalidArgumentError,
                       match=r"\[3001, 16\] weight, but table file '.*item_mat.emb' rows "
                             r"\[0, 3000\) are \[3000, 16\]"):
        layer.build((None,))


def test_initialize_builds_its_ops_once_and_reuses_them_in_a_finalized_graph(table):
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("item_mat", [ROWS, DIM], initializer=tf.zeros_initializer())
        reset = v.assign(tf.zeros([ROWS, DIM]))
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            embstore.tf.initialize(sess, {v: "item_mat"}, table)
            ops = len(g.get_operations())
            sess.run(reset)
            embstore.tf.initialize(sess, {v: "item_mat"}, table, chunk_rows=999)
            assert len(g.get_operations()) == ops
            sess.run(reset)
            g.finalize()
            embstore.tf.initialize(sess, {v: "item_mat"}, table)
            np.testing.assert_array_equal(sess.run(v), expected_matrix(ROWS, DIM))


def test_initialize_on_a_finalized_graph_says_what_to_do(table):
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("item_mat", [ROWS, DIM], initializer=tf.zeros_initializer())
        g.finalize()
        with tf.compat.v1.Session(graph=g) as sess:
            with pytest.raises(embstore.errors.FailedPreconditionError,
                               match=r"initialize\(\): the graph is finalized.*'item_mat:0'.*"
                                     r"once before the graph is finalized.*init_hook\(\).*"
                                     r"scaffold\(\)"):
                embstore.tf.initialize(sess, {v: "item_mat"}, table)


def _first_checkpoint(ckpt):
    """The variables of the checkpoint MonitoredTrainingSession wrote at session start."""
    return tf.train.load_checkpoint(os.path.join(ckpt, "model.ckpt-0"))


@pytest.mark.parametrize("kind", ["resource", "ref", "partitioned"])
def test_hook_loads_before_the_first_checkpoint(table, tmp_path, kind):
    # MonitoredTrainingSession saves model.ckpt-0 before any user hook's after_create_session();
    # the table must already be in the variable then, whatever kind of variable it is.
    ckpt = str(tmp_path / "train")
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable(
            "item_mat", [ROWS, DIM], initializer=tf.zeros_initializer(),
            use_resource=kind != "ref",
            partitioner=tf.compat.v1.fixed_size_partitioner(3) if kind == "partitioned" else None)
        tf.compat.v1.train.get_or_create_global_step()
        hook = embstore.tf.init_hook({v: "item_mat"}, table, chunk_rows=400)
        with tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=[hook]) as s:
            value = np.concatenate([s.run(p) for p in v]) if kind == "partitioned" else s.run(v)
    np.testing.assert_array_equal(value, expected_matrix(ROWS, DIM))
    np.testing.assert_array_equal(_first_checkpoint(ckpt).get_tensor("item_mat"),
                                  expected_matrix(ROWS, DIM))


@pytest.mark.parametrize("kind", ["resource", "ref"])
def test_hook_does_not_run_the_variables_own_initializer(table, kind):
    # Every row is overwritten, so the hook's initializer only allocates the buffer: a zeros
    # initializer that Grappler folds into a constant would double the variable in memory.
    calls = []

    def initializer(shape, dtype=None, partition_info=None):
        def record():
            calls.append(1)
            return np.zeros(shape, np.float32)
        return tf.reshape(tf.numpy_function(record, [], tf.float32), shape)

    with tf.Graph().as_default():
        v = tf.compat.v1.get_variable("item_mat", [ROWS, DIM], initializer=initializer,
                                      use_resource=kind == "resource")
        embstore.tf.init_hook({v: None}, table, chunk_rows=700).begin()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(v), expected_matrix(ROWS, DIM))
    assert calls == []


# The start of the programs that measure a load's peak memory in a process of its own:
# argv is (table file, rows, dim).
_MEMORY_PROGRAM = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
import embstore.tf

def peak_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1])

rows, dim = int(sys.argv[2]), int(sys.argv[3])
"""

_HOOK_MEMORY = _MEMORY_PROGRAM + """with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("item_mat", [rows, dim], initializer=tf.zeros_initializer())
    embstore.tf.init_hook({v: None}, sys.argv[1]).begin()
    init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session() as sess:
        sess.run(tf.no_op())  # the session's own start-up memory before the mark
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = peak_kib()
        sess.run(init)
        print((peak_kib() - base) * 1024, float(sess.run(v[rows - 1, dim - 1])))
"""


def test_hook_initialization_holds_the_variable_once(make_table_bin, tmp_path):
    # Default session options (Grappler folds a zeros initializer into a constant): the loading
    # initializer's peak is the variable itself, not a folded constant, a copy or whole chunks.
    import subprocess
    import sys
    rows, dim = 131072, 128  # 64 MiB
    path = write_table(make_table_bin, tmp_path / "big.emb", rows, dim)
    out = subprocess.run([sys.executable, "-c", _HOOK_MEMORY, str(path), str(rows), str(dim)],
                         capture_output=True, text=True, check=True).stdout.split()
    extra, last = int(out[0]), float(out[1])
    assert last == expected_matrix(rows, dim)[-1, -1]
    assert extra < rows * dim * 4 * 1.25, f"{extra / 2**20:.0f} MiB for a 64 MiB variable"


_INITIALIZE_MEMORY = _MEMORY_PROGRAM + """with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("item_mat", [rows, dim], initializer=tf.zeros_initializer(),
                                  use_resource=True)
    biggest = tf.reduce_max(tf.abs(v))
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = peak_kib()
        embstore.tf.initialize(sess, {v: None}, sys.argv[1], chunk_rows=8192)
        extra = (peak_kib() - base) * 1024
        last = float(sess.run(v[rows - 1, dim - 1]))
        loaded = float(sess.run(biggest))
        # The folded zeros constant still initializes to zeros, and a second load still works.
        sess.run(v.initializer)
        again = float(sess.run(biggest))
        embstore.tf.initialize(sess, {v: None}, sys.argv[1], chunk_rows=8192)
        print(extra, last, loaded, again, float(sess.run(v[rows - 1, dim - 1])))
"""


def test_initialize_after_a_folded_zeros_initializer_adds_chunks_not_a_copy(make_table_bin,
                                                                            tmp_path):
    # Default session options: Grappler folds the zeros initializer into a constant that the
    # resource variable shares. initialize() moves the constant's zero pages into the array the
    # variable adopts (or, where the kernel cannot move them, returns them to the kernel as the
    # rows land), so no write copies the constant and no second variable's worth stays.
    import subprocess
    import sys
    rows, dim = 262144, 128  # 128 MiB
    path = write_table(make_table_bin, tmp_path / "big.emb", rows, dim)
    out = subprocess.run([sys.executable, "-c", _INITIALIZE_MEMORY, str(path), str(rows), str(dim)],
                         capture_output=True, text=True, check=True).stdout.split()
    extra, last, loaded, again, reloaded = int(out[0]), *map(float, out[1:])
    matrix = expected_matrix(rows, dim)
    assert last == reloaded == matrix[-1, -1]
    assert loaded == np.abs(matrix).max() and again == 0.0
    from embstore._native import take_zero_pages
    probe = np.ones(4 << 20, np.uint8)
    probe[:] = 0
    moves = take_zero_pages(probe, probe.nbytes) is not None
    # Moved pages: only the loader's own buffers; released pages: up to a few chunks behind.
    limit = 0.1 if moves else 0.4
    assert extra < rows * dim * 4 * limit, f"{extra / 2**20:.0f} MiB for a 128 MiB variable"


def test_hook_shape_mismatch_names_the_table_file(table):
    with tf.Graph().as_default():
        v = tf.compat.v1.get_variable("item_mat", [ROWS + 1, DIM],
                                      initializer=tf.zeros_initializer())
        hook = embstore.tf.init_hook({v: None}, table)
        # The load runs inside the session's init op, so TensorFlow carries embstore's message.
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"\[3001, 16\], but table file '.*item_mat.emb' rows "
                                 r"\[0, 3000\) are \[3000, 16\]"):
            with tf.compat.v1.train.MonitoredTrainingSession(hooks=[hook]):
                pass


def test_scaffold_runs_the_base_scaffolds_init_fn_first(table):
    with tf.Graph().as_default():
        v = tf.compat.v1.get_variable("item_mat", [ROWS, DIM], initializer=tf.zeros_initializer())
        first, seen = v[0, 0], []
        base = tf.compat.v1.train.Scaffold(init_fn=lambda _, sess: seen.append(sess.run(first)))
        with tf.compat.v1.train.MonitoredTrainingSession(
                scaffold=embstore.tf.scaffold({v: "item_mat"}, table, base=base)) as sess:
            np.testing.assert_array_equal(sess.run(v), expected_matrix(ROWS, DIM))
    assert seen == [0.0]


def _keras_model(source, table_name=None):
    return tf.keras.Sequential([
        tf.keras.Input((3,), dtype="int32"),
        tf.keras.layers.Embedding(ROWS, DIM, embeddings_initializer=embstore.tf.Initializer(
            source, table_name))])


IDS = np.array([[0, 1, 2999]], dtype=np.int32)


def test_keras_saved_model_loads_back_without_its_source(table, tmp_path):
    model = _keras_model(table)
    path = str(tmp_path / "m.keras")
    model.save(path)
    # Only `import embstore.tf`: no custom_objects. Without the table file, any attempt to load
    # the table would fail: the weights come from the saved file.
    os.rename(table, table + ".moved")
    loaded = tf.keras.models.load_model(path)
    np.testing.assert_array_equal(loaded(IDS).numpy()[0], expected_matrix(ROWS, DIM)[[0, 1, 2999]])
    init = loaded.layers[0].embeddings_initializer
    assert isinstance(init, embstore.tf.Initializer)
    assert (init.source, init.table, init.rows) == (table, None, None)

    # Outside load_model the initializer loads the table as usual (a clone is a new model).
    os.rename(table + ".moved", table)
    clone = tf.keras.models.clone_model(loaded)
    np.testing.assert_array_equal(clone.layers[0].embeddings.numpy(), expected_matrix(ROWS, DIM))


def test_keras_models_load_back_with_the_server_stopped(make_table_bin, server, tmp_path):
    write_table(make_table_bin, server.store / "item_mat.emb", ROWS, DIM)
    wait_for_table(server.unix, "item_mat")
    model = _keras_model(server.tcp, "item_mat")
    model.save(str(tmp_path / "m.keras"))
    # Keras 2's export() (TensorFlow 2.15) has no verbose= argument.
    quiet = {"verbose": False} if "verbose" in inspect.signature(model.export).parameters else {}
    model.export(str(tmp_path / "saved_model"), **quiet)
    server.stop()
    want = expected_matrix(ROWS, DIM)[[0, 1, 2999]]

    loaded = tf.keras.models.load_model(str(tmp_path / "m.keras"))
    np.testing.assert_array_equal(loaded(IDS).numpy()[0], want)
    exported = tf.saved_model.load(str(tmp_path / "saved_model"))
    np.testing.assert_array_equal(exported.serve(IDS).numpy()[0], want)


def test_keras_initializer_loads_only_the_partition_asked_for(table):
    # ParameterServerStrategy initializes a sharded weight shard by shard, passing each one's
    # shape and offset: each call loads only that block of rows, not the table once per shard.
    init = embstore.tf.Initializer(table, rows=(100, 2100))
    block = init([2000, DIM], tf.float32, partition_shape=[500, DIM], partition_offset=[700, 0])
    np.testing.assert_array_equal(block.numpy(), expected_matrix(ROWS, DIM)[800:1300])
    with pytest.raises(embstore.errors.InvalidArgumentError, match=r"\[2001, 16\] weight"):
        init([2001, DIM], tf.float32, partition_shape=[500, DIM], partition_offset=[0, 0])
