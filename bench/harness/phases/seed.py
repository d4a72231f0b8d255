"""Phase seed: bench/tf_graph_bench.py, the seed scenario. A TF1 variable filled the old way
(tf.constant) and with embstore, then checkpointed; with --tf-large also a table over 2 GB."""
import json
import os
import subprocess
import sys

from harness.data import ROOT
from harness.timing import log


def run(ctx):
    path = ctx.out / "tf_graph_bench.json"
    cmd = [sys.executable, str(ROOT / "bench" / "tf_graph_bench.py"), "--json", str(path),
           "--build-dir", str(ctx.build), "--rows", str(ctx.rows), "--dim", str(ctx.dim)]
    if not ctx.tf_large:
        cmd.append("--no-large")
    log("  tf_graph_bench.py (tf.constant vs embstore, checkpointed)")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    cases = json.loads(path.read_text())
    path.unlink()
    return {"cases": cases}
