#!/usr/bin/env python3
"""The seed scenario at full scale: a TF1 graph-mode variable filled the old way (tf.constant) and
with embstore, then checkpointed. Reports time, .meta size, largest Const, checkpoint size and
peak RSS for each, and tries a table over 2 GB where the old way cannot build its graph.

Each case runs in its own process so peak RSS is its own.

    .venv/bin/python bench/tf_graph_bench.py                 # 938,280 x 128 and a 2.1 GB table
    .venv/bin/python bench/tf_graph_bench.py --quick         # small sizes, a smoke test
    .venv/bin/python bench/tf_graph_bench.py --no-large      # skip the > 2 GB case
"""
import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from harness.data import find_build_dir, make_test_table  # noqa: E402


def run_case(mode, table, rows, dim, workdir):
    """Child process: build the graph `mode` ("constant" or "embstore"), initialize, checkpoint."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    import embstore
    import embstore.tf

    out = {"mode": mode, "rows": rows, "dim": dim, "table_bytes": rows * dim * 4}
    t0 = time.perf_counter()
    g = tf.Graph()
    try:
        with g.as_default():
            if mode == "constant":
                arr = embstore.load(table)  # the fastest possible loadtxt stand-in
                v = tf.compat.v1.get_variable("item_mat", initializer=tf.constant(arr))
                del arr
            else:
                v = tf.compat.v1.get_variable("item_mat", [rows, dim],
                                              initializer=tf.compat.v1.zeros_initializer())
            saver = tf.compat.v1.train.Saver()
            with tf.compat.v1.Session(graph=g) as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                if mode == "embstore":
                    embstore.tf.initialize(sess, {v: None}, table)
                out["init_seconds"] = time.perf_counter() - t0
                t1 = time.perf_counter()
                prefix = saver.save(sess, os.path.join(workdir, mode, "model"))
                out["save_seconds"] = time.perf_counter() - t1
                first = sess.run(v[0])
        out["ok"] = True
        out["meta_bytes"] = os.path.getsize(prefix + ".meta")
        out["checkpoint_bytes"] = sum(os.path.getsize(os.path.join(workdir, mode, f))
                                      for f in os.listdir(os.path.join(workdir, mode)))
        consts = [len(n.attr["value"].tensor.tensor_content) for n in g.as_graph_def().node
                  if n.op == "Const"]
        out["largest_const_bytes"] = max(consts or [0])
        out["first_row_ok"] = bool(np.array_equal(first, embstore.load(table, rows=(0, 1))[0]))
    except Exception as e:  # the old way past 2 GB: "GraphDef cannot be larger than 2GB"
        out["ok"] = False
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


def measure(mode, table, rows, dim, workdir):
    p = subprocess.run([sys.executable, __file__, "--child", mode, str(table), str(rows), str(dim),
                        workdir], capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"mode": mode, "ok": False, "error": (p.stderr.strip().splitlines() or ["crashed"])[-1]}
    return json.loads(lines[-1])


def report(results):
    print(f"{'case':<28}{'ok':>4}{'seconds':>9}{'.meta':>12}{'largest Const':>15}"
          f"{'checkpoint':>12}{'peak RSS':>11}")
    for r in results:
        name = f"{r['mode']} {r['rows']}x{r['dim']}"
        if not r.get("ok"):
            print(f"{name:<28}{'no':>4}  {r.get('error', '')}")
            continue
        print(f"{name:<28}{'yes':>4}{r['seconds']:>9.2f}{r['meta_bytes'] / 2**20:>10.2f}MB"
              f"{r['largest_const_bytes'] / 2**20:>13.2f}MB{r['checkpoint_bytes'] / 2**20:>10.1f}MB"
              f"{r['peak_rss_bytes'] / 2**30:>9.2f}GB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small tables; a smoke test")
    ap.add_argument("--no-large", action="store_true", help="skip the table over 2 GB")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--build-dir", help="where tests/embstore_make_test_table is "
                    "(default $EMBSTORE_BUILD_DIR, then build/release, build/bench, build/dev)")
    ap.add_argument("--rows", type=int, help="rows of the seed table (default 938280)")
    ap.add_argument("--dim", type=int, default=128, help="dim of the seed table (default 128)")
    args = ap.parse_args()
    build = find_build_dir(args.build_dir, ["tests/embstore_make_test_table"], "tf_graph_bench")
    rows, dim = (20000, 128) if args.quick else (938280, 128)
    rows, dim = args.rows or rows, args.dim
    large_rows = 4200000  # 4.2M x 128 x 4 B = 2.15 GB > 2 GB
    results = []
    with tempfile.TemporaryDirectory(prefix="tf-graph-bench-") as d:
        seed = pathlib.Path(d) / "item_mat.emb"
        make_test_table(build, seed, rows, dim)
        for mode in ("constant", "embstore"):
            results.append(measure(mode, seed, rows, dim, d))
        if not args.quick and not args.no_large:
            big = pathlib.Path(d) / "big.emb"
            make_test_table(build, big, large_rows, dim)
            for mode in ("constant", "embstore"):
                results.append(measure(mode, big, large_rows, dim, d + "/big"))
    report(results)
    old, new = results[0], results[1]
    if old.get("ok") and new.get("ok"):
        print(f"\n.meta: {old['meta_bytes'] / max(1, new['meta_bytes']):.0f}x smaller with embstore; "
              f"init+save time ratio (constant / embstore): {old['seconds'] / new['seconds']:.2f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mode, table, rows, dim, workdir = sys.argv[2:7]
        os.makedirs(workdir, exist_ok=True)
        run_case(mode, table, int(rows), int(dim), workdir)
    else:
        main()
