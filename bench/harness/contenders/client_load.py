"""The Python client: embstore.load(local=False) of a whole table from a server."""
from harness.timing import best_of


def best_load_time(target, table, streams, repeats, reuse=""):
    """The best of `repeats` loads of `table` from server `target` over `streams` streams.

    With reuse="reuse", every load fills the same array (out=): no fresh pages, as the C++
    bench loads into its buffer. Without, each load returns a new array."""
    import embstore
    streams = int(streams)
    src = embstore.Source.resolve(target)
    src.describe(table, False)  # connects and describes, untimed, as the C++ bench does
    out = None
    if reuse == "reuse":
        out = embstore.load(src, table, local=False, streams=streams)
    seconds = best_of(int(repeats),
                      lambda: embstore.load(src, table, local=False, streams=streams, out=out))
    return {"seconds": seconds}
