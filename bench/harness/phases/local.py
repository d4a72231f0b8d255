"""Phase local: the seed table loaded from a local file, page cache warm, each contender in a
fresh process, best of 3 (harness.contenders.local_load): embstore.load (copy, and the
zero-copy view) against np.load (full read, and mmap_mode='r' with and without a full read),
safetensors load_file/safe_open, runai-model-streamer and fastsafetensors."""
from harness.contenders.local_load import CASES
from harness.data import warm
from harness.processes import run_json_child
from harness.timing import log


def run(ctx):
    import numpy as np
    import embstore
    from safetensors.numpy import save_file
    matrix = embstore.load(ctx.seed_table)
    files = {"table": ctx.seed_table, "npy": ctx.work / "seed.npy",
             "safetensors": ctx.work / "seed.safetensors"}
    np.save(files["npy"], matrix)
    save_file({"embedding": matrix}, str(files["safetensors"]))
    nbytes = matrix.nbytes
    del matrix
    for path in files.values():
        warm(path)
    res = {"bytes": nbytes, "contenders": {}}
    for which, kind in CASES:
        log(f"  {which}")
        res["contenders"][which] = run_json_child("local-load", which, files[kind], 3)
    files["npy"].unlink()
    files["safetensors"].unlink()
    return res
