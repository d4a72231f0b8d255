#!/usr/bin/env python3
"""The seed's Estimator program at full scale, the old way and with embstore (TensorFlow 2.15).

Runs examples/estimator_item_mat.py's model (item_mat variable + projection) with the real
tf.estimator in two ways, each in its own process so peak RSS is its own:

- constant: the seed's way, `tf.data.Dataset.from_tensor_slices(item_mat)` in the input_fn and
  `tf.constant(item_mat)` as the variable's initializer;
- embstore: `embstore.tf.dataset(...)` in the input_fn and `EstimatorSpec(scaffold=
  embstore.tf.scaffold(...))` in the model_fn.

For the seed table (938,280 x 128 float32) it reports training time, the .meta files' size and
their largest Const, graph.pbtxt, peak RSS, and whether model.ckpt-0's item_mat equals the table
bit for bit. Then it streams a 2.15 GB table (4,200,000 x 128) through the input_fn of a model
without the big variable, side by side: from_tensor_slices fails to build its graph ("Cannot
create a tensor proto whose content is larger than 2GB"), embstore.tf.dataset trains a full
epoch over every row.

Tables go to a temporary directory on /dev/shm when it has room (2.6 GB); model_dirs to one on
disk (the seed's way writes about 8 GB there: a 3.3 GB graph.pbtxt, the same graph in the
TensorBoard events file, and the .meta).
Needs .venv-tf215 (scripts/setup.sh), which has tf.estimator:

    .venv-tf215/bin/python bench/estimator_bench.py            # seed table, then the 2.15 GB one
    .venv-tf215/bin/python bench/estimator_bench.py --quick    # small tables, a smoke test
"""
import argparse
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from harness.data import find_build_dir, make_test_table, work_dir  # noqa: E402
BATCH = 1024


def _largest_const(graph_def):
    nodes = list(graph_def.node)
    for f in graph_def.library.function:
        nodes.extend(f.node_def)
    return max([n.attr["value"].tensor.ByteSize() for n in nodes if n.op == "Const"] or [0])


def _meta_report(model_dir):
    from tensorflow.core.protobuf import meta_graph_pb2
    sizes, consts = [], []
    for name in os.listdir(model_dir):
        if name.endswith(".meta"):
            path = os.path.join(model_dir, name)
            meta = meta_graph_pb2.MetaGraphDef()
            with open(path, "rb") as f:
                meta.ParseFromString(f.read())
            sizes.append(os.path.getsize(path))
            consts.append(_largest_const(meta.graph_def))
    pbtxt = os.path.join(model_dir, "graph.pbtxt")
    return {"meta_files": len(sizes), "largest_meta_bytes": max(sizes or [0]),
            "largest_const_bytes": max(consts or [0]),
            "graph_pbtxt_bytes": os.path.getsize(pbtxt) if os.path.exists(pbtxt) else 0}


def run_case(way, model, table, rows, dim, steps, model_dir):
    """Child process. model "item_mat": the example's model; "stream": a dense layer on the
    streamed rows, no variable of the table's size."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    import embstore
    import embstore.tf
    sys.path.insert(0, str(ROOT / "examples"))
    import estimator_item_mat as example
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)

    out = {"mode": way, "model": model, "rows": rows, "dim": dim, "table_bytes": rows * dim * 4}
    t0 = time.perf_counter()
    arr = embstore.load(table) if way == "constant" else None  # the fastest loadtxt stand-in

    def input_fn():
        if way == "constant":
            ds = tf.data.Dataset.from_tensor_slices(arr).enumerate()
            ds = ds.map(lambda i, row: ({"item": i}, row)).batch(BATCH)
        else:
            ds = example.input_fn(table, None, BATCH, 1)
        return ds

    def model_fn(features, labels, mode, params):
        if model == "item_mat" and way == "embstore":
            return example.model_fn(features, labels, mode, params)
        if model == "item_mat":  # the seed's variable: the table as a Const initializer
            item_mat = tf.compat.v1.get_variable("item_mat", initializer=tf.constant(arr))
            vectors = tf.nn.embedding_lookup(item_mat, features["item"])
        else:
            vectors = labels
        pred = tf.keras.layers.Dense(dim, name="projection")(vectors)
        loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
        train = tf.compat.v1.train.AdagradOptimizer(0.05).minimize(
            loss, global_step=tf.compat.v1.train.get_or_create_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train)

    config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_secs=None,
                                    save_checkpoints_steps=10**9, keep_checkpoint_max=2,
                                    log_step_count_steps=None)
    est = tf.estimator.Estimator(model_fn, config=config,
                                 params={"source": table, "table": None, "rows": rows, "dim": dim})
    try:
        t1 = time.perf_counter()
        est.train(input_fn, steps=steps)
        out["train_seconds"] = time.perf_counter() - t1
        out["ok"] = True
        out["global_step"] = int(est.get_variable_value("global_step"))
        out["rows_trained"] = out["global_step"] * BATCH if steps else rows
        out.update(_meta_report(model_dir))
        if model == "item_mat":
            first = tf.train.load_variable(os.path.join(model_dir, "model.ckpt-0"), "item_mat")
            want = arr if arr is not None else embstore.load(table)
            out["ckpt0_equals_table"] = bool(first.dtype == want.dtype and np.array_equal(
                first.view(np.uint32), want.view(np.uint32)))
    except Exception as e:  # from_tensor_slices past 2 GB
        out["ok"] = False
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


def measure(mode, model, table, rows, dim, steps, workdir):
    model_dir = tempfile.mkdtemp(prefix=f"{mode}-{model}-", dir=workdir)
    p = subprocess.run([sys.executable, __file__, "--child", mode, model, str(table), str(rows),
                        str(dim), str(steps), model_dir], capture_output=True, text=True)
    shutil.rmtree(model_dir, ignore_errors=True)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if not lines:
        err = (p.stderr.strip().splitlines() or [f"crashed (exit {p.returncode})"])[-1]
        return {"mode": mode, "model": model, "rows": rows, "dim": dim, "ok": False, "error": err}
    return json.loads(lines[-1])


def report(results):
    mb = 2 ** 20
    print(f"{'case':<36}{'ok':>4}{'train s':>9}{'rows/s':>10}{'.meta':>10}{'Const':>10}"
          f"{'pbtxt':>10}{'peak RSS':>10}  ckpt-0 = table")
    for r in results:
        name = f"{r['mode']} {r['model']} {r['rows']}x{r['dim']}"
        if not r.get("ok"):
            print(f"{name:<36}{'no':>4}  {r.get('error', '')}")
            continue
        rate = r["rows_trained"] / r["train_seconds"]
        print(f"{name:<36}{'yes':>4}{r['train_seconds']:>9.1f}{rate:>10.0f}"
              f"{r['largest_meta_bytes'] / mb:>8.2f}MB{r['largest_const_bytes'] / mb:>8.2f}MB"
              f"{r['graph_pbtxt_bytes'] / mb:>8.1f}MB{r['peak_rss_bytes'] / 2**30:>8.2f}GB"
              f"  {r.get('ckpt0_equals_table', '')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small tables; a smoke test")
    ap.add_argument("--no-large", action="store_true", help="skip the table over 2 GB")
    ap.add_argument("--seed-steps", type=int, default=50, help="training steps on the seed table")
    ap.add_argument("--work-dir", help="for the tables; default: a temporary directory on "
                    "/dev/shm")
    ap.add_argument("--model-dirs", help="where the model_dirs go (default: the temporary "
                    "directory, on disk)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--build-dir", help="where tests/embstore_make_test_table is "
                    "(default $EMBSTORE_BUILD_DIR, then build/release, build/bench, build/dev)")
    args = ap.parse_args()
    build = find_build_dir(args.build_dir, ["tests/embstore_make_test_table"], "estimator_bench")
    seed_rows, large_rows, dim = (20000, 70000, 128) if args.quick else (938280, 4200000, 128)
    results = []
    with work_dir("estimator-bench-", 3 << 30, args.work_dir) as d, \
            tempfile.TemporaryDirectory(prefix="estimator-bench-", dir=args.model_dirs) as m:
        seed = pathlib.Path(d) / "item_mat.emb"
        make_test_table(build, seed, seed_rows, dim)
        for mode in ("constant", "embstore"):
            results.append(measure(mode, "item_mat", seed, seed_rows, dim, args.seed_steps, m))
        seed.unlink()
        if not args.no_large:
            big = pathlib.Path(d) / "big.emb"
            make_test_table(build, big, large_rows, dim)
            for mode in ("constant", "embstore"):  # steps=None: one epoch over every row
                results.append(measure(mode, "stream", big, large_rows, dim, 0, m))
    report(results)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mode, model, table, rows, dim, steps, model_dir = sys.argv[2:9]
        run_case(mode, model, table, int(rows), int(dim), int(steps) or None, model_dir)
    else:
        main()
