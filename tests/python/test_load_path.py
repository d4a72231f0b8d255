"""The trainer load path end to end: every kind of source (a table file, a store directory, a
server read locally and streamed, a shard manifest) through every entry point (numpy, TF1 graph
mode, TF2 eager, Keras, PyTorch), with progress, cancellation, and a server that restarts in the
middle of a chunked TensorFlow load."""
import json
import os
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

import embstore
from conftest import ServerProcess, expected_matrix, run, wait_for_table, write_table

ROWS, DIM = 4000, 16


@pytest.fixture
def sources(embstore_bin, make_table_bin, tmp_path):
    """{kind: (source, table, extra load kwargs)} of the same table through every kind."""
    store = tmp_path / "store"
    store.mkdir()
    write_table(make_table_bin, store / "t.emb", ROWS, DIM, keys=True, block_rows=128)
    # The same rows split across two servers for the manifest: each shard its own table file.
    shard_store = tmp_path / "shards"
    shard_store.mkdir()
    full = embstore.load(str(store / "t.emb"))
    _write_rows(make_table_bin, tmp_path, shard_store, "t0", full[:1500])
    _write_rows(make_table_bin, tmp_path, shard_store, "t1", full[1500:])
    srv = ServerProcess(embstore_bin, store, tmp_path)
    (tmp_path / "s").mkdir()
    shard_srv = ServerProcess(embstore_bin, shard_store, tmp_path / "s")
    wait_for_table(srv.unix, "t")
    wait_for_table(shard_srv.unix, "t1")
    manifest = tmp_path / "t.shards.json"
    manifest.write_text(json.dumps({
        "format": "embstore-shards/1", "table": "t", "rows": ROWS, "dim": DIM, "dtype": "F32",
        "shards": [{"begin": 0, "end": 1500, "target": shard_srv.tcp, "table": "t0"},
                   {"begin": 1500, "end": ROWS, "target": shard_srv.tcp, "table": "t1"}]}))
    yield {
        "file": (str(store / "t.emb"), None, {}),
        "dir": (str(store), "t", {}),
        "server-local": (srv.unix, "t", {"local": True}),
        "server-streamed": (srv.tcp, "t", {"local": False, "streams": 3}),
        "sharded": (str(manifest), None, {"local": False}),
    }
    srv.stop()
    shard_srv.stop()


def _write_rows(make_table_bin, tmp_path, store, name, rows):
    text = tmp_path / f"{name}.txt"
    np.savetxt(text, rows, fmt="%.9g")
    exe = os.path.join(os.path.dirname(str(make_table_bin)), "..", "cli", "embstore")
    subprocess.run([exe, "convert", str(text), str(store / f"{name}.emb")], check=True,
                   capture_output=True)


KINDS = ["file", "dir", "server-local", "server-streamed", "sharded"]


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_rows_and_progress(sources, kind):
    source, table, kw = sources[kind]
    want = expected_matrix(ROWS, DIM)
    seen = []
    got = embstore.load(source, table, progress=lambda d, t: seen.append((d, t)), **kw)
    np.testing.assert_array_equal(got, want)
    assert seen and seen[-1] == (ROWS * DIM * 4, ROWS * DIM * 4)
    np.testing.assert_array_equal(embstore.load(source, table, rows=(333, 3001), **kw),
                                  want[333:3001])
    half = embstore.load(source, table, dtype="float16", rows=(0, 10), **kw)
    np.testing.assert_array_equal(half, want[:10].astype(np.float16))


@pytest.mark.parametrize("kind", KINDS)
def test_cancelling_from_progress(sources, kind):
    source, table, kw = sources[kind]
    with pytest.raises(embstore.errors.CancelledError):
        embstore.load(source, table, progress=lambda d, t: False, **kw)


@pytest.mark.parametrize("kind", KINDS)
def test_tf1_tf2_and_keras(sources, kind):
    tf = pytest.importorskip("tensorflow")
    import embstore.tf
    source, table, kw = sources[kind]
    want = expected_matrix(ROWS, DIM)
    # TF1 graph mode, in chunks smaller than the table.
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("v", [ROWS, DIM], initializer=tf.zeros_initializer())
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            embstore.tf.initialize(sess, {v: table}, source, chunk_rows=700, **kw)
            np.testing.assert_array_equal(sess.run(v), want)
    # TF2 eager, float16 and float32.
    e = tf.Variable(tf.zeros([ROWS, DIM]))
    embstore.tf.assign(e, source, table, chunk_rows=999, **kw)
    np.testing.assert_array_equal(e.numpy(), want)
    h = tf.Variable(tf.zeros([100, DIM], dtype=tf.float16))
    embstore.tf.assign(h, source, table, rows=(50, 150), **kw)
    np.testing.assert_array_equal(h.numpy(), want[50:150].astype(np.float16))
    # Keras.
    import keras
    layer = keras.layers.Embedding(ROWS, DIM, embeddings_initializer=embstore.tf.Initializer(
        source, table, **kw))
    layer.build((None,))
    np.testing.assert_array_equal(layer.embeddings.numpy(), want)


@pytest.mark.parametrize("kind", KINDS)
def test_torch(sources, kind):
    torch = pytest.importorskip("torch")
    import embstore.torch
    source, table, kw = sources[kind]
    want = expected_matrix(ROWS, DIM)
    emb = embstore.torch.embedding(source, table, **kw)
    np.testing.assert_array_equal(emb.weight.numpy(), want)
    w = torch.zeros(ROWS, 2 * DIM)[:, ::2]  # not contiguous: the chunked staging path
    embstore.torch.load_into(w, source, table, chunk_rows=512, **kw)
    np.testing.assert_array_equal(w.numpy(), want)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("initializer", ["ones", "zeros"])
def test_server_restart_in_the_middle_of_a_tf_load(embstore_bin, make_table_bin, tmp_path,
                                                   initializer):
    # "ones": the variable is written in place, chunk by chunk, and the server goes away and
    # comes back after the first chunk. "zeros": the variable's zero pages are released and it
    # adopts one array holding every row (no chunks); the server goes away as the load starts
    # and the load waits for it to come back.
    tf = pytest.importorskip("tensorflow")
    import embstore.tf
    store = tmp_path / "store"
    store.mkdir()
    rows = 60_000
    write_table(make_table_bin, store / "t.emb", rows, DIM, block_rows=256)
    listen = f"127.0.0.1:{_free_port()}"
    cmd = [str(embstore_bin), "serve", "--store", str(store), "--listen", listen,
           "--log-level", "warn"]
    server = [subprocess.Popen(cmd, stderr=subprocess.DEVNULL)]
    assert run([embstore_bin, "health", "--from", listen, "--wait", "30"]).returncode == 0
    stopped, restarted = threading.Event(), threading.Event()

    def restart():
        server[0].terminate()
        server[0].wait(timeout=15)
        stopped.set()
        time.sleep(0.5)
        server[0] = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        restarted.set()

    chunks = []

    def progress(done, total):
        if initializer == "ones" and done == total and not chunks:
            threading.Thread(target=restart).start()
            restarted.wait(30)
        if initializer == "zeros" and not stopped.is_set():
            threading.Thread(target=restart).start()
            stopped.wait(30)
        if done == total:
            chunks.append(done)
        return True

    try:
        g = tf.Graph()
        with g.as_default():
            init = tf.ones_initializer() if initializer == "ones" else tf.zeros_initializer()
            v = tf.compat.v1.get_variable("v", [rows, DIM], initializer=init)
            with tf.compat.v1.Session(graph=g) as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                embstore.tf.initialize(sess, {v: "t"}, listen, chunk_rows=10_000, local=False,
                                       progress=progress)
                np.testing.assert_array_equal(sess.run(v), expected_matrix(rows, DIM))
        assert restarted.is_set()
        assert len(chunks) == (6 if initializer == "ones" else 1)
    finally:
        restarted.wait(30)
        server[0].terminate()
        server[0].wait(timeout=15)
