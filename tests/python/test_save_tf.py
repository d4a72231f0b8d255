"""embstore.tf.save: a few training steps in TF1 graph mode (partitioned and not), eager and
Keras, then save, load, and the same bits. Runs under TensorFlow 2.21 (Keras 3) and 2.15
(Keras 2)."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import embstore  # noqa: E402
import embstore.tf  # noqa: E402
from embstore import errors  # noqa: E402
from conftest import run  # noqa: E402

ROWS, DIM = 6007, 24


def _train_graph(partitions):
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.set_random_seed(1)
        kwargs = {}
        if partitions:
            kwargs["partitioner"] = tf.compat.v1.fixed_size_partitioner(partitions)
        var = tf.compat.v1.get_variable(
            "emb", shape=[ROWS, DIM], initializer=tf.compat.v1.random_normal_initializer(),
            **kwargs)
        ids = tf.compat.v1.placeholder(tf.int64, [None])
        loss = tf.reduce_sum(tf.nn.embedding_lookup(var, ids) ** 2)
        step = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(loss)
        parts = var._get_variable_list() if partitions else [var]
        whole = tf.concat(parts, 0)
    return g, var, ids, step, whole


@pytest.fixture(params=[True, False], ids=["views", "copied-chunks"])
def zero_copy(request, monkeypatch):
    """Both ways of reading a variable: zero-copy views (a variable on the host) and chunks
    copied out of TensorFlow (what a GPU variable gets)."""
    import embstore.tf._save as tf_save
    monkeypatch.setattr(tf_save, "ZERO_COPY", request.param)
    return request.param


@pytest.mark.parametrize("partitions", [0, 3])
def test_graph_mode_after_training(tmp_path, embstore_bin, partitions, zero_copy):
    g, var, ids, step, whole = _train_graph(partitions)
    with tf.compat.v1.Session(graph=g) as s:
        s.run(tf.compat.v1.global_variables_initializer())
        rng = np.random.default_rng(0)
        for _ in range(5):
            s.run(step, {ids: rng.integers(0, ROWS, 256)})
        want = first = s.run(whole)
        keys = [f"w{i}" for i in range(ROWS)]
        r = embstore.tf.save(s, var, tmp_path / "t.emb", keys=keys, chunk_rows=1000)
        assert r["rows"] == ROWS and r["dim"] == DIM
        embstore.tf.save(s, var, tmp_path / "h.emb", dtype="f16")
        ops_after_save = len(g.get_operations())
        # More training, then a save again (as a loop saving every N steps does): the same slice
        # ops read the new values, and the graph does not grow.
        for _ in range(3):
            s.run(step, {ids: rng.integers(0, ROWS, 256)})
        want = s.run(whole)
        assert not np.array_equal(want, first)
        embstore.tf.save(s, var, tmp_path / "t.emb", keys=keys, force=True)
        # The first save added a few ops (slices, or the one op handing over views); never a
        # constant holding the table.
        added = [op for op in g.get_operations() if op.name.startswith("embstore_save")]
        assert added and not [op.name for op in added
                              if op.type == "Const" and op.outputs[0].shape.num_elements() > 2]
        assert len(g.get_operations()) == ops_after_save
    assert np.array_equal(embstore.load(tmp_path / "t.emb"), want)
    assert np.array_equal(embstore.load(tmp_path / "t.emb", keys=["w6006", "w1"]),
                          want[[6006, 1]])
    assert np.array_equal(embstore.load(tmp_path / "h.emb", dtype="native"),
                          first.astype(np.float16))
    assert run([embstore_bin, "verify", tmp_path / "t.emb"]).returncode == 0


@pytest.mark.parametrize("partitions", [0, 3])
def test_graph_mode_saves_one_snapshot_while_training_goes_on(tmp_path, partitions):
    # A host variable is saved from a zero-copy view taken in one step: training steps run
    # between the chunks (from the progress callback) change the variable, not what is saved.
    g, var, ids, step, whole = _train_graph(partitions)
    with tf.compat.v1.Session(graph=g) as s:
        s.run(tf.compat.v1.global_variables_initializer())
        want = s.run(whole)
        calls = []

        def progress(done, total):
            calls.append(done)
            s.run(step, {ids: np.arange(len(calls) % 7, ROWS, 7)})  # rows of every chunk

        embstore.tf.save(s, var, tmp_path / "t.emb", chunk_rows=1000, progress=progress)
        after = s.run(whole)
    assert len(calls) >= 6 and not np.array_equal(after, want)
    assert np.array_equal(embstore.load(tmp_path / "t.emb"), want)


def test_eager_saves_one_snapshot_while_training_goes_on(tmp_path):
    v = tf.Variable(np.random.default_rng(4).standard_normal((ROWS, DIM)).astype(np.float32))
    want = v.numpy()
    for i, save in enumerate([lambda p, progress: embstore.tf.save(None, v, p, chunk_rows=999,
                                                                   progress=progress),
                              lambda p, progress: embstore.save(v, p, chunk_rows=999,
                                                                progress=progress)]):
        before = v.numpy()
        save(tmp_path / f"{i}.emb", lambda done, total: v.assign_add(tf.ones_like(v)))
        assert not np.array_equal(v.numpy(), before)
        assert np.array_equal(embstore.load(tmp_path / f"{i}.emb"), before)
    assert not np.array_equal(before, want)


def test_graph_mode_in_a_finalized_graph(tmp_path):
    g, var, ids, step, whole = _train_graph(2)
    with tf.compat.v1.Session(graph=g) as s:
        s.run(tf.compat.v1.global_variables_initializer())
        s.run(step, {ids: [1, 2, 3]})
        want = s.run(whole)
        g.finalize()
        embstore.tf.save(s, var, tmp_path / "t.emb", chunk_rows=700)
    assert np.array_equal(embstore.load(tmp_path / "t.emb"), want)


def test_eager_and_sharded_variables(tmp_path, zero_copy):
    v = tf.Variable(np.random.default_rng(2).standard_normal((ROWS, DIM)).astype(np.float32))
    opt = tf.keras.optimizers.SGD(0.5)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(v, [3, 9, 6000]) ** 2)
    opt.apply_gradients([(tape.gradient(loss, v), v)])
    embstore.tf.save(None, v, tmp_path / "v.emb", chunk_rows=999)
    assert np.array_equal(embstore.load(tmp_path / "v.emb"), v.numpy())
    embstore.save(v, tmp_path / "v2.emb", dtype="bf16")
    assert np.array_equal(embstore.load(tmp_path / "v2.emb", dtype="native").view(np.uint16),
                          tf.cast(v, tf.bfloat16).numpy().view(np.uint16))
    b = tf.Variable(tf.cast(v, tf.bfloat16))
    embstore.tf.save(None, b, tmp_path / "b.emb")
    assert np.array_equal(embstore.load(tmp_path / "b.emb", dtype="native").view(np.uint16),
                          b.numpy().view(np.uint16))
    # A ShardedVariable (ParameterServerStrategy's partitioned variables).
    from tensorflow.python.distribute.sharded_variable import ShardedVariable
    full = v.numpy()
    cuts = [0, 2000, 4100, ROWS]
    sharded = ShardedVariable([tf.Variable(full[a:b], name=f"part_{i}")
                               for i, (a, b) in enumerate(zip(cuts, cuts[1:]))])
    embstore.tf.save(None, sharded, tmp_path / "s.emb", chunk_rows=1500)
    assert np.array_equal(embstore.load(tmp_path / "s.emb"), full)
    with pytest.raises(errors.InvalidArgumentError, match="graph mode"):
        with tf.Graph().as_default():
            embstore.tf.save(None, tf.compat.v1.Variable(np.zeros((2, 2), np.float32)),
                             tmp_path / "x.emb")
    with pytest.raises(errors.InvalidArgumentError, match="2-D matrix"):
        embstore.tf.save(None, tf.Variable(np.zeros(3, np.float32)), tmp_path / "x.emb")
    with pytest.raises(errors.InvalidArgumentError, match="dtype int32"):
        embstore.tf.save(None, tf.Variable(np.zeros((3, 2), np.int32)), tmp_path / "x.emb")
    assert not (tmp_path / "x.emb").exists()


def test_keras_embedding_weights(tmp_path):
    keras = tf.keras
    model = keras.Sequential([keras.Input(shape=(4,), dtype="int32"),
                              keras.layers.Embedding(ROWS, DIM, name="emb"),
                              keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(3)
    model.fit(rng.integers(0, ROWS, (256, 4)), rng.standard_normal((256, 1)), epochs=2,
              verbose=0)
    weight = model.get_layer("emb").embeddings
    embstore.tf.save(None, weight, tmp_path / "k.emb")
    embstore.save(weight, tmp_path / "k2.emb")
    want = model.get_layer("emb").get_weights()[0]
    assert np.array_equal(embstore.load(tmp_path / "k.emb"), want)
    assert np.array_equal(embstore.load(tmp_path / "k2.emb"), want)
    # Back into a fresh model through the loader, bit for bit.
    again = keras.Sequential([keras.Input(shape=(4,), dtype="int32"),
                              keras.layers.Embedding(
                                  ROWS, DIM, name="emb",
                                  embeddings_initializer=embstore.tf.Initializer(
                                      str(tmp_path / "k.emb")))])
    assert np.array_equal(again.get_layer("emb").get_weights()[0], want)
