"""Loading a whole table from a local file into a numpy array: embstore.load against np.load of
the same matrix as .npy, safetensors of it as .safetensors, and the peers that read the table
file itself (it is a safetensors file): runai-model-streamer and fastsafetensors."""
from harness.timing import best_of

# Every contender, in the report's order, and the file it reads: "table" (the .emb file), "npy"
# or "safetensors" (the same matrix written by np.save and safetensors' save_file).
CASES = [("embstore.load", "table"), ("embstore.load(verify=False)", "table"),
         ("embstore.load(copy=False)", "table"),
         ("embstore.load(copy=False, verify=False)", "table"),
         ("embstore.load(copy=False)+read", "table"),
         ("np.load", "npy"), ("np.load(mmap_mode='r')", "npy"),
         ("np.load(mmap_mode='r')+read", "npy"),
         ("safetensors.load_file", "safetensors"), ("safetensors.safe_open", "safetensors"),
         # Peers that read the table file itself: it is a safetensors file.
         ("runai-model-streamer", "table"), ("fastsafetensors (cpu)", "table")]


def _loader(which, path, keep):
    """A function that loads `path` the way `which` does; what its result lives in (a buffer to
    close after the measurement) goes into `keep`."""
    import numpy as np
    if which.startswith("embstore"):
        import embstore
    if which.startswith("safetensors"):
        from safetensors import safe_open
        from safetensors.numpy import load_file

    def runai():  # its tensors live in the streamer's buffer
        from runai_model_streamer import SafetensorsStreamer
        with SafetensorsStreamer() as streamer:
            streamer.stream_file(path)
            for name, tensor in streamer.get_tensors():
                if name == "embedding":
                    matrix = tensor.clone().numpy()
        return matrix

    def fastsafetensors():  # the tensor lives in the loader's buffer
        from fastsafetensors import SafeTensorsFileLoader, SingleGroup
        loader = SafeTensorsFileLoader(SingleGroup(), "cpu", nogds=True)
        loader.add_filenames({0: [path]})
        buffers = loader.copy_files_to_device()
        keep.append((buffers, loader))
        return buffers.get_tensor("embedding").numpy()

    def safe_open_tensor():
        with safe_open(path, framework="numpy") as f:
            return f.get_tensor("embedding")

    return {
        # A copy into a new array, checksums verified.
        "embstore.load": lambda: embstore.load(path),
        "embstore.load(verify=False)": lambda: embstore.load(path, verify=False),
        # A zero-copy view of the mapping: its blocks verified first, or not.
        "embstore.load(copy=False)": lambda: embstore.load(path, copy=False),
        "embstore.load(copy=False, verify=False)":
            lambda: embstore.load(path, copy=False, verify=False),
        "embstore.load(copy=False)+read": lambda: np.array(embstore.load(path, copy=False)),
        "np.load": lambda: np.load(path),
        "np.load(mmap_mode='r')": lambda: np.load(path, mmap_mode="r"),
        "np.load(mmap_mode='r')+read": lambda: np.array(np.load(path, mmap_mode="r")),
        "safetensors.load_file": lambda: load_file(path)["embedding"],
        "safetensors.safe_open": safe_open_tensor,
        "runai-model-streamer": runai,
        "fastsafetensors (cpu)": fastsafetensors,
    }[which]


def best_load_time(which, path, repeats):
    """The best of `repeats` loads of `path` by contender `which`."""
    keep = []
    load = _loader(which, path, keep)

    def check(matrix):
        assert matrix.shape[1] > 0

    def release():
        for buffers, loader in keep:
            buffers.close()
            loader.close()
        keep.clear()

    return {"seconds": best_of(int(repeats), load, check=check, release=release)}
