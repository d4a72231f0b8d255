"""Phase writers: the seed matrix written from a trainer's memory (numpy, torch, a TF1 variable)
to a local file on a disk (the report directory's: a real disk, where fsync costs what it
costs, not the tmpfs the work directory may be), embstore's writers against np.save, side by side,
each case in a fresh process, round-robin, best of 3 rounds (1 with --quick); and the peak memory
each adds above the matrix (harness.contenders.writers)."""
import os

from harness.contenders.writers import CASES
from harness.processes import run_json_child
from harness.timing import log


def run(ctx):
    folder = ctx.out / "writers-tmp"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "written.emb"
    repeats = 1 if ctx.quick else 3
    res = {"rows": ctx.rows, "dim": ctx.dim, "cases": {}}
    # Round after round, every case once a round: a slow spell of the machine (or of its
    # memory, see harness.contenders.writers) lands on all of them alike.
    for r in range(repeats):
        for case in CASES:
            log(f"  [{r + 1}/{repeats}] {case}")
            path = out.with_suffix(".npy") if "np.save" in case else out
            got = run_json_child("writer", case, path, ctx.rows, ctx.dim)
            path.unlink(missing_ok=True)
            best = res["cases"].get(case)
            if best is None or got["seconds"] < best["seconds"]:
                res["cases"][case] = got
    res["disk"] = os.path.realpath(folder)
    folder.rmdir()
    return res
