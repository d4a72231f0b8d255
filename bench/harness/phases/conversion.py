"""Phase conversion: embstore convert (1 and all threads) against np.loadtxt, pandas.read_csv
and pyarrow.csv on the seed matrix as text ('%.18e' and '%.8g'), and against gensim on its
word2vec form; best of --repeat rounds. The '%.18e' table becomes the seed table later phases
read.

Per kernel (EMBSTORE_FORCE_KERNEL), `embstore convert --threads 1` of each format: the end-to-end
bytes per second of one parsing thread, which the report sets against the kernel alone (phase
micro's ParseChunk) to show what the pipeline around the kernel costs.

run_baseline(), convert_once() and check_sample() are shared with the scaling phase and
bench/convert_baselines.py."""
import json
import os
import struct

from harness.contenders.text_parsers import BASELINE_LABELS
from harness.data import warm
from harness.processes import measured, measured_cpu, run_json_child
from harness.timing import log


def run_baseline(which, path):
    """Parses text file `path` with baseline `which` in a child process; returns (seconds, its
    peak RSS in MiB, (rows, dim)). Seconds are the parse alone, measured inside the child."""
    r = run_json_child("parse-text", path, which)
    return r["seconds"], r["peak_rss_mib"], (r["rows"], r["dim"])


def convert_once(build, text, threads, table):
    """`embstore convert` of `text` into `table`: the whole process's time and peak RSS."""
    secs, rss, _ = measured([build / "cli" / "embstore", "convert", text, table, "--force",
                             "--threads", threads])
    return {"seconds": secs, "peak_rss_mib": rss}


# The parse kernels in the order of their levels; a machine runs the prefix up to its active one.
KERNEL_LEVELS = {"x86_64": ["scalar", "avx2", "avx512"], "aarch64": ["scalar", "neon"]}


def kernels_here():
    """The parse kernels this machine can run, lowest level first."""
    import platform
    import embstore
    levels = KERNEL_LEVELS.get(platform.machine(), ["scalar"])
    active = embstore.active_kernel
    return levels[:levels.index(active) + 1] if active in levels else ["scalar"]


def _per_kernel(ctx):
    """`embstore convert --threads 1` of each format with each kernel forced: best wall and CPU
    seconds of --repeat rounds, rounds interleaved across kernels."""
    out = ctx.work / "kernel.emb"
    res = {}
    for fmt, label in [("e18", "%.18e"), ("g8", "%.8g")]:
        text = ctx.text[fmt]
        warm(text)
        runs = {}
        for r in range(ctx.repeat):
            for k in kernels_here():
                log(f"  [{r + 1}/{ctx.repeat}] embstore convert {label} --threads 1, {k} kernel")
                # Into a new file each time: replacing the last round's table would add the
                # kernel's freeing of its pages (about 0.03 s on tmpfs) to what is measured.
                out.unlink(missing_ok=True)
                wall, rss, _, cpu = measured_cpu(
                    [ctx.build / "cli" / "embstore", "convert", text, out, "--force",
                     "--threads", "1"], env=dict(os.environ, EMBSTORE_FORCE_KERNEL=k))
                runs.setdefault(k, []).append((wall, cpu))
        res[label] = {"bytes": text.stat().st_size,
                      "kernels": {k: {"seconds": min(w for w, _ in v),
                                      "cpu_seconds": min(c for _, c in v)}
                                  for k, v in runs.items()}}
    out.unlink(missing_ok=True)
    return res


def read_matrix_rows(table_path, rows):
    """First `rows` rows of a table's f32 matrix, memory-mapped (docs/FORMAT.md: an 8-byte
    header length, the JSON header, the data buffer). Keeps this process small: a child's peak
    RSS as the kernel reports it starts from its parent's size at fork."""
    import numpy as np
    with open(table_path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    emb = header["embedding"]
    assert emb["dtype"] == "F32", emb
    begin = 8 + n + emb["data_offsets"][0]
    dim = emb["shape"][1]
    m = np.memmap(table_path, dtype="<f4", mode="r", offset=begin, shape=(rows, dim))
    return np.array(m)


def check_sample(table_path, text_path, rows):
    """Compares the first `rows` rows with np.loadtxt; returns (compared, differing values)."""
    import numpy as np
    ours = read_matrix_rows(table_path, rows)
    ref = np.loadtxt(text_path, dtype=np.float32, max_rows=rows)
    diff = int(np.count_nonzero(ours.view(np.uint32) != ref.view(np.uint32)))
    return ours.size, diff


def _word2vec(ctx, threads):
    # gensim reads the word2vec form of the same values; embstore converts that form too
    # (--format word2vec would be auto-detected), so the pair is measured on one file.
    w2v = ctx.text["w2v"]
    warm(w2v)
    log("  gensim load_word2vec_format and embstore convert on the word2vec form")
    secs, rss, shape = run_baseline("gensim", str(w2v))
    assert shape == (ctx.w2v_rows, ctx.dim), shape
    res = {"bytes": w2v.stat().st_size, "rows": ctx.w2v_rows,
           "gensim": {"seconds": secs, "peak_rss_mib": rss},
           "embstore": {str(t): convert_once(ctx.build, w2v, t, ctx.work / "w2v.emb")
                        for t in threads}}
    (ctx.work / "w2v.emb").unlink(missing_ok=True)
    return res


def run(ctx):
    rows, dim = ctx.rows, ctx.dim
    res = {"rows": rows, "dim": dim, "formats": []}
    threads = sorted({1, os.cpu_count() or 1})
    for fmt, label in [("e18", "%.18e"), ("g8", "%.8g")]:
        text = ctx.text[fmt]
        warm(text)
        size = text.stat().st_size
        row = {"format": label, "bytes": size, "embstore": {}, "baselines": {},
               "rounds": ctx.repeat}
        table = ctx.work / f"conv_{fmt}.emb"
        # Every contender once per round, rounds back to back; each keeps its best time (and
        # its largest peak RSS), so a burst of other work on the shared machine hits one round
        # of one contender rather than the ratio.
        runs = {}
        for r in range(ctx.repeat):
            for t in threads:
                log(f"  [{r + 1}/{ctx.repeat}] embstore convert {label} --threads {t}")
                runs.setdefault(("embstore", str(t)), []).append(
                    convert_once(ctx.build, text, t, table))
            for which in ["loadtxt", "pandas", "pyarrow"]:
                log(f"  [{r + 1}/{ctx.repeat}] {BASELINE_LABELS[which]} on {label}")
                secs, rss, shape = run_baseline(which, str(text))
                assert shape == (rows, dim), (which, shape)
                runs.setdefault(("baselines", which), []).append(
                    {"seconds": secs, "peak_rss_mib": rss})
        for (group, name), rounds in runs.items():
            row[group][name] = {"seconds": min(x["seconds"] for x in rounds),
                                "peak_rss_mib": max(x["peak_rss_mib"] for x in rounds),
                                "all_seconds": [x["seconds"] for x in rounds]}
        if fmt == "g8":
            row["word2vec"] = _word2vec(ctx, threads)
        compared, diff = check_sample(table, text, min(rows, 20_000))
        row["sample_values_compared"], row["sample_values_differing"] = compared, diff
        if fmt == "e18":
            ctx.seed_table = ctx.store / "seed.emb"
            os.replace(table, ctx.seed_table)
        else:
            table.unlink(missing_ok=True)
        res["formats"].append(row)
    res["per_kernel"] = _per_kernel(ctx)
    return res
