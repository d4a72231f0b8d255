"""embstore with the real tf.estimator (TensorFlow 2.15): input_fn, model_fn, model_dir restarts.

An Estimator user needs two lines: `embstore.tf.dataset(source, table)` in the input_fn, and
`EstimatorSpec(..., scaffold=embstore.tf.scaffold({variable: table}, source))` (or
`training_hooks=[embstore.tf.init_hook(...)]`) in the model_fn. Neither puts the table in the
graph, so the .meta files in model_dir stay small; the first checkpoint holds the table bit for
bit; a restart from model_dir restores and never reads the table again. Crashes are real child
processes that end with os._exit().
"""
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import embstore  # noqa: E402
import embstore.tf  # noqa: E402
from conftest import ROOT, expected_matrix, write_table  # noqa: E402

ROWS, DIM = 3000, 16  # 192 KB: larger than the 64 KB Const bound checked below

sys.path.insert(0, str(ROOT / "examples"))


@pytest.fixture
def table(make_table_bin, tmp_path):
    return str(write_table(make_table_bin, tmp_path / "item_mat.emb", ROWS, DIM, block_rows=100))


def _largest_const(graph_def):
    """Bytes of the largest Const in a GraphDef, its functions (tf.data's) included."""
    nodes = list(graph_def.node)
    for f in graph_def.library.function:
        nodes.extend(f.node_def)
    return max([n.attr["value"].tensor.ByteSize() for n in nodes if n.op == "Const"] or [0])


def _meta_files(model_dir):
    from tensorflow.core.protobuf import meta_graph_pb2
    out = {}
    for path in glob.glob(os.path.join(model_dir, "*.meta")):
        meta = meta_graph_pb2.MetaGraphDef()
        with open(path, "rb") as f:
            meta.ParseFromString(f.read())
        out[os.path.basename(path)] = (os.path.getsize(path), _largest_const(meta.graph_def))
    return out


def _checkpoint_steps(model_dir):
    return sorted(int(p[len(model_dir) + len("/model.ckpt-"):-len(".index")])
                  for p in glob.glob(os.path.join(model_dir, "model.ckpt-*.index")))


def _variable(model_dir, step, name="item_mat"):
    return tf.train.load_variable(os.path.join(model_dir, f"model.ckpt-{step}"), name)


def test_estimator_trains_and_evaluates_with_the_table_outside_the_graph(table, tmp_path):
    import estimator_item_mat as example
    model_dir = str(tmp_path / "model")
    est = example.estimator(table, None, model_dir, save_checkpoints_steps=10)
    est.train(lambda: example.input_fn(table, None, 64, None), steps=25)
    metrics = est.evaluate(lambda: example.input_fn(table, None, 64, 1), steps=5)
    assert metrics["global_step"] == 25 and np.isfinite(metrics["mse"])

    # The first checkpoint (written as the session started) holds the table bit for bit; the
    # training then moved the rows it looked up.
    steps = _checkpoint_steps(model_dir)
    assert steps[0] == 0 and steps[-1] == 25
    first = _variable(model_dir, 0)
    assert first.dtype == np.float32
    np.testing.assert_array_equal(first.view(np.uint32),
                                  expected_matrix(ROWS, DIM).view(np.uint32))
    assert not np.array_equal(_variable(model_dir, 25), first)

    # Every .meta (train and eval graphs) is small and holds no Const over 64 KB; so is the
    # graph.pbtxt the Estimator writes beside them.
    metas = _meta_files(model_dir)
    assert metas, os.listdir(model_dir)
    for name, (size, largest) in metas.items():
        assert size < 1 << 20, (name, size)
        assert largest <= 64 << 10, (name, largest)
    assert os.path.getsize(os.path.join(model_dir, "graph.pbtxt")) < 1 << 20


def test_the_seed_way_puts_the_table_in_every_meta(table, tmp_path):
    # For contrast, the program embstore replaces: from_tensor_slices and tf.constant.
    arr = embstore.load(table)

    def input_fn():
        ds = tf.data.Dataset.from_tensor_slices(arr).enumerate()
        return ds.map(lambda i, row: ({"item": i}, row)).batch(64)

    def model_fn(features, labels, mode):
        item_mat = tf.compat.v1.get_variable("item_mat", initializer=tf.constant(arr))
        pred = tf.nn.embedding_lookup(item_mat, features["item"])
        loss = tf.reduce_mean(tf.square(pred - labels))
        step = tf.compat.v1.train.get_or_create_global_step()
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train)

    model_dir = str(tmp_path / "seed")
    tf.estimator.Estimator(model_fn, model_dir=model_dir).train(input_fn, steps=2)
    for name, (size, largest) in _meta_files(model_dir).items():
        assert size > 2 * arr.nbytes, (name, size)  # once in the input_fn, once in the model_fn
        assert largest >= arr.nbytes, (name, largest)


def _lookup_model_fn(params):
    """A model_fn whose predictions are the rows of item_mat itself."""
    def model_fn(features, labels, mode):
        item_mat = tf.compat.v1.get_variable("item_mat", [ROWS, DIM],
                                             initializer=tf.compat.v1.zeros_initializer())
        rows = tf.nn.embedding_lookup(item_mat, features["item"])
        kw = {}
        if params["load"] == "scaffold":
            kw["scaffold"] = embstore.tf.scaffold({item_mat: None}, params["table"])
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=rows, **kw)
        loss = tf.reduce_mean(tf.square(rows - labels - 1.0))
        step = tf.compat.v1.train.get_or_create_global_step()
        train = tf.compat.v1.train.GradientDescentOptimizer(1.0).minimize(loss, global_step=step)
        if params["load"] == "hook":
            kw["training_hooks"] = [embstore.tf.init_hook({item_mat: None}, params["table"])]
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train, **kw)
    return model_fn


def _items(table, n):
    ds = embstore.tf.dataset(table, rows=(0, n)).enumerate()
    return ds.map(lambda i, row: ({"item": i}, row)).batch(n)


def test_predict_and_evaluate_without_a_checkpoint_load_the_table(table, tmp_path):
    # No model_dir checkpoint: the session initializes, and the scaffold's init_fn loads the table.
    est = tf.estimator.Estimator(_lookup_model_fn({"load": "scaffold", "table": table}),
                                 model_dir=str(tmp_path / "empty"))
    got = np.stack(list(est.predict(lambda: _items(table, 50), yield_single_examples=True)))
    np.testing.assert_array_equal(got, expected_matrix(ROWS, DIM)[:50])
    # The loss is mean((row - label - 1)^2): exactly 1 when item_mat holds the table.
    assert est.evaluate(lambda: _items(table, 100), steps=1)["loss"] == 1.0


@pytest.mark.parametrize("load", ["scaffold", "hook"])
def test_training_hooks_or_scaffold_fill_the_first_checkpoint(table, tmp_path, load):
    model_dir = str(tmp_path / load)
    est = tf.estimator.Estimator(_lookup_model_fn({"load": load, "table": table}),
                                 model_dir=model_dir)
    est.train(lambda: _items(table, 100).repeat(), steps=3)
    np.testing.assert_array_equal(_variable(model_dir, 0), expected_matrix(ROWS, DIM))
    # The rows the training looked up moved, the others kept the table's values.
    last = _variable(model_dir, 3)
    assert not np.array_equal(last[:100], expected_matrix(ROWS, DIM)[:100])
    np.testing.assert_array_equal(last[100:], expected_matrix(ROWS, DIM)[100:])
    # evaluate restores the trained checkpoint.
    assert est.evaluate(lambda: _items(table, 100), steps=1)["global_step"] == 3


# One Estimator training run in a child process: item_mat (zeros initializer) filled from
# `table` by the scaffold or the training hook, training data streamed from `data`. A hook
# saves item_mat as the session started (start.npy) and, with crash > 0, ends the process with
# os._exit after that many steps: nothing flushed, no final checkpoint. Periodic saving is every
# 1000 steps, so before a clean end only model.ckpt-0 (written at session start) exists.
CHILD = r"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf
import embstore.tf

load, table, data, model_dir, steps, crash, out = sys.argv[1:]
rows, dim = {rows}, {dim}


class Probe(tf.compat.v1.train.SessionRunHook):
    def __init__(self, v):
        self.v, self.n = v, 0

    def after_create_session(self, session, coord):
        np.save(os.path.join(out, "start.npy"), session.run(self.v))

    def after_run(self, run_context, run_values):
        self.n += 1
        if int(crash) and self.n == int(crash):
            os._exit(3)


def model_fn(features, labels, mode):
    v = tf.compat.v1.get_variable("item_mat", [rows, dim],
                                  initializer=tf.compat.v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.nn.embedding_lookup(v, features["item"]) - labels - 1.0))
    step = tf.compat.v1.train.get_or_create_global_step()
    train = tf.compat.v1.train.GradientDescentOptimizer(1.0).minimize(loss, global_step=step)
    hooks = [Probe(v)]
    kw = {{}}
    if load == "scaffold":
        kw["scaffold"] = embstore.tf.scaffold({{v: None}}, table)
    else:
        hooks.append(embstore.tf.init_hook({{v: None}}, table))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train, training_hooks=hooks, **kw)


def input_fn():
    ds = embstore.tf.dataset(data, rows=(0, 200)).enumerate()
    return ds.map(lambda i, row: ({{"item": i}}, row)).batch(50).repeat()


config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=1000,
                                save_checkpoints_secs=None)
tf.estimator.Estimator(model_fn, config=config).train(input_fn, steps=int(steps))
""".format(rows=ROWS, dim=DIM)


@pytest.mark.parametrize("load", ["scaffold", "hook"])
def test_restarts_from_model_dir(make_table_bin, tmp_path, load):
    table = write_table(make_table_bin, tmp_path / "item_mat.emb", ROWS, DIM)
    data = shutil.copy(table, tmp_path / "data.emb")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    model_dir = tmp_path / "model"
    want = expected_matrix(ROWS, DIM)

    def train(steps, crash=0, source=table):
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        proc = subprocess.run([sys.executable, str(script), load, str(source), str(data),
                               str(model_dir), str(steps), str(crash), str(out)],
                              capture_output=True, text=True, timeout=240,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        return proc, np.load(out / "start.npy")

    # A fresh run crashes after 3 steps, long before its next periodic save.
    proc, start = train(10, crash=3)
    assert proc.returncode == 3, proc.stderr[-3000:]
    np.testing.assert_array_equal(start, want)
    assert _checkpoint_steps(str(model_dir)) == [0]
    np.testing.assert_array_equal(_variable(str(model_dir), 0), want)

    # The restart restores model.ckpt-0: the table, never zeros. It trains and saves at the end.
    proc, start = train(5)
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_array_equal(start, want)
    assert _checkpoint_steps(str(model_dir))[-1] == 5
    trained = _variable(str(model_dir), 5)
    assert not np.array_equal(trained[:200], want[:200])

    # A later restart keeps the trained values and never opens the table: it is gone now.
    os.remove(table)
    proc, start = train(1, source=tmp_path / "gone.emb")
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_array_equal(start, trained)
