"""Bringing a copy of the seed table up to a new version, each case in a fresh process:

- `embstore pull --update` of a .emb copy of the old version (the rows that changed fetched by
  row hashes, every block of the result checked, a new file written and renamed over the copy),
  against a full `embstore pull` of the new version;
- `embstore pull --update --spare` of the same copy with its spare beside it, as a sync before
  left it: the version before the old one (1% of its rows different again), patched in place and
  swapped in (docs/CLIENT.md, "Spares");
- `embstore.update(copy, source)` of a numpy array holding the old version, against a full
  `embstore.load(source, out=array)` into the same kind of array.

The copy is made before the timed part; the in-memory cases time only the call."""
import json
import os
import re
import shutil
import subprocess
import time

CASES = ["embstore pull (full)", "embstore pull --update", "embstore pull --update --spare",
         "embstore.load (full, out=)", "embstore.update (in memory)"]


def spare_of(path):
    """Where `embstore pull --update --spare` keeps the spare of `path` (client::SparePath)."""
    head, name = os.path.split(str(path))
    return os.path.join(head, f".{name}.spare")


def _pull(embstore_bin, location, table, out, update, spare):
    cmd = [embstore_bin, "pull", "--from", location, "--out", out, "--no-local"]
    if table:
        cmd += ["--table", table]
    if update:
        cmd.append("--update")
        if spare:
            cmd.append("--spare")
    else:
        cmd.append("--force")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    return r.stdout + r.stderr


def run_case(case, embstore_bin, location, table, old_copy, out, previous=None):
    """`previous`: the version before `old_copy`, the spare of the --spare case."""
    table = table or None
    if case.startswith("embstore pull"):
        update = "--update" in case
        spare = case.endswith("--spare")
        if os.path.exists(spare_of(out)):
            os.unlink(spare_of(out))
        if update:
            shutil.copyfile(old_copy, out)
        if spare:
            shutil.copyfile(previous, spare_of(out))
        t0 = time.perf_counter()
        text = _pull(embstore_bin, location, table, out, update, spare)
        seconds = time.perf_counter() - t0
        res = {"case": case, "seconds": seconds}
        m = re.search(r"([0-9]+) of ([0-9]+) rows changed .* ([0-9.]+) MB moved", text)
        if spare and "the spare was patched in place" not in text:
            raise RuntimeError(f"pull --update --spare did not use the spare: {text[-2000:]}")
        if update:
            if not m:
                raise RuntimeError(f"pull --update did not report a delta: {text[-2000:]}")
            res.update(changed_rows=int(m.group(1)), moved_bytes=float(m.group(3)) * 1e6)
            d = re.search(r"([0-9]+) of them from its delta object", text)
            res["delta_rows"] = int(d.group(1)) if d else 0
        return res
    import numpy as np
    import embstore
    copy = embstore.load(old_copy)  # the old version, in this process's memory
    if case == "embstore.load (full, out=)":
        t0 = time.perf_counter()
        embstore.load(location, table, out=copy, local=False)
        return {"case": case, "seconds": time.perf_counter() - t0}
    t0 = time.perf_counter()
    s = embstore.update(copy, location, table, local=False)
    seconds = time.perf_counter() - t0
    if s.get("needs_full"):
        raise RuntimeError(f"embstore.update fell back to a full fetch: {s['full_reason']}")
    return {"case": case, "seconds": seconds, "changed_rows": s["changed_rows"],
            "moved_bytes": s["moved_bytes"], "table_bytes": s["table_bytes"],
            "refetched_blocks": s["refetched_blocks"], "delta_rows": s["delta_rows"]}
