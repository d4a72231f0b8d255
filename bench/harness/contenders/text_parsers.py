"""The text parsers trainers use today, each timed inside its own process (interpreter start
and imports excluded) on the same file embstore convert reads."""
import time

# What each parser runs, as reports name it.
BASELINE_LABELS = {
    "loadtxt": "np.loadtxt(dtype=float32)",
    "pandas": "pandas.read_csv(engine='c')",
    "pyarrow": "pyarrow.csv.read_csv (float32)",
    "gensim": "gensim load_word2vec_format",
}


def _pyarrow(path):
    # Multithreaded C++ reader; float32 columns asked for, then one (rows, dim) array as the
    # other contenders produce.
    import numpy as np
    import pyarrow.csv as pacsv
    with open(path, "rb") as f:
        dim = len(f.readline().split())
    names = [f"c{i}" for i in range(dim)]
    table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=names),
                           parse_options=pacsv.ParseOptions(delimiter=" "),
                           convert_options=pacsv.ConvertOptions(
                               column_types={n: "float32" for n in names}))
    matrix = np.empty((table.num_rows, dim), dtype=np.float32)
    for i, column in enumerate(table.columns):
        matrix[:, i] = column.to_numpy()
    return matrix


def parse(path, which):
    """Parses `path` with baseline `which` (a BASELINE_LABELS key); gensim reads the word2vec
    text form ("ROWS DIM" header, then "word v1 ... vDIM"). Returns seconds and the shape."""
    import numpy as np
    if which == "pandas":
        import pandas as pd
    elif which == "pyarrow":
        import pyarrow.csv  # noqa: F401  (imported before the clock starts)
    elif which == "gensim":
        from gensim.models import KeyedVectors
    t0 = time.perf_counter()
    if which == "loadtxt":
        matrix = np.loadtxt(path, dtype=np.float32)
    elif which == "pandas":
        matrix = pd.read_csv(path, engine="c", header=None, sep=" ").to_numpy()
    elif which == "pyarrow":
        matrix = _pyarrow(path)
    else:
        matrix = KeyedVectors.load_word2vec_format(path, binary=False).vectors
    return {"seconds": time.perf_counter() - t0, "rows": matrix.shape[0],
            "dim": matrix.shape[1]}
