"""hdfs:// tables end to end against a real HDFS (a MiniDFSCluster via scripts/hdfs-server.sh: a
NameNode and two DataNodes, replication 2, permissions on), through WebHDFS: convert into HDFS,
inspect/verify/export/pull from it, embstore.load, the torch and TensorFlow (TF1, Keras, eager)
helpers, errors that name the path and the WebHDFS exception, a DataNode that dies before or
during a read, and `serve --store hdfs://... --cache DIR` picking up a replaced table. The cluster comes from `scripts/hdfs-server.sh --build` (test.sh
builds it); without it these tests skip, unless EMBSTORE_REQUIRE_HDFS=1 (test.sh, CI) makes that a
failure."""
import json
import os
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from conftest import (ROOT, check_python_writers_to, check_sync_from, expected_matrix,
                      flip_bits, savetxt_matrix, wait_for_table, wait_for_version, write_table)

sys.path.insert(0, str(ROOT / "bench"))
from harness.hdfs_server import built as hdfs_built, hdfs_server  # noqa: E402


def _require_cluster():
    """Skips the test when the cluster is not built, or fails it under EMBSTORE_REQUIRE_HDFS=1."""
    ok, why = hdfs_built()
    if not ok:
        why = f"HDFS test cluster not built: {why} (bash scripts/hdfs-server.sh --build)"
        if os.environ.get("EMBSTORE_REQUIRE_HDFS") == "1":
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory):
    _require_cluster()
    with hdfs_server(tmp_path_factory.mktemp("hdfsdata") / "data") as cluster:
        yield cluster


@pytest.fixture(scope="module", params=["block-tokens", "sasl"])
def hdfs_kerberos(request, tmp_path_factory):
    """A kerberized cluster: SPNEGO on WebHDFS, a MiniKdc, delegation and block access tokens.
    Its DataNodes take reads straight from embstore with the block tokens the NameNode hands
    out; or ("sasl") they want SASL on their transfer ports, which embstore does not speak, so
    its reads go over WebHDFS."""
    _require_cluster()
    with hdfs_server(tmp_path_factory.mktemp("hdfskrb") / "data", kerberos=True,
                     sasl=request.param == "sasl") as cluster:
        yield cluster


def cli(embstore_bin, args, check=True, **env):
    p = subprocess.run([str(embstore_bin)] + [str(a) for a in args], capture_output=True,
                       text=True, env=dict(os.environ, **env))
    if check and p.returncode != 0:
        raise AssertionError(f"embstore {args} failed ({p.returncode}): {p.stderr}")
    return p


def test_convert_into_hdfs_then_every_reader(embstore_bin, hdfs, tmp_path):
    text, want = savetxt_matrix(tmp_path, 3000, 32, 1)
    url = f"{hdfs.url}/round/m1.emb"
    out = cli(embstore_bin, ["convert", text, url])
    assert url in out.stdout
    again = cli(embstore_bin, ["convert", text, url], check=False)
    assert again.returncode == 1 and "exists; use --force" in again.stderr
    cli(embstore_bin, ["convert", text, url, "--force"])

    info = json.loads(cli(embstore_bin, ["inspect", url, "--json"]).stdout)
    assert (info["rows"], info["dim"], info["file"]) == (3000, 32, url)
    assert cli(embstore_bin, ["verify", url]).stdout.startswith(f"{url}: ok, 3000 rows x 32")
    cli(embstore_bin, ["export", url, tmp_path / "m1.npy"])
    np.testing.assert_array_equal(np.load(tmp_path / "m1.npy"), want)

    # pull: the whole file straight to .emb (verified), and rows of it to .npy; the folder with
    # --table NAME.
    pulled = cli(embstore_bin, ["pull", "--from", f"{hdfs.url}/round/", "--table", "m1",
                                "--out", tmp_path / "p.emb"])
    assert "every block verified" in pulled.stdout
    cli(embstore_bin, ["export", tmp_path / "p.emb", tmp_path / "p.npy"])
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), want)
    cli(embstore_bin, ["pull", "--from", url, "--rows", "100:250", "--out", tmp_path / "r.npy"])
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), want[100:250])
    # No temporary file is left next to the table.
    with urllib.request.urlopen(f"{hdfs.webhdfs}/round?op=LISTSTATUS") as r:
        listing = json.load(r)
    names = [s["pathSuffix"] for s in listing["FileStatuses"]["FileStatus"]]
    assert names == ["m1.emb"]


def test_python_writers_to_hdfs(hdfs, tmp_path, monkeypatch):
    check_python_writers_to(lambda name: f"{hdfs.url}/written/{name}", tmp_path, monkeypatch)


def test_delta_sync_from_hdfs(hdfs, embstore_bin, tmp_path):
    check_sync_from(lambda name: f"{hdfs.url}/sync/{name}", embstore_bin, tmp_path)


def test_python_and_torch_load_only_the_blocks_they_read(embstore_bin, make_table_bin, hdfs,
                                                         tmp_path):
    import embstore
    path = write_table(make_table_bin, tmp_path / "items.emb", 20000, 64, keys=True,
                       block_rows=500)
    want = expected_matrix(20000, 64)
    url = f"{hdfs.url}/py/items.emb"
    hdfs.put(path, "/py/items.emb")  # written by another client
    np.testing.assert_array_equal(embstore.load(url), want)
    np.testing.assert_array_equal(embstore.load(url, rows=(700, 1900)), want[700:1900])
    got = embstore.load(url, keys=["k19999", "k3", "nope"], missing="zeros")
    np.testing.assert_array_equal(got[:2], want[[19999, 3]])
    assert not got[2].any()
    assert embstore.Source.resolve(url).describe()["name"] == "items"
    src = embstore.Source.resolve(url)
    embstore.load(src, rows=(0, 500))
    assert src.describe()["name"] == "items"

    import torch
    import embstore.torch as et
    emb = et.embedding(url, rows=(1000, 3000))
    np.testing.assert_array_equal(emb.weight.detach().numpy(), want[1000:3000])
    t = torch.zeros(20000, 64)
    et.load_into(t, url)
    np.testing.assert_array_equal(t.numpy(), want)

    # A flipped byte in the last block: rows elsewhere load, the whole table fails naming the
    # file and the block.
    info = json.loads(cli(embstore_bin, ["inspect", path, "--json"]).stdout)
    data = bytearray(path.read_bytes())
    data[info["data_offset"] + 19999 * 64 * 4] ^= 0x10
    bad = tmp_path / "bad.emb"
    bad.write_bytes(bytes(data))
    hdfs.put(bad, "/py/bad.emb")
    bad_url = f"{hdfs.url}/py/bad.emb"
    np.testing.assert_array_equal(embstore.load(bad_url, rows=(0, 1000)), want[:1000])
    with pytest.raises(embstore.errors.CorruptionError, match="block 39 "):
        embstore.load(bad_url)
    v = cli(embstore_bin, ["verify", bad_url], check=False)
    assert v.returncode == 1 and f"'{bad_url}': 1 of 40 blocks" in v.stderr
    with pytest.raises(embstore.errors.NotFoundError, match="FileNotFoundException"):
        embstore.load(f"{hdfs.url}/py/missing.emb")


def test_tf1_variable_keras_layer_and_eager_assign_from_hdfs(make_table_bin, hdfs, tmp_path):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = pytest.importorskip("tensorflow")
    import keras

    import embstore.tf
    path = write_table(make_table_bin, tmp_path / "item_mat.emb", 6000, 32, block_rows=256)
    want = expected_matrix(6000, 32)
    hdfs.put(path, "/tf/item_mat.emb")
    url = f"{hdfs.url}/tf/item_mat.emb"
    # TF1 graph mode: the values come at run time, chunk by chunk; the graph stays small.
    graph = tf.Graph()
    with graph.as_default():
        v = tf.compat.v1.get_variable("item_mat", [6000, 32],
                                      initializer=tf.compat.v1.zeros_initializer())
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            embstore.tf.initialize(sess, {v: None}, url, chunk_rows=1000)
            np.testing.assert_array_equal(sess.run(v), want)
        assert graph.as_graph_def().ByteSize() < 64 << 10
    # Keras 3: the layer's initializer reads the rows.
    layer = keras.layers.Embedding(2000, 32,
                                   embeddings_initializer=embstore.tf.Initializer(
                                       url, rows=(1000, 3000)))
    layer.build((None,))
    np.testing.assert_array_equal(np.asarray(layer.embeddings), want[1000:3000])
    # TF2 eager.
    e = tf.Variable(tf.zeros([6000, 32]))
    embstore.tf.assign(e, url)
    np.testing.assert_array_equal(e.numpy(), want)


def test_errors_name_the_path_and_the_exception(embstore_bin, hdfs, tmp_path):
    missing = cli(embstore_bin, ["inspect", f"{hdfs.url}/no/such.emb"], check=False)
    assert missing.returncode == 1
    assert f"{hdfs.url}/no/such.emb" in missing.stderr
    assert "FileNotFoundException" in missing.stderr
    text, _ = savetxt_matrix(tmp_path, 10, 4, 2)
    folder = cli(embstore_bin, ["convert", text, f"{hdfs.url}/dir/"], check=False)
    assert folder.returncode == 2 and "names a folder" in folder.stderr
    denied = cli(embstore_bin, ["convert", text, f"{hdfs.url}/denied/x.emb"], check=False,
                 HADOOP_USER_NAME="embstore-stranger")
    assert denied.returncode == 1
    assert "permission denied" in denied.stderr and "AccessControlException" in denied.stderr
    bad = cli(embstore_bin, ["inspect", "hdfs://127.0.0.1:99999/x.emb"], check=False)
    assert bad.returncode == 2 and "out of range" in bad.stderr
    # Nothing listens there: an error within the retries, naming the address.
    down = cli(embstore_bin, ["inspect", "hdfs://127.0.0.1:1/x.emb"], check=False)
    assert down.returncode == 1 and "hdfs://127.0.0.1:1/x.emb" in down.stderr
    assert "gave up after 6 attempts" in down.stderr
    # The NameNode's RPC port (what fs.defaultFS names) instead of its HTTP port: said so.
    rpc = cli(embstore_bin, ["inspect", f"{hdfs.rpc_url}/x.emb"], check=False)
    assert rpc.returncode == 2 and "RPC port" in rpc.stderr and "9870" in rpc.stderr


def test_a_dead_datanode_is_read_around(embstore_bin, make_table_bin, hdfs, tmp_path):
    path = write_table(make_table_bin, tmp_path / "seed.emb", 100_000, 64, block_rows=1000)
    url = f"{hdfs.url}/replicas/seed.emb"
    hdfs.put(path, "/replicas/seed.emb")
    hdfs.stop_datanode(0)
    try:
        for i in range(3):
            cli(embstore_bin, ["pull", "--from", url, "--out", tmp_path / f"p{i}.emb"])
            assert (tmp_path / f"p{i}.emb").read_bytes() == path.read_bytes()
    finally:
        hdfs.restart_datanode(0)


def test_a_datanode_stopped_mid_pull_is_read_around(embstore_bin, make_table_bin, hdfs,
                                                    tmp_path):
    """The DataNode stops while `pull` is reading (when exactly depends on the machine's speed:
    before, during or after some of its parts). With the other replica alive, the pull completes
    with the exact bytes either way: a read cut off is asked of the NameNode again with the dead
    DataNode excluded."""
    path = write_table(make_table_bin, tmp_path / "big.emb", 400_000, 128, block_rows=2048)
    hdfs.put(path, "/replicas/big.emb")
    want = path.read_bytes()
    for dead in (0, 1):
        out = tmp_path / f"big{dead}.emb"
        pull = subprocess.Popen([str(embstore_bin), "pull", "--from",
                                 f"{hdfs.url}/replicas/big.emb", "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.15)
        hdfs.stop_datanode(dead)
        try:
            _, err = pull.communicate(timeout=300)
        finally:
            hdfs.restart_datanode(dead)
        assert pull.returncode == 0, err
        assert out.read_bytes() == want


def test_a_corrupt_replica_is_read_around_and_two_are_an_error(embstore_bin, make_table_bin,
                                                               hdfs, tmp_path):
    """A byte flipped in one replica's block file on a DataNode's disk: HDFS's own chunk CRCs
    catch it as the bytes arrive, and the other replica is read, straight from the DataNodes and
    over WebHDFS alike. Both replicas bad: an error naming the file, nothing published."""
    path = write_table(make_table_bin, tmp_path / "t.emb", 50_000, 64, block_rows=1000)
    want = path.read_bytes()
    hdfs.put(path, "/corrupt/t.emb")
    url = f"{hdfs.url}/corrupt/t.emb"
    (block, replicas), = hdfs.block_files("/corrupt/t.emb").items()
    assert len(replicas) == 2, replicas

    flip_bits(replicas[0], len(want) // 2)
    for env in ({}, {"EMBSTORE_HDFS_DIRECT_READS": "0"}):
        for i in range(2):  # either replica may come first
            out = tmp_path / f"ok{i}.emb"
            cli(embstore_bin, ["pull", "--from", url, "--out", out, "--force"], **env)
            assert out.read_bytes() == want
    flip_bits(replicas[1], len(want) // 2)
    bad = cli(embstore_bin, ["pull", "--from", url, "--out", tmp_path / "bad.emb"], check=False)
    assert bad.returncode == 1 and url in bad.stderr, bad.stderr
    assert "HDFS checksum mismatch" in bad.stderr, bad.stderr
    assert not (tmp_path / "bad.emb").exists()


def test_serve_from_hdfs_picks_up_a_replaced_table(embstore_bin, hdfs, tmp_path):
    import embstore
    a, want_a = savetxt_matrix(tmp_path, 4000, 16, 3)
    b, want_b = savetxt_matrix(tmp_path, 4000, 16, 4)
    store = f"{hdfs.url}/serving/"
    cli(embstore_bin, ["convert", a, store + "items.emb"])
    cache = tmp_path / "cache"
    # A unix socket of the test's own: a random TCP port may be another process's.
    target = f"unix:{tmp_path / 'serve.sock'}"
    serve = subprocess.Popen([str(embstore_bin), "serve", "--store", store, "--cache", cache,
                              "--listen", target, "--store-poll-s", "0.5",
                              "--poll-interval-ms", "100"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_table(target, "items")
        np.testing.assert_array_equal(embstore.load(target, "items", local=False), want_a)
        cli(embstore_bin, ["convert", b, store + "items.emb", "--force"])
        wait_for_version(target, "items", want_a, want_b, timeout=60)
        assert sorted(p for p in os.listdir(cache) if not p.startswith(".")) == ["items.emb"]
    finally:
        serve.terminate()
        err = serve.communicate(timeout=30)[1]
    assert '"table fetched"' in err


def test_kerberos_spnego_and_delegation_tokens(embstore_bin, hdfs_kerberos, tmp_path,
                                               monkeypatch):
    """Against a kerberized cluster: simple authentication and a missing ticket are refused with
    errors that say what to do; with a ticket (kinit), SPNEGO through libcurl's GSS-API writes
    and reads tables; a principal without rights is refused; a delegation token, fetched with
    that ticket, then works without one, and a bad token is refused."""
    k = hdfs_kerberos.kerberos
    env = {"KRB5_CONFIG": k["krb5_conf"], "KRB5CCNAME": f"FILE:{tmp_path}/ccache"}
    krb = dict(env, EMBSTORE_HDFS_AUTH="kerberos")
    text, want = savetxt_matrix(tmp_path, 4000, 16, 7)
    url = f"{hdfs_kerberos.url}/secure/m.emb"

    simple = cli(embstore_bin, ["convert", text, url], check=False, **env)
    assert simple.returncode == 1 and "wants Kerberos" in simple.stderr, simple.stderr
    no_ticket = cli(embstore_bin, ["inspect", url], check=False, **krb)
    assert no_ticket.returncode == 1 and "refused Kerberos" in no_ticket.stderr, no_ticket.stderr

    def kinit(principal):
        subprocess.run(["kinit", "-kt", k["keytab"], f"{principal}@{k['realm']}"], check=True,
                       env=dict(os.environ, **env))

    kinit(k["user"])
    cli(embstore_bin, ["convert", text, url], **krb)
    assert cli(embstore_bin, ["verify", url], **krb).stdout.startswith(f"{url}: ok, 4000 rows")
    cli(embstore_bin, ["pull", "--from", url, "--rows", "5:105", "--out", tmp_path / "r.npy"],
        **krb)
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), want[5:105])
    import embstore
    for name, value in krb.items():
        monkeypatch.setenv(name, value)
    np.testing.assert_array_equal(embstore.load(url), want)

    # A token for the user, fetched over SPNEGO, as `hdfs fetchdt --webservice` would.
    got = subprocess.run(["curl", "-sf", "--negotiate", "-u", ":",
                          f"{hdfs_kerberos.webhdfs}/?op=GETDELEGATIONTOKEN"],
                         capture_output=True, text=True, check=True, env=dict(os.environ, **env))
    token = json.loads(got.stdout)["Token"]["urlString"]

    kinit("embstore-stranger")
    denied = cli(embstore_bin, ["convert", text, f"{hdfs_kerberos.url}/secure/s.emb"],
                 check=False, **krb)
    assert denied.returncode == 1 and "user=embstore-stranger" in denied.stderr, denied.stderr
    subprocess.run(["kdestroy"], env=dict(os.environ, **env), check=False)

    tok = dict(env, EMBSTORE_HDFS_DELEGATION_TOKEN=token)
    monkeypatch.delenv("EMBSTORE_HDFS_AUTH")
    cli(embstore_bin, ["pull", "--from", url, "--out", tmp_path / "t.emb"], **tok)
    cli(embstore_bin, ["export", tmp_path / "t.emb", tmp_path / "t.npy"])
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), want)
    cli(embstore_bin, ["convert", text, f"{hdfs_kerberos.url}/secure/t.emb"], **tok)
    monkeypatch.setenv("EMBSTORE_HDFS_DELEGATION_TOKEN", token)
    np.testing.assert_array_equal(embstore.load(f"{hdfs_kerberos.url}/secure/t.emb"), want)
    bad = cli(embstore_bin, ["inspect", url], check=False,
              **dict(env, EMBSTORE_HDFS_DELEGATION_TOKEN="AAAA" + token[4:]))
    assert bad.returncode == 1 and "delegation token was refused" in bad.stderr, bad.stderr
