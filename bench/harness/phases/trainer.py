"""Phase trainer: the seed table into a TF1 variable (embstore from the file and from a server
against np.load + feed_dict), a TF2 variable, a torch tensor and a Keras Embedding
(harness.contenders.trainer_cases): time and peak RSS above the zero-initialized variable,
each case in a fresh process, best of 3."""
import json
import subprocess

from harness.contenders.trainer_cases import CASES
from harness.processes import child_command, child_env, embstore_server


def measure(table, npy, target, rows, dim, repeats=3):
    """{case: {"seconds": best, "extra_mib": its peak above the zero variable}}."""
    res = {}
    env = child_env(TF_CPP_MIN_LOG_LEVEL="3")
    for case in CASES:
        best = None
        for _ in range(repeats):
            p = subprocess.run(child_command("trainer-case", case, table, npy, target, rows, dim),
                               capture_output=True, text=True, env=env, check=True)
            r = json.loads(p.stdout.strip().splitlines()[-1])
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        res[case] = best
    return res


def run(ctx):
    import numpy as np
    import embstore
    npy = ctx.work / "seed.npy"
    np.save(npy, embstore.load(ctx.seed_table))
    try:
        with embstore_server(ctx.build, ctx.store) as server:
            return measure(ctx.seed_table, npy, server.target, ctx.rows, ctx.dim,
                           repeats=1 if ctx.quick else 3)
    finally:
        npy.unlink()
