#!/usr/bin/env python3
"""The benchmark report: embstore against the tools trainers use today, side by side, in one run.

    .venv/bin/python bench/run.py                 # full run, about 5 to 10 minutes on 2 cores
    .venv/bin/python bench/run.py --quick         # small sizes, under a minute: a smoke test

On the same generated data (the seed's 938,280 x 128 float32 matrix, as np.savetxt writes it with
'%.18e', its default, and with '%.8g'; and the word2vec text form) it measures:

  micro        bench/convert_bench (parsing kernels) and bench/store_bench (dtype conversion per
               kernel, Checksum64), bytes/s
  conversion   embstore convert (1 and all threads) vs np.loadtxt(dtype=float32),
               pandas.read_csv(engine='c'), pyarrow.csv.read_csv (best of --repeat rounds,
               default 3), gensim load_word2vec_format
  scaling      embstore convert over rows (10k .. 4M) and threads, with pandas and np.loadtxt
               up to 1M rows; peak RSS of convert, server and client at each size
  local load   embstore.load of a table file (copy, and the zero-copy view) vs np.load (full read,
               and mmap_mode='r' with and without a full read) and safetensors load_file/safe_open
  serving      bench/serve_bench (embstore serve vs iperf3 and a naive copying gRPC server; 1..64
               concurrent clients: aggregate throughput and server RSS), bench/pull_bench (the C++
               client with 1..N streams, local path vs memcpy), the Python client with 1..N
               streams, and Arrow Flight (pyarrow.flight do_get of the same matrix)
  seed         bench/tf_graph_bench.py: tf.constant vs embstore into a TF1 variable, checkpointed
  lookup       bench/lookup_bench.py: 100,000 random keys, verified and not, file and server
  trainer      bench/trainer_bench.py: the seed table into a TF1 variable (embstore from the file
               and from a server vs np.load + feed_dict), a TF2 variable, a torch tensor, a Keras
               Embedding: time and peak RSS above the zero-initialized variable

and writes results.json (with the machine's description and load averages), PNG plots, and the
report docs/benchmarks.md (with --report-dir). Speed is never asserted: the report prints ratios
against the baselines measured in the same run, and says where embstore is behind.

Options: --out-dir (JSON and plots; default build/bench-report), --report-dir (where
benchmarks.md and img/ go; default: none unless --publish, which means docs/), --build-dir
(default $EMBSTORE_BUILD_DIR, build/release, build/bench, build/dev), --work-dir (generated data;
default a temporary dir under /dev/shm when it has room), --skip PHASE (repeatable).
"""
import argparse
import contextlib
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import convert_baselines as cb  # noqa: E402  (shared helpers: measured(), run_baseline())
from harness.report.publish import publish, summarize  # noqa: E402

# Rows of the word2vec-form file gensim and embstore both read (see main()).
GENSIM_ROWS = 100_000

PHASES = ["micro", "conversion", "scaling", "local", "serving", "seed", "lookup", "trainer"]


# ---- helpers ------------------------------------------------------------------------------------

def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def find_build_dir(explicit):
    cands = [explicit] if explicit else []
    if os.environ.get("EMBSTORE_BUILD_DIR"):
        cands.append(os.environ["EMBSTORE_BUILD_DIR"])
    cands += [ROOT / "build" / d for d in ("release", "bench", "dev")]
    need = ["cli/embstore", "bench/embstore_gen_text", "bench/serve_bench", "bench/pull_bench",
            "bench/convert_bench", "bench/store_bench", "tests/embstore_make_test_table"]
    for c in cands:
        c = pathlib.Path(c)
        if all((c / n).exists() for n in need):
            return c
    sys.exit("bench/run.py: no build dir holds " + ", ".join(need) + "; build them first "
             "(see docs/benchmarks.md) or pass --build-dir")


def peak_rss_mib_of(pid):
    """VmHWM of a live process, MiB (0 when it is gone)."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def rss_mib_of(pid):
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


class RssSampler:
    """Samples a process's RSS every 20 ms; .peak is the largest seen (MiB)."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib_of(self.pid))
            time.sleep(0.02)

    def __enter__(self):
        self.peak = rss_mib_of(self.pid)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def run_json_child(code, *args, timeout=600):
    """Runs Python `code` in a child (its own peak RSS); its last stdout line is JSON."""
    _, rss, out = cb.measured([sys.executable, "-c", code] + [str(a) for a in args])
    res = json.loads(out.strip().splitlines()[-1])
    res["peak_rss_mib"] = rss
    return res


@contextlib.contextmanager
def embstore_server(build, store_dir):
    """`embstore serve` on a free loopback port; yields (target, pid)."""
    proc = subprocess.Popen([str(build / "cli" / "embstore"), "serve", "--store", str(store_dir),
                             "--listen", "127.0.0.1:0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    target = None
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            with contextlib.suppress(ValueError):
                j = json.loads(line)
                if j.get("msg") == "listening":
                    target = j["addresses"][0]
                    break
        if target is None:
            raise RuntimeError("embstore serve did not report listening")
        # Keep draining its log so the pipe never fills.
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        yield target, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def machine_description(build):
    import numpy
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "build_dir": str(build),
    }
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    versions = {"numpy": numpy.__version__}
    for mod in ["pandas", "pyarrow", "gensim", "safetensors", "matplotlib"]:
        with contextlib.suppress(Exception):
            versions[mod] = __import__(mod).__version__
    # TF and torch are slow to import; ask their package metadata instead.
    from importlib import metadata
    for dist in ["tensorflow-cpu", "tensorflow", "torch", "grpcio"]:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    with contextlib.suppress(Exception):
        iperf = subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout
        versions["iperf3"] = iperf.split()[1]
    import embstore
    versions["embstore"] = getattr(embstore, "__version__", "unknown")
    info["versions"] = versions
    info["embstore_active_kernel"] = embstore.active_kernel
    with contextlib.suppress(Exception):
        info["git_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short",
                                             "HEAD"], capture_output=True, text=True).stdout.strip()
    return info


# ---- data ---------------------------------------------------------------------------------------

def gen_text(build, path, rows, dim, fmt):
    if not path.exists():
        subprocess.run([str(build / "bench" / "embstore_gen_text"), f"{path}.part", str(rows),
                        str(dim), fmt], check=True)
        os.replace(f"{path}.part", path)
    return path


def word2vec_form(src, dst, rows, dim):
    """The word2vec text form of the first `rows` rows of a matrix text file: a "ROWS DIM" line,
    then "w<i> v1 .. vDIM"."""
    if dst.exists():
        return dst
    with open(src, "rb") as f, open(f"{dst}.part", "wb") as out:
        out.write(f"{rows} {dim}\n".encode())
        for i, line in enumerate(f):
            if i == rows:
                break
            out.write(b"w%d " % i)
            out.write(line)
    os.replace(f"{dst}.part", dst)
    return dst


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


# ---- phases -------------------------------------------------------------------------------------

def phase_micro(ctx):
    res = {}
    min_time = "0.01" if ctx.quick else "0.2"
    for name in ["convert_bench", "store_bench"]:
        out = ctx.out / f"{name}.json"
        subprocess.run([str(ctx.build / "bench" / name), f"--benchmark_out={out}",
                        "--benchmark_out_format=json", f"--benchmark_min_time={min_time}"],
                       check=True, stdout=subprocess.DEVNULL)
        data = json.loads(out.read_text())
        res[name] = {b["name"]: b.get("bytes_per_second", 0.0) for b in data["benchmarks"]}
        out.unlink()
    return res


def convert_once(ctx, text, threads, table):
    secs, rss, _ = cb.measured([ctx.build / "cli" / "embstore", "convert", text, table, "--force",
                                "--threads", threads])
    return {"seconds": secs, "peak_rss_mib": rss}


def phase_conversion(ctx):
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
                    convert_once(ctx, text, t, table))
            for which in ["loadtxt", "pandas", "pyarrow"]:
                log(f"  [{r + 1}/{ctx.repeat}] {cb.BASELINE_LABELS[which]} on {label}")
                secs, rss, shape = cb.run_baseline(which, str(text))
                assert shape == (rows, dim), (which, shape)
                runs.setdefault(("baselines", which), []).append(
                    {"seconds": secs, "peak_rss_mib": rss})
        for (group, name), rs in runs.items():
            row[group][name] = {"seconds": min(x["seconds"] for x in rs),
                                "peak_rss_mib": max(x["peak_rss_mib"] for x in rs),
                                "all_seconds": [x["seconds"] for x in rs]}
        if fmt == "g8":
            # gensim reads the word2vec form of the same values; embstore converts that form too
            # (--format word2vec would be auto-detected), so the pair is measured on one file.
            w2v = ctx.text["w2v"]
            warm(w2v)
            log("  gensim load_word2vec_format and embstore convert on the word2vec form")
            secs, rss, shape = cb.run_baseline("gensim", str(w2v))
            assert shape == (ctx.w2v_rows, dim), shape
            row["word2vec"] = {"bytes": w2v.stat().st_size, "rows": ctx.w2v_rows,
                               "gensim": {"seconds": secs, "peak_rss_mib": rss},
                               "embstore": {str(t): convert_once(ctx, w2v, t, ctx.work / "w2v.emb")
                                            for t in threads}}
            (ctx.work / "w2v.emb").unlink(missing_ok=True)
        compared, diff = cb.check_sample(table, text, min(rows, 20_000))
        row["sample_values_compared"], row["sample_values_differing"] = compared, diff
        if fmt == "e18":
            ctx.seed_table = ctx.store / "seed.emb"
            os.replace(table, ctx.seed_table)
        else:
            table.unlink(missing_ok=True)
        res["formats"].append(row)
    return res


def phase_scaling(ctx):
    """Rows 10k .. 4M (%.8g): convert with 1 and all threads; the client's and server's peak RSS
    loading each table over the wire; pandas and np.loadtxt on the smaller sizes."""
    res = {"format": "%.8g", "points": []}
    sizes = [2_000, 10_000, 20_000] if ctx.quick else [10_000, 100_000, 1_000_000, 4_000_000]
    baseline_max = 20_000 if ctx.quick else 1_000_000
    threads = sorted({1, os.cpu_count() or 1})
    store = ctx.work / "scaling_store"
    store.mkdir(exist_ok=True)
    for n in sizes:
        log(f"  scaling: {n} rows")
        text = gen_text(ctx.build, ctx.work / f"scale_{n}.txt", n, ctx.dim, "g8")
        warm(text)
        p = {"rows": n, "bytes": text.stat().st_size, "embstore": {}, "baselines": {}}
        table = store / f"t{n}.emb"
        for t in threads:
            p["embstore"][str(t)] = convert_once(ctx, text, t, table)
        if n <= baseline_max:
            for which in ["loadtxt", "pandas"]:
                secs, rss, _ = cb.run_baseline(which, str(text))
                p["baselines"][which] = {"seconds": secs, "peak_rss_mib": rss}
        text.unlink()
        p["table_bytes"] = table.stat().st_size
        res["points"].append(p)
    # Client and server memory at each size: one streamed load per table, server RSS sampled.
    with embstore_server(ctx.build, store) as (target, pid):
        for p in res["points"]:
            with RssSampler(pid) as s:
                r = run_json_child(PY_CLIENT_LOAD, target, f"t{p['rows']}", 0, 1)
            p["client"] = {"seconds": r["seconds"], "peak_rss_mib": r["peak_rss_mib"]}
            p["server_peak_rss_mib"] = s.peak
    shutil.rmtree(store)
    return res


LOCAL_LOAD = r"""
import json, sys, time, numpy as np
which, path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
if which.startswith("embstore"):
    import embstore
if which.startswith("safetensors"):
    from safetensors.numpy import load_file
    from safetensors import safe_open
keep = []  # what a contender's result lives in (closed after the measurement)
def once():
    if which == "embstore.load":                 # copy into a new array, checksums verified
        a = embstore.load(path)
    elif which == "embstore.load(verify=False)":
        a = embstore.load(path, verify=False)
    elif which == "embstore.load(copy=False)":   # zero-copy view of the mapping
        a = embstore.load(path, copy=False)
    elif which == "embstore.load(copy=False)+read":
        a = embstore.load(path, copy=False); a = np.array(a)
    elif which == "np.load":
        a = np.load(path)
    elif which == "np.load(mmap_mode='r')":
        a = np.load(path, mmap_mode="r")
    elif which == "np.load(mmap_mode='r')+read":
        a = np.array(np.load(path, mmap_mode="r"))
    elif which == "safetensors.load_file":
        a = load_file(path)["embedding"]
    elif which == "safetensors.safe_open":
        with safe_open(path, framework="numpy") as f:
            a = f.get_tensor("embedding")
    elif which == "runai-model-streamer":         # its tensors live in the streamer's buffer
        from runai_model_streamer import SafetensorsStreamer
        with SafetensorsStreamer() as s:
            s.stream_file(path)
            for name, t in s.get_tensors():
                if name == "embedding":
                    a = t.clone().numpy()
    elif which == "fastsafetensors (cpu)":        # the tensor lives in the loader's buffer
        from fastsafetensors import SafeTensorsFileLoader, SingleGroup
        loader = SafeTensorsFileLoader(SingleGroup(), "cpu", nogds=True)
        loader.add_filenames({0: [path]})
        fb = loader.copy_files_to_device()
        a = fb.get_tensor("embedding").numpy()
        keep.append((fb, loader))
    return a
best = 1e9
for _ in range(repeats):
    t0 = time.perf_counter(); a = once(); best = min(best, time.perf_counter() - t0)
    assert a.shape[1] > 0
    del a
    for fb, loader in keep:
        fb.close(); loader.close()
    keep.clear()
print(json.dumps({"seconds": best}))
"""


def phase_local(ctx):
    import numpy as np
    import embstore
    from safetensors.numpy import save_file
    table = ctx.seed_table
    arr = embstore.load(table)
    npy = ctx.work / "seed.npy"
    st = ctx.work / "seed.safetensors"
    np.save(npy, arr)
    save_file({"embedding": arr}, str(st))
    nbytes = arr.nbytes
    del arr
    for p in (table, npy, st):
        warm(p)
    res = {"bytes": nbytes, "contenders": {}}
    cases = [("embstore.load", table), ("embstore.load(verify=False)", table),
             ("embstore.load(copy=False)", table), ("embstore.load(copy=False)+read", table),
             ("np.load", npy), ("np.load(mmap_mode='r')", npy),
             ("np.load(mmap_mode='r')+read", npy),
             ("safetensors.load_file", st), ("safetensors.safe_open", st),
             # Peers that read the table file itself: it is a safetensors file.
             ("runai-model-streamer", table), ("fastsafetensors (cpu)", table)]
    for which, path in cases:
        log(f"  {which}")
        res["contenders"][which] = run_json_child(LOCAL_LOAD, which, path, 3)
    npy.unlink()
    st.unlink()
    return res


PY_CLIENT_LOAD = r"""
import json, sys, time, embstore
target, table, streams, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
reuse = len(sys.argv) > 5 and sys.argv[5] == "reuse"
src = embstore.Source.resolve(target)
out = None
if reuse:  # one array, filled again each time (out=): no fresh pages, like the C++ bench's buffer
    out = embstore.load(src, table, local=False, streams=streams)
best = 1e9
for _ in range(repeats):
    t0 = time.perf_counter()
    a = embstore.load(src, table, local=False, streams=streams, out=out)
    best = min(best, time.perf_counter() - t0)
    del a
print(json.dumps({"seconds": best}))
"""

FLIGHT_SERVER = r"""
import sys, numpy as np, pyarrow as pa, pyarrow.flight as fl, embstore
path = sys.argv[1]
m = embstore.load(path)
rows, dim = m.shape
# One FixedSizeList<float32>[dim] column: each batch is one contiguous buffer of rows, the layout
# embstore streams. 8192 rows (4 MiB at dim 128) per batch, about embstore's chunk size.
flat = pa.array(m.reshape(-1))
col = pa.FixedSizeListArray.from_arrays(flat, dim)
table = pa.Table.from_arrays([col], names=["embedding"]).combine_chunks()
batches = table.to_batches(max_chunksize=8192)
class Server(fl.FlightServerBase):
    def do_get(self, context, ticket):
        return fl.GeneratorStream(table.schema, iter(batches))
s = Server("grpc://127.0.0.1:0")
print(s.port, flush=True)
s.serve()
"""

FLIGHT_CLIENT = r"""
import json, sys, time, numpy as np, pyarrow.flight as fl
port, repeats, dim = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = fl.connect(f"grpc://127.0.0.1:{port}")
best = 1e9
for _ in range(repeats):
    t0 = time.perf_counter()
    t = c.do_get(fl.Ticket(b"seed")).read_all()
    # One contiguous (rows, dim) float32 array, as embstore.load returns.
    a = t.column(0).combine_chunks().values.to_numpy(zero_copy_only=False).reshape(-1, dim)
    best = min(best, time.perf_counter() - t0)
    del a, t
print(json.dumps({"seconds": best}))
"""


def phase_serving(ctx):
    res = {}
    quick = ctx.quick
    clients = "1,4" if quick else "1,4,16,64"
    sj = ctx.out / "serve_bench.json"
    log(f"  serve_bench (iperf3, embstore serve, naive server; clients {clients})")
    cmd = [ctx.build / "bench" / "serve_bench", "--rows", ctx.rows, "--dim", ctx.dim,
           "--repeats", 1 if quick else 3, "--seconds", 1 if quick else 2, "--clients", clients,
           "--json", sj]
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)
    res["serve_bench"] = json.loads(sj.read_text())
    sj.unlink()
    pj = ctx.out / "pull_bench.json"
    streams = "1,2" if quick else "1,2,4,8"
    log(f"  pull_bench (C++ client, streams {streams}; local path vs memcpy)")
    cmd = [ctx.build / "bench" / "pull_bench", "--rows", ctx.rows, "--dim", ctx.dim, "--streams",
           streams, "--repeats", 1 if quick else 3, "--seconds", 1 if quick else 2, "--json", pj]
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)
    res["pull_bench"] = json.loads(pj.read_text())
    pj.unlink()
    table_bytes = ctx.rows * ctx.dim * 4
    res["bytes"] = table_bytes
    repeats = 1 if quick else 3
    log("  Python client (embstore.load over TCP, 1..N streams)")
    py = []
    with embstore_server(ctx.build, ctx.store) as (target, pid):
        for n in ([1, 2] if quick else [1, 2, 4, 8]):
            r = run_json_child(PY_CLIENT_LOAD, target, "seed", n, repeats)
            reused = run_json_child(PY_CLIENT_LOAD, target, "seed", n, repeats, "reuse")
            py.append({"streams": n, "bytes_per_s": table_bytes / r["seconds"],
                       "reused_out_bytes_per_s": table_bytes / reused["seconds"],
                       "client_peak_rss_mib": r["peak_rss_mib"]})
        # embstore pull into a .npy on the work directory (tmpfs when /dev/shm has room),
        # streamed, against the C++ client's in-memory load above.
        log("  embstore pull --no-local to a .npy in the work directory")
        dest = ctx.work / "pulled.npy"
        best = 1e9
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run([str(ctx.build / "cli" / "embstore"), "pull", "--from", target,
                            "--table", "seed", "--out", str(dest), "--no-local", "--force"],
                           check=True, stdout=subprocess.DEVNULL)
            best = min(best, time.perf_counter() - t0)
            dest.unlink()
        res["pull_to_file"] = {"bytes_per_s": table_bytes / best,
                               "work_dir": str(ctx.work)}
    res["python_client"] = py
    log("  Arrow Flight (pyarrow.flight do_get of the same matrix)")
    srv = subprocess.Popen([sys.executable, "-c", FLIGHT_SERVER, str(ctx.seed_table)],
                           stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline())
        with RssSampler(srv.pid) as s:
            r = run_json_child(FLIGHT_CLIENT, port, repeats, ctx.dim)
        res["arrow_flight"] = {"bytes_per_s": table_bytes / r["seconds"],
                               "client_peak_rss_mib": r["peak_rss_mib"],
                               "server_peak_rss_mib": s.peak}
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    return res


def phase_trainer(ctx):
    import numpy as np
    import embstore
    import trainer_bench
    npy = ctx.work / "seed.npy"
    np.save(npy, embstore.load(ctx.seed_table))
    try:
        with embstore_server(ctx.build, ctx.store) as (target, _):
            return trainer_bench.measure(ctx.seed_table, npy, target, ctx.rows, ctx.dim,
                                         repeats=1 if ctx.quick else 3)
    finally:
        npy.unlink()


def phase_lookup(ctx):
    import lookup_bench
    return lookup_bench.measure(ctx.build, ctx.work, ctx.rows,
                                10_000 if ctx.quick else lookup_bench.DEFAULT_KEYS)


def phase_seed(ctx):
    tj = ctx.out / "tf_graph_bench.json"
    cmd = [sys.executable, str(ROOT / "bench" / "tf_graph_bench.py"), "--json", str(tj),
           "--build-dir", str(ctx.build), "--rows", str(ctx.rows), "--dim", str(ctx.dim)]
    if not ctx.tf_large:
        cmd.append("--no-large")
    log("  tf_graph_bench.py (tf.constant vs embstore, checkpointed)")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    cases = json.loads(tj.read_text())
    tj.unlink()
    return {"cases": cases}


# ---- main ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--quick", action="store_true", help="small sizes; under a minute")
    ap.add_argument("--out-dir", default=str(ROOT / "build" / "bench-report"),
                    help="results.json and plots go here")
    ap.add_argument("--report-dir", help="also write benchmarks.md (+ img/, benchmarks.json) here")
    ap.add_argument("--publish", action="store_true", help="same as --report-dir docs")
    ap.add_argument("--build-dir")
    ap.add_argument("--work-dir", help="generated data (default: a temp dir, /dev/shm if roomy)")
    ap.add_argument("--rows", type=int, help="seed rows (default 938280; --quick 20000)")
    ap.add_argument("--skip", action="append", default=[], choices=PHASES)
    ap.add_argument("--repeat", type=int, help="conversion rounds, best time of each contender "
                    "kept (default 3; --quick 1)")
    ap.add_argument("--report-from", metavar="JSON",
                    help="measure nothing: rewrite the plots and report from a results JSON")
    ap.add_argument("--tf-large", action="store_true",
                    help="also run the seed scenario on a table over 2 GB (adds minutes)")
    args = ap.parse_args()
    if args.publish:
        args.report_dir = str(ROOT / "docs")

    if args.report_from:
        results = json.loads(pathlib.Path(args.report_from).read_text())
        summarize(results)
        return publish(results, pathlib.Path(args.out_dir), args.report_dir, PHASES)

    class Ctx:
        pass
    ctx = Ctx()
    ctx.quick, ctx.tf_large = args.quick, args.tf_large
    ctx.repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    ctx.build = find_build_dir(args.build_dir)
    ctx.rows = args.rows or (20_000 if args.quick else cb.SEED_ROWS)
    ctx.dim = cb.SEED_DIM
    ctx.out = pathlib.Path(args.out_dir)
    ctx.out.mkdir(parents=True, exist_ok=True)
    need = 12e9 if not args.quick else 0.2e9
    base = args.work_dir
    if base is None:
        shm = pathlib.Path("/dev/shm")
        base = str(shm) if shm.is_dir() and shutil.disk_usage(shm).free > need else None
    t_start = time.perf_counter()
    results = {"quick": args.quick, "load_average": {"start": list(os.getloadavg())},
               "machine": machine_description(ctx.build), "errors": {}}
    log(f"embstore benchmark report: {'quick' if args.quick else 'full'} run, build {ctx.build}, "
        f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="embstore-bench-", dir=base) as work:
        ctx.work = pathlib.Path(work)
        ctx.store = ctx.work / "store"
        ctx.store.mkdir()
        log(f"generating data in {work}")
        t0 = time.perf_counter()
        ctx.text = {f: gen_text(ctx.build, ctx.work / f"seed_{f}.txt", ctx.rows, ctx.dim, f)
                    for f in ("e18", "g8")}
        # gensim reads 5-15k rows/s here (one to three minutes for the seed), so it gets the
        # first GENSIM_ROWS rows in word2vec form, and embstore converts that same file.
        ctx.w2v_rows = min(ctx.rows, GENSIM_ROWS)
        ctx.text["w2v"] = word2vec_form(ctx.text["g8"], ctx.work / "seed_w2v.txt", ctx.w2v_rows,
                                        ctx.dim)
        results["data_seconds"] = time.perf_counter() - t0
        ctx.seed_table = None
        for phase in PHASES:
            if phase in args.skip:
                continue
            if phase in ("local", "serving", "seed", "lookup", "trainer") and \
                    ctx.seed_table is None:
                # Phases that read the seed table need it even when conversion was skipped.
                ctx.seed_table = ctx.store / "seed.emb"
                subprocess.run([str(ctx.build / "cli" / "embstore"), "convert",
                                str(ctx.text["e18"]), str(ctx.seed_table), "--force"],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            log(f"phase {phase}")
            t0 = time.perf_counter()
            try:
                results[phase] = globals()[f"phase_{phase}"](ctx)
            except Exception as e:  # one broken contender must not lose the rest of the run
                results["errors"][phase] = f"{type(e).__name__}: {e}"
                log(f"phase {phase} failed: {results['errors'][phase]}")
            results.setdefault("phase_seconds", {})[phase] = time.perf_counter() - t0
            if phase == "conversion" and ctx.seed_table is not None:
                # The text is no longer needed; free the tmpfs for the scaling phase's files.
                for path in ctx.text.values():
                    path.unlink(missing_ok=True)
    results["load_average"]["end"] = list(os.getloadavg())
    results["total_seconds"] = time.perf_counter() - t_start
    summarize(results)
    return publish(results, ctx.out, args.report_dir, PHASES)



if __name__ == "__main__":
    sys.exit(main())
