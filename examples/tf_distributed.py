#!/usr/bin/env python3
"""An embedding table under tf.distribute: each task loads only what it holds.

- ParameterServerStrategy (--strategy ps, the default): the embedding is a ShardedVariable whose
  shards live on the ps tasks. `embstore.tf.assign(v, source, table)` on the coordinator makes
  every ps task read its own shard's rows from the source and write them in place; no row passes
  through the coordinator. Each ps task only has to `import embstore.tf` before it serves.
- MultiWorkerMirroredStrategy (--strategy mwms): every worker holds the whole (mirrored)
  variable, and each one loads it with the same `embstore.tf.assign` call, as every line of a
  multi-worker program runs on every worker.

Run each task with its TF_CONFIG, as on a real cluster (here: a coordinator "chief", one
"worker" and two "ps" tasks):

    TF_CONFIG='{"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"],
                "ps": ["host2:2222", "host3:2222"]}, "task": {"type": "ps", "index": 0}}' \\
      python examples/tf_distributed.py --source unix:demo/embstore.sock --table sample

Without TF_CONFIG it starts such a cluster on localhost itself, one process per task:

    python examples/tf_distributed.py --source unix:demo/embstore.sock --table sample
    python examples/tf_distributed.py --source unix:demo/embstore.sock --table sample --strategy mwms
"""
from _common import parse_args  # first: it quiets TensorFlow's start-up logging

import functools
import json
import os
import socket
import subprocess
import sys


def ps_strategy_task(args, resolver):
    import tensorflow as tf
    import embstore
    import embstore.tf  # ps tasks too: it registers the loader they run for their shards

    if resolver.task_type in ("ps", "worker"):
        tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                             task_index=resolver.task_id, protocol="grpc", start=True).join()
        return
    desc = embstore.Source.resolve(args.source).describe(args.table)
    rows, dim = desc["rows"], desc["dim"]
    shards = len(resolver.cluster_spec().as_dict()["ps"])
    strategy = tf.distribute.ParameterServerStrategy(
        resolver, variable_partitioner=tf.distribute.experimental.partitioners
        .FixedShardsPartitioner(shards))
    with strategy.scope():
        # A zeros initializer called per shard: nothing of the table's size on the coordinator.
        embedding = tf.Variable(functools.partial(tf.zeros_initializer(), [rows, dim]),
                                shape=[rows, dim], dtype=tf.float32, name="embedding")
    embstore.tf.assign(embedding, args.source, args.table)

    # The workers read the loaded rows through the ps tasks, as training steps would.
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    ids = tf.constant([0, rows // 2, rows - 1], tf.int64)

    @tf.function
    def step():
        return tf.reduce_sum(tf.nn.embedding_lookup(embedding, ids))

    got = coordinator.schedule(step).fetch()
    want = sum(embstore.load(args.source, args.table, rows=(r, r + 1)).sum()  # a check only
               for r in (0, rows // 2, rows - 1))
    placed = ", ".join(f"rows of {s.device.split('/device')[0]}: {int(s.shape[0])}"
                       for s in embedding.variables)
    print(f"ParameterServerStrategy: {args.table} ({rows} x {dim}) loaded by the ps tasks "
          f"({placed}); a worker's lookup sums to {got:.4f} (table: {want:.4f})")


def mwms_task(args, resolver):
    import tensorflow as tf
    import embstore
    import embstore.tf

    desc = embstore.Source.resolve(args.source).describe(args.table)
    rows, dim = desc["rows"], desc["dim"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        embedding = tf.Variable(tf.zeros([rows, dim]), name="embedding")
    embstore.tf.assign(embedding, args.source, args.table)  # on every worker: each holds it all

    @tf.function
    def step():
        return tf.reduce_sum(tf.identity(embedding))

    total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step), axis=None)
    if resolver.task_id == 0:
        print(f"MultiWorkerMirroredStrategy: {args.table} ({rows} x {dim}) loaded by each of "
              f"{strategy.num_replicas_in_sync} workers; the all-reduced sum is {float(total):.4f}"
              f" ({strategy.num_replicas_in_sync} x the table's)")


def local_cluster(args):
    """Starts every task of a small cluster on localhost, one process each with its TF_CONFIG;
    returns the exit status of the tasks that run the program (ps and PSS workers only serve)."""
    jobs = {"chief": 1, "worker": 1, "ps": 2} if args.strategy == "ps" else {"worker": 2}
    socks = [socket.socket() for _ in range(sum(jobs.values()))]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = iter([s.getsockname()[1] for s in socks])
    cluster = {job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in jobs.items()}
    for s in socks:
        s.close()
    procs = []
    for job, addrs in cluster.items():
        for i in range(len(addrs)):
            env = dict(os.environ, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": job, "index": i}}))
            serves = args.strategy == "ps" and job != "chief"
            procs.append((serves, subprocess.Popen([sys.executable] + sys.argv, env=env)))
    status = 0
    try:
        for serves, p in procs:
            if not serves:
                status = status or p.wait(timeout=600)
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return status


def main():
    args = parse_args(__doc__.splitlines()[0], extra=lambda ap: ap.add_argument(
        "--strategy", choices=["ps", "mwms"], default="ps",
        help="ParameterServerStrategy (ps, default) or MultiWorkerMirroredStrategy (mwms)"))
    if "TF_CONFIG" not in os.environ:
        sys.exit(local_cluster(args))
    import tensorflow as tf
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    (ps_strategy_task if args.strategy == "ps" else mwms_task)(args, resolver)


if __name__ == "__main__":
    main()
