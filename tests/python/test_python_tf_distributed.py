"""embstore.tf under tf.distribute with a real multi-process cluster on localhost (TF_CONFIG).

Each task is its own process, as in a real job. The table is named by a relative path, and each
process runs in a directory of its own, so where a row comes from shows who read it:

- ParameterServerStrategy: the coordinator's directory has no table at all, and each ps task's
  copy holds the right values only in the rows of the shard it holds (the others are -999). The
  variable comes out exact only if every ps task read its own rows, and nothing else. A last ps
  task does not import embstore.tf, and the error for a variable it holds says so.
- MultiWorkerMirroredStrategy: each worker holds the whole variable and loads it from its own
  copy of the table; an all-reduce across the workers then sees the same values everywhere.
"""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from conftest import expected_matrix, run  # noqa: E402

ROWS, DIM = 300, 8
SHARDS = 2

CHILD = r"""
import functools, json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf

kind, out = sys.argv[1:]
rows, dim, shards = {rows}, {dim}, {shards}
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
role, index = resolver.task_type, resolver.task_id
if not (role == "ps" and index == shards):  # the last ps task forgets to
    import embstore.tf  # in every task: it registers the loader ps tasks run for their shards


def report(**kw):
    with open(os.path.join(out, f"{{role}}{{index}}.json"), "w") as f:
        json.dump(kw, f)


if kind == "ps":
    if role in ("ps", "worker"):
        tf.distribute.Server(resolver.cluster_spec(), job_name=role, task_index=index,
                             protocol="grpc", start=True).join()
    strategy = tf.distribute.ParameterServerStrategy(
        resolver, variable_partitioner=tf.distribute.experimental.partitioners
        .FixedShardsPartitioner(shards))
    with strategy.scope():
        v = tf.Variable(functools.partial(tf.zeros_initializer(), [rows, dim], tf.float32),
                        shape=[rows, dim], dtype=tf.float32, name="item_mat")
    assert not os.path.exists("table.emb")  # this process cannot read the table
    embstore.tf.assign(v, "table.emb", rows=slice(None, rows), chunk_rows=40)
    errors = {{}}
    try:
        embstore.tf.assign(v, "missing.emb")
    except embstore.EmbstoreError as e:
        errors["missing"] = [type(e).__name__, str(e)]
    with strategy.scope():  # round robin: its first shard goes to the last ps task
        w = tf.Variable(tf.zeros([4, dim]), name="small")
    try:
        embstore.tf.assign(w, "table.emb", rows=(0, 4))
    except embstore.EmbstoreError as e:
        errors["no_import"] = [type(e).__name__, str(e), w.variables[0].device]
    np.save(os.path.join(out, "value.npy"), tf.concat([s.read_value() for s in v.variables], 0))
    report(devices=[s.device for s in v.variables], shard_rows=[int(s.shape[0]) for s in v.variables],
           errors=errors)
else:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        v = tf.Variable(functools.partial(tf.zeros_initializer(), [rows, dim], tf.float32),
                        shape=[rows, dim], dtype=tf.float32, name="item_mat")
    embstore.tf.assign(v, "table.emb", chunk_rows=40)
    total = strategy.reduce(tf.distribute.ReduceOp.SUM,
                            strategy.run(lambda: tf.reduce_sum(tf.identity(v))), axis=None)
    np.save(os.path.join(out, f"value{{index}}.npy"), v.numpy())
    report(type=type(v).__name__, total=float(total), workers=strategy.num_replicas_in_sync)
""".format(rows=ROWS, dim=DIM, shards=SHARDS)


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _write_table(embstore_bin, path, values):
    text = path.with_suffix(".txt")
    np.savetxt(text, values, fmt="%.2f")
    out = run([embstore_bin, "convert", text, path, "--force"])
    assert out.returncode == 0, out.stderr


def _cluster(tmp_path, kind, jobs, cwd_of, timeout=120):
    """Starts one process per task of `jobs` ({job: count}); returns when every chief/worker
    that runs the program has exited, then stops the servers. Returns the tasks' reports."""
    ports = iter(_free_ports(sum(jobs.values())))
    cluster = {job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in jobs.items()}
    script = tmp_path / "task.py"
    script.write_text(CHILD)
    out = tmp_path / "out"
    out.mkdir()
    procs = {}
    try:
        for job, addrs in cluster.items():
            for i in range(len(addrs)):
                env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(
                    {"cluster": cluster, "task": {"type": job, "index": i}}))
                log = open(tmp_path / f"{job}{i}.log", "wb")
                procs[(job, i)] = subprocess.Popen(
                    [sys.executable, str(script), kind, str(out)], cwd=cwd_of(job, i), env=env,
                    stdout=log, stderr=subprocess.STDOUT)
        programs = [(job, i) for job, i in procs if kind == "mwms" or job == "chief"]
        for task in programs:
            try:
                code = procs[task].wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                code = "timeout"
            log = (tmp_path / f"{task[0]}{task[1]}.log").read_text(errors="replace")
            assert code == 0, f"{task} exited {code}:\n{log[-4000:]}"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def test_parameter_server_tasks_load_the_shards_they_hold(embstore_bin, tmp_path):
    want = expected_matrix(ROWS, DIM)
    shard = ROWS // SHARDS
    for i in range(SHARDS):
        d = tmp_path / f"ps{i}"
        d.mkdir()
        values = np.full_like(want, -999.0)
        values[i * shard:(i + 1) * shard] = want[i * shard:(i + 1) * shard]
        _write_table(embstore_bin, d / "table.emb", values)
    (tmp_path / "empty").mkdir()

    def cwd_of(job, i):
        return tmp_path / (f"ps{i}" if job == "ps" else "empty")

    (tmp_path / f"ps{SHARDS}").mkdir()  # a last ps task, which does not import embstore.tf
    out = _cluster(tmp_path, "ps", {"chief": 1, "worker": 1, "ps": SHARDS + 1}, cwd_of)
    report = json.loads((out / "chief0.json").read_text())
    assert report["shard_rows"] == [shard] * SHARDS
    assert [d.split("/device")[0] for d in report["devices"]] == [
        f"/job:ps/replica:0/task:{i}" for i in range(SHARDS)]
    np.testing.assert_array_equal(np.load(out / "value.npy"), want)

    # A ps task's error reaches the coordinator as embstore's own, naming the file and the task.
    name, message = report["errors"]["missing"]
    assert name == "NotFoundError"
    assert "missing.emb" in message and "/job:ps/replica:0/task:0" in message

    # A task that holds a variable but never imported embstore.tf cannot run the loader: the
    # error says so, instead of TensorFlow's "Could not find callback".
    name, message, device = report["errors"]["no_import"]
    assert device.startswith(f"/job:ps/replica:0/task:{SHARDS}/")
    assert name == "FailedPreconditionError"
    assert "has not imported embstore.tf" in message, message


def test_multi_worker_mirrored_workers_each_load_their_copy(embstore_bin, tmp_path):
    want = expected_matrix(ROWS, DIM)
    for i in range(2):
        d = tmp_path / f"worker{i}"
        d.mkdir()
        _write_table(embstore_bin, d / "table.emb", want)

    out = _cluster(tmp_path, "mwms", {"worker": 2}, lambda job, i: tmp_path / f"{job}{i}")
    for i in range(2):
        report = json.loads((out / f"worker{i}.json").read_text())
        assert report["type"] == "MirroredVariable" and report["workers"] == 2
        assert report["total"] == pytest.approx(2 * float(want.sum()))
        np.testing.assert_array_equal(np.load(out / f"value{i}.npy"), want)
