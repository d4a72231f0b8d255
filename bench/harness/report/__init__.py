"""What a run's results become: the headline ratios and where embstore is behind (ratios), PNG
plots (plots), docs/benchmarks.md (markdown), results.json and the console summary (publish).

Every reader here takes the results dict as bench/run.py writes it; a phase that failed or was
skipped is simply absent, so each reader looks values up with get_nested()."""


def get_nested(data, *path, default=None):
    """data[path[0]][path[1]]..., or `default` where a key or index is missing."""
    for key in path:
        if not isinstance(data, (dict, list)):
            return default
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return default
    return data


def ratio(a, b):
    """a / b, or None when either is missing or zero."""
    return a / b if a and b else None
