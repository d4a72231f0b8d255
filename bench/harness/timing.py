"""Timing and repetition. Child processes import this module, so it imports nothing heavy."""
import time


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def best_of(repeats, timed, check=None, release=None):
    """The shortest wall time, in seconds, of `repeats` calls of timed().

    Outside the timed part, check(result) looks at each result; then the result is dropped, so
    one call's memory never adds to the next one's peak, and release() closes what it lived in.
    """
    best = 1e9
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = timed()
        best = min(best, time.perf_counter() - t0)
        if check is not None:
            check(result)
        del result
        if release is not None:
            release()
    return best
