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
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import convert_baselines as cb  # noqa: E402  (shared helpers: measured(), run_baseline())

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


# ---- report -------------------------------------------------------------------------------------

def g(d, *path, default=None):
    for p in path:
        if not isinstance(d, (dict, list)):
            return default
        try:
            d = d[p]
        except (KeyError, IndexError, TypeError):
            return default
    return d


def ratio(a, b):
    return a / b if a and b else None


CEILING = "a ceiling: 1.0 at best"
CHECK_COST = "1.0 = the check costs nothing"


def derive(results):
    """The headline ratios, as (area, description, value, note) rows; >1 means embstore is ahead."""
    rows = []
    conv = g(results, "conversion", "formats", default=[])
    for f in conv:
        best = min(v["seconds"] for v in f["embstore"].values())
        t1 = f["embstore"]["1"]["seconds"]
        for which, label in cb.BASELINE_LABELS.items():
            b = g(f, "baselines", which, "seconds")
            if b:
                rows.append(("conversion", f"`{f['format']}`: {label} time / embstore convert "
                             "(all threads)", b / best, "target >= 10"))
        rows.append(("conversion", f"`{f['format']}`: embstore, 1 thread, GB/s per core",
                     f["bytes"] / t1 / 1e9, "target >= 1.0 (absolute, machine-dependent)"))
        tall = g(f, "embstore", str(max(int(k) for k in f["embstore"])), "seconds")
        if len(f["embstore"]) > 1:
            rows.append(("conversion", f"`{f['format']}`: embstore scaling, 1 thread -> "
                         f"{max(int(k) for k in f['embstore'])} threads", t1 / tall,
                         "ideal = thread count"))
        w = f.get("word2vec")
        if w:
            wb = min(v["seconds"] for v in w["embstore"].values())
            rows.append(("conversion", f"word2vec text form ({w['rows']:,} rows): gensim "
                         "load_word2vec_format / embstore convert", w["gensim"]["seconds"] / wb,
                         "target >= 10"))
    loc = g(results, "local", "contenders", default={})
    if loc:
        e = g(loc, "embstore.load", "seconds")
        for other in ["np.load", "np.load(mmap_mode='r')+read", "safetensors.load_file",
                      "safetensors.safe_open"]:
            if g(loc, other, "seconds"):
                rows.append(("local load", f"full read: {other} / embstore.load (verified)",
                             loc[other]["seconds"] / e, ""))
        ev = g(loc, "embstore.load(verify=False)", "seconds")
        if ev and g(loc, "np.load", "seconds"):
            rows.append(("local load", "full read: np.load / embstore.load(verify=False)",
                         loc["np.load"]["seconds"] / ev, ""))
        z = g(loc, "embstore.load(copy=False)", "seconds")
        m = g(loc, "np.load(mmap_mode='r')", "seconds")
        if z and m:
            rows.append(("local load", "zero-copy open: np.load(mmap_mode='r') / "
                         "embstore.load(copy=False)", m / z, ""))
    sv = results.get("serving")
    if sv:
        sb, pb = sv["serve_bench"], sv["pull_bench"]
        rows.append(("serving", "embstore serve, 1 client / iperf3 single stream (median of "
                     "rounds)", sb["ratio_serve_iperf3_median"], "target >= 0.70"))
        rows.append(("serving", "embstore serve / naive copying gRPC server, 1 client (median)",
                     sb["ratio_serve_naive_median"], ""))
        best_cpp = max(s["bytes_per_s"] for s in pb["streamed"])
        rows.append(("serving", "C++ client, best of 1..N streams / iperf3",
                     ratio(best_cpp, pb["iperf3_bytes_per_s"]), CEILING))
        best_py = max(s["bytes_per_s"] for s in sv["python_client"])
        rows.append(("serving", "Python client (embstore.load, best of 1..N streams) / iperf3",
                     ratio(best_py, pb["iperf3_bytes_per_s"]), CEILING))
        af = g(sv, "arrow_flight", "bytes_per_s")
        if af:
            rows.append(("serving", "Python client (best streams) / Arrow Flight do_get",
                         best_py / af, ""))
            py1 = sv["python_client"][0]["bytes_per_s"]
            rows.append(("serving", "Python client, 1 stream / Arrow Flight do_get (1 stream)",
                         py1 / af, ""))
        rows.append(("serving", "local path (verified) / memcpy from the page cache",
                     ratio(pb["local_verified_bytes_per_s"], pb["memcpy_bytes_per_s"]), CEILING))
        for c in sb["concurrent"]:
            rows.append(("serving", f"{c['clients']} concurrent clients: aggregate serve / naive",
                         ratio(c["serve"]["aggregate_bytes_per_s"],
                               c["naive"]["aggregate_bytes_per_s"]), ""))
    if loc:
        e = g(loc, "embstore.load", "seconds")
        for peer in ["runai-model-streamer", "fastsafetensors (cpu)"]:
            if g(loc, peer, "seconds"):
                rows.append(("local load", f"full read of the table file: {peer} / embstore.load "
                             "(verified)", loc[peer]["seconds"] / e, ""))
        if g(loc, "np.load", "peak_rss_mib") and g(loc, "embstore.load", "peak_rss_mib"):
            rows.append(("local load", "peak RSS: np.load / embstore.load (verified)",
                         loc["np.load"]["peak_rss_mib"] / loc["embstore.load"]["peak_rss_mib"],
                         "target >= 0.91 (ratio; embstore <= 1.1x np.load)"))
            rows.append(("local load", "full read: np.load / embstore.load (verified)",
                         loc["np.load"]["seconds"] / e, "target >= 1.00 (ratio)"))
    if sv:
        cpp = {s_["streams"]: s_["bytes_per_s"] for s_ in sv["pull_bench"]["streamed"]}
        for p in sv["python_client"]:
            if p["streams"] in cpp and p.get("reused_out_bytes_per_s"):
                # Both into memory already in use, as the C++ bench loads.
                rows.append(("load path", f"Python embstore.load(out=) over TCP / C++ client, "
                             f"{p['streams']} stream(s)",
                             p["reused_out_bytes_per_s"] / cpp[p["streams"]],
                             "target >= 0.90 (ratio)"))
            if p["streams"] in cpp:
                rows.append(("load path", f"Python embstore.load (a new array) over TCP / C++ "
                             f"client, {p['streams']} stream(s)",
                             p["bytes_per_s"] / cpp[p["streams"]], ""))
        pf = g(sv, "pull_to_file", "bytes_per_s")
        if pf:
            rows.append(("load path", "embstore pull to a .npy on tmpfs / C++ client in memory "
                         "(best streams)", pf / max(cpp.values()), "target >= 0.80 (ratio)"))
    tr = results.get("trainer") or {}
    wa = g(tr, "tf1 workaround", "seconds")
    for case, target in [("tf1 embstore (local table)", 0.35),
                         ("tf1 embstore (server, local=False)", 0.6)]:
        if wa and g(tr, case, "seconds"):
            rows.append(("load path", f"seed into a TF1 variable: np.load + feed_dict workaround "
                         f"time / {case}", wa / tr[case]["seconds"],
                         f"target >= {1 / target:.2f} (ratio; embstore <= {target}x the time)"))
    seed = g(results, "seed", "cases", default=[])
    if len(seed) >= 2 and seed[0].get("ok") and seed[1].get("ok"):
        old, new = seed[0], seed[1]
        rows.append(("seed", ".meta size: tf.constant / embstore",
                     old["meta_bytes"] / max(1, new["meta_bytes"]), ""))
        rows.append(("seed", "graph + init + save time: tf.constant / embstore",
                     old["seconds"] / new["seconds"], ""))
        rows.append(("seed", "peak RSS: tf.constant / embstore",
                     old["peak_rss_bytes"] / new["peak_rss_bytes"], ""))
        e18 = next((f for f in conv if f["format"] == "%.18e"), None)
        if e18 and g(e18, "baselines", "loadtxt", "seconds"):
            t_old = e18["baselines"]["loadtxt"]["seconds"] + old["seconds"]
            t_new = min(v["seconds"] for v in e18["embstore"].values()) + new["seconds"]
            rows.append(("seed", "text -> variable -> checkpoint: (np.loadtxt + tf.constant) / "
                         "(embstore convert + embstore.tf)", t_old / t_new,
                         "sum of the measured steps"))
    micro = results.get("micro") or {}
    parse = micro.get("convert_bench", {})
    for fmt in ["%.18e", "%.8g"]:
        scalar = parse.get(f"ParseChunk/scalar/{fmt}/f32")
        simd = {k.split("/")[1]: v for k, v in parse.items()
                if k.endswith(f"/{fmt}/f32") and "/scalar/" not in k}
        if scalar and simd:
            k = max(simd, key=simd.get)
            rows.append(("micro", f"parse `{fmt}` to f32: {k} kernel / scalar kernel",
                         simd[k] / scalar, "SIMD speed-up, one thread"))
    dt = micro.get("store_bench", {})
    for op in ["f16_to_f32", "f32_to_f16", "bf16_to_f32", "f32_to_bf16"]:
        scalar = dt.get(f"DType/{op}/scalar")
        simd = {k.rsplit("/", 1)[1]: v for k, v in dt.items()
                if k.startswith(f"DType/{op}/") and not k.endswith("/scalar")}
        if scalar and simd:
            k = max(simd, key=simd.get)
            rows.append(("micro", f"{op}: {k} kernel / scalar kernel", simd[k] / scalar,
                         "SIMD speed-up, one thread"))
    for t, op in [("F16", "f32_to_f16"), ("BF16", "f32_to_bf16")]:
        checked = dt.get(f"DType/ConvertFromF32_checked/{t}/active")
        kernel = g(results, "machine", "embstore_active_kernel")
        active = dt.get(f"DType/{op}/{kernel}")
        if checked and active:
            rows.append(("micro", f"f32 -> {t} with the overflow check (ConvertFromF32, kError) "
                         "/ the bare active kernel", checked / active, CHECK_COST))
    return rows


def behind(results, ratios):
    """Plain sentences on where embstore is behind, from the measured ratios."""
    out = []
    for area, desc, val, note in ratios:
        if val is None:
            continue
        m = re.search(r"target >= ([0-9.]+) \(ratio", note)
        if m:
            if val < float(m.group(1)):
                out.append(f"{desc}: {val:.2f}, short of the {m.group(1)} target.")
        elif "target >= 10" in note and val < 10:
            out.append(f"{desc}: {val:.1f}x, short of the 10x target.")
        elif "target >= 1.0" in note and val < 1.0:
            out.append(f"{desc}: {val:.2f} GB/s, short of the 1 GB/s per core target.")
        elif "target >= 0.70" in note and val < 0.70:
            out.append(f"{desc}: {val:.2f}, short of the 0.70 target.")
        elif note == CHECK_COST and val < 0.5:
            out.append(f"{desc}: {val:.2f}. The overflow scan runs before the SIMD kernel, one "
                       "value at a time; `embstore convert --dtype f16|bf16` checks by default "
                       "(ConvertOptions::on_overflow = kError), so its encode step runs at this "
                       "speed.")
        elif note == CEILING and val < 0.70:
            out.append(f"{desc}: {val:.2f}, under 0.70 of its ceiling.")
        elif "ideal" in note and val < 1.6:
            out.append(f"{desc}: {val:.2f}x, well short of linear.")
        elif not note and val < 1.0:
            out.append(f"{desc}: {val:.2f} (below 1: the other tool is faster or smaller).")
    for c in g(results, "serving", "serve_bench", "concurrent", default=[]):
        growth = c["serve"]["anon_growth_kib"] / 1024
        if growth > 64:
            out.append(f"{c['clients']} concurrent clients: server anonymous memory grew "
                       f"{growth:.0f} MiB, over the 64 MiB target.")
    for f in g(results, "conversion", "formats", default=[]):
        rss = max(v["peak_rss_mib"] for v in f["embstore"].values())
        if rss > 256:
            out.append(f"`{f['format']}`: embstore convert peak RSS {rss:.0f} MiB, over 256 MiB.")
    return out


def plots(results, img):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    img.mkdir(parents=True, exist_ok=True)
    made = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(img / name, dpi=80)
        plt.close(fig)
        made.append(name)

    conv = g(results, "conversion", "formats", default=[])
    if conv:
        fig, ax = plt.subplots(figsize=(8, 3.6))
        width = 0.8 / len(conv)
        per_format = []
        for f in conv:
            bars = {f"embstore {t}T": f["bytes"] / v["seconds"] / 1e6
                    for t, v in f["embstore"].items()}
            for k, label in cb.BASELINE_LABELS.items():
                if g(f, "baselines", k):
                    bars[label.split("(")[0].split(" ")[0]] = f["bytes"] / f["baselines"][k][
                        "seconds"] / 1e6
            if f.get("word2vec"):
                w = f["word2vec"]
                for t, v in w["embstore"].items():
                    bars[f"embstore {t}T (w2v form)"] = w["bytes"] / v["seconds"] / 1e6
                bars["gensim (w2v form)"] = w["bytes"] / w["gensim"]["seconds"] / 1e6
            per_format.append(bars)
        names = list(dict.fromkeys(k for bars in per_format for k in bars))
        for i, (f, bars) in enumerate(zip(conv, per_format)):
            xs = [j + i * width for j in range(len(names))]
            ax.bar(xs, [bars.get(k, 0) for k in names], width, label=f["format"])
        ax.set_xticks([j + width * (len(conv) - 1) / 2 for j in range(len(names))])
        ax.set_xticklabels(names, rotation=20, fontsize=7)
        ax.set_ylabel("MB of text / s")
        ax.set_title("Text -> float32 matrix, same files (higher is better)")
        ax.legend()
        save(fig, "conversion.png")

    sc = g(results, "scaling", "points", default=[])
    if sc:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
        xs = [p["rows"] for p in sc]
        for t in sc[0]["embstore"]:
            a1.plot(xs, [p["bytes"] / p["embstore"][t]["seconds"] / 1e6 for p in sc], "o-",
                    label=f"embstore {t} thread(s)")
        for k in ["pandas", "loadtxt"]:
            pts = [(p["rows"], p["bytes"] / p["baselines"][k]["seconds"] / 1e6) for p in sc
                   if k in p["baselines"]]
            if pts:
                a1.plot(*zip(*pts), "s--", label=cb.BASELINE_LABELS[k].split("(")[0])
        a1.set_xscale("log")
        a1.set_xlabel("rows (dim 128, %.8g)")
        a1.set_ylabel("MB/s")
        a1.set_title("Conversion throughput vs rows")
        a1.legend(fontsize=7)
        a2.plot(xs, [max(v["peak_rss_mib"] for v in p["embstore"].values()) for p in sc], "o-",
                label="embstore convert")
        a2.plot(xs, [g(p, "client", "peak_rss_mib", default=0) for p in sc], "^-",
                label="Python client (embstore.load)")
        a2.plot(xs, [p.get("server_peak_rss_mib", 0) for p in sc], "v-",
                label="embstore serve (incl. mapped pages)")
        a2.plot(xs, [p["table_bytes"] / 2**20 for p in sc], "k:", label="table size")
        pts = [(p["rows"], p["baselines"]["pandas"]["peak_rss_mib"]) for p in sc
               if "pandas" in p["baselines"]]
        if pts:
            a2.plot(*zip(*pts), "s--", label="pandas.read_csv")
        a2.set_xscale("log")
        a2.set_yscale("log")
        a2.set_xlabel("rows")
        a2.set_ylabel("peak RSS, MiB")
        a2.set_title("Memory vs rows")
        a2.legend(fontsize=7)
        save(fig, "scaling.png")

    sv = results.get("serving")
    if sv:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        pb, sb = sv["pull_bench"], sv["serve_bench"]
        bars = {"iperf3 (1 stream)": pb["iperf3_bytes_per_s"],
                "serve (serve_bench)": sb["serve_bytes_per_s"]}
        for s in pb["streamed"]:
            bars[f"C++ {s['streams']}s"] = s["bytes_per_s"]
        for s in sv["python_client"]:
            bars[f"Py {s['streams']}s"] = s["bytes_per_s"]
        if sv.get("arrow_flight"):
            bars["Flight"] = sv["arrow_flight"]["bytes_per_s"]
        bars["naive gRPC (serve_bench)"] = sb["naive_bytes_per_s"]
        a1.bar(range(len(bars)), [v / 1e9 for v in bars.values()],
               color=["gray", "C0"] + ["C0"] * len(pb["streamed"])
               + ["C1"] * len(sv["python_client"])
               + ["C2"] * (1 if sv.get("arrow_flight") else 0) + ["C3"])
        a1.set_xticks(range(len(bars)))
        a1.set_xticklabels(list(bars), rotation=45, ha="right", fontsize=7)
        a1.set_ylabel("GB/s")
        a1.set_title("Loopback, whole table, 1 client")
        cs = sb["concurrent"]
        x = [c["clients"] for c in cs]
        a2.plot(x, [c["serve"]["aggregate_bytes_per_s"] / 1e9 for c in cs], "o-",
                label="embstore serve, aggregate GB/s")
        a2.plot(x, [c["naive"]["aggregate_bytes_per_s"] / 1e9 for c in cs], "s--",
                label="naive gRPC, aggregate GB/s")
        a2.set_xscale("log", base=2)
        a2.set_xlabel("concurrent clients")
        a2.set_ylabel("GB/s")
        a3 = a2.twinx()
        a3.plot(x, [c["serve"]["anon_growth_kib"] / 1024 for c in cs], "C2^:",
                label="serve anon RSS growth, MiB")
        a3.plot(x, [c["naive"]["anon_growth_kib"] / 1024 for c in cs], "C3v:",
                label="naive anon RSS growth, MiB")
        a3.set_ylabel("MiB")
        h1, l1 = a2.get_legend_handles_labels()
        h2, l2 = a3.get_legend_handles_labels()
        a2.legend(h1 + h2, l1 + l2, fontsize=6)
        a2.set_title("Concurrent clients")
        save(fig, "serving.png")

    loc = g(results, "local", "contenders", default={})
    if loc:
        fig, ax = plt.subplots(figsize=(8, 3.4))
        names = list(loc)
        ax.barh(range(len(names)), [loc[n]["seconds"] * 1e3 for n in names],
                color=["C0" if n.startswith("embstore") else "C1" for n in names])
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=7)
        ax.set_xscale("log")
        ax.set_xlabel("ms (lower is better; log scale)")
        ax.set_title(f"Local load of {results['local']['bytes'] / 1e6:.0f} MB, page cache warm")
        save(fig, "local_load.png")
    return made


def fmt_s(x):
    if x >= 0.1:
        return f"{x:.2f} s"
    return f"{x * 1e3:.1f} ms" if x >= 1e-3 else f"{x * 1e6:.0f} us"


def write_report(results, path, img_rel):
    m = results["machine"]
    ratios = results["ratios"]
    L = ["# Benchmarks: embstore against the tools trainers use today", "",
         "Generated by `bench/run.py --publish` from `docs/benchmarks.json`; do not edit by hand.",
         "Every number below comes from one run, on the same generated data, with every "
         "contender measured side by side. Ratios come first: they travel between machines "
         "better than absolute times, which are **machine-dependent**.", "",
         "Reproduce (after building the bench targets, see \"How to run\" below):", "",
         "```sh", ".venv/bin/python bench/run.py --publish        # about 5 to 10 minutes on 2 cores",
         ".venv/bin/python bench/run.py --quick          # under a minute; a smoke test",
         "```", "",
         f"Machine: {m.get('cpu', '?')}, {m['cores']} cores, {m.get('memory_gib', '?')} GiB, "
         f"Linux {m['kernel']}, SIMD kernel `{m['embstore_active_kernel']}`, "
         f"{'quick' if results['quick'] else 'full'} run of {m['date_utc']} at commit "
         f"`{m.get('git_commit', '?')}`. Load average at start "
         f"{' / '.join(f'{x:.2f}' for x in results['load_average']['start'])}, at end "
         f"{' / '.join(f'{x:.2f}' for x in results['load_average']['end'])} (1/5/15 min). "
         "The machine is shared with other builds, so single numbers can move by 2x between runs;"
         " the ratios, measured back to back, move less.", "",
         "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".", "",
         "## Ratios", "",
         "Above 1 means embstore (in `micro`: its SIMD kernel) is faster, or smaller, by that "
         "factor.", "",
         "| area | measure | ratio | target or meaning |", "|---|---|---:|---|"]
    for area, desc, val, note in ratios:
        L.append(f"| {area} | {desc} | {'n/a' if val is None else f'{val:.2f}'} | {note} |")
    L += ["", "## Where embstore is behind", ""]
    bh = results["behind"]
    L += [f"- {b}" for b in bh] if bh else ["- Nowhere in this run's ratios."]
    L += ["", "Context for these: the machine has "
          f"{m['cores']} cores shared with other work (see the load averages above); over "
          "loopback, client and server share those cores, so extra streams or clients compete "
          "with the server for CPU rather than adding network capacity. A ratio above 1 against "
          "a ceiling (iperf3, memcpy) means the ceiling's own run, seconds apart, was slowed "
          "by other work.", ""]
    # What a 10x target against a baseline asks of this machine, from this run's numbers.
    conv = g(results, "conversion", "formats", default=[]) or []
    kernel = m.get("embstore_active_kernel")
    asks = []
    for f in conv:
        parts = []
        for which in ("pandas", "loadtxt"):
            secs = g(f, "baselines", which, "seconds")
            if secs:
                need = f["bytes"] / (secs / 10) / 1e9
                parts.append(f"10x {cb.BASELINE_LABELS[which]} needs {need:.1f} GB/s "
                             f"({need / m['cores']:.2f} per core)")
        fast = g(results, "micro", "convert_bench", f"ParseChunk/{kernel}/{f['format']}/f32")
        if fast:
            parts.append(f"the {kernel} kernel alone parses {fast / 1e9:.2f} GB/s per core "
                         "(data in cache, no I/O)")
        if parts:
            asks.append(f"{f['format']}: " + ", ".join(parts))
    if asks:
        L += ["What the 10x conversion targets ask of this machine, end to end (reading the "
              "text, parsing, writing and checksumming the table), against what the parser "
              "does on its own: " + "; ".join(asks) + ".", ""]
    L += ["## Plots", ""]
    for name in results["plots"]:
        L.append(f"![{name[:-4]}]({img_rel}/{name})")
        L.append("")
    # Absolute numbers.
    L += ["## Absolute numbers (machine-dependent)", ""]
    conv = g(results, "conversion", "formats", default=[])
    if conv:
        L += [f"### Conversion, {results['conversion']['rows']:,} x {results['conversion']['dim']}"
              " float32", "",
              "Text in the page cache; embstore writes its table to the same tmpfs; baselines "
              "parse into memory only (timed inside their process). "
              f"Best of {conv[0].get('rounds', 1)} rounds, every contender once per round; "
              "peak RSS per process, the largest of the rounds. "
              "gensim parses in Python, 5-15k rows/s on this machine, so it and embstore read "
              "the word2vec form of the first rows only (the ratio is per byte of the same "
              "file).", "",
              "| format | contender | seconds | MB/s | peak RSS MiB |", "|---|---|---:|---:|---:|"]
        for f in conv:
            mb = f["bytes"] / 1e6
            for t, v in f["embstore"].items():
                L.append(f"| `{f['format']}` ({mb:,.0f} MB) | embstore convert --threads {t} | "
                         f"{v['seconds']:.2f} | {mb / v['seconds']:.0f} | "
                         f"{v['peak_rss_mib']:.0f} |")
            for k, v in f["baselines"].items():
                L.append(f"| `{f['format']}` | {cb.BASELINE_LABELS[k]} | {v['seconds']:.2f} | "
                         f"{mb / v['seconds']:.0f} | {v['peak_rss_mib']:.0f} |")
            w = f.get("word2vec")
            if w:
                wmb = w["bytes"] / 1e6
                for t, v in w["embstore"].items():
                    L.append(f"| word2vec form, first {w['rows']:,} rows ({wmb:,.0f} MB) | "
                             f"embstore convert --threads {t} |"
                             f" {v['seconds']:.2f} | {wmb / v['seconds']:.0f} | "
                             f"{v['peak_rss_mib']:.0f} |")
                v = w["gensim"]
                L.append(f"| word2vec form | gensim load_word2vec_format | {v['seconds']:.2f} | "
                         f"{wmb / v['seconds']:.0f} | {v['peak_rss_mib']:.0f} |")
            L.append(f"| `{f['format']}` | sample check | | | first "
                     f"{f['sample_values_compared']:,} values equal np.loadtxt's except "
                     f"{f['sample_values_differing']} |")
        L.append("")
    sc = g(results, "scaling", "points", default=[])
    if sc:
        L += ["### Scaling over rows (`%.8g`) and memory at each size", "",
              "| rows | text MB | embstore MB/s by threads | pandas MB/s | np.loadtxt MB/s | "
              "convert peak RSS MiB | client peak RSS MiB | server peak RSS MiB |",
              "|---:|---:|---|---:|---:|---:|---:|---:|"]
        for p in sc:
            mb = p["bytes"] / 1e6
            em = ", ".join(f"{t}T {mb / v['seconds']:.0f}" for t, v in p["embstore"].items())
            pb = g(p, "baselines", "pandas", "seconds")
            lb = g(p, "baselines", "loadtxt", "seconds")
            L.append(f"| {p['rows']:,} | {mb:,.0f} | {em} | {f'{mb / pb:.0f}' if pb else '-'} |"
                     f" {f'{mb / lb:.0f}' if lb else '-'} | "
                     f"{max(v['peak_rss_mib'] for v in p['embstore'].values()):.0f} | "
                     f"{g(p, 'client', 'peak_rss_mib', default=0):.0f} | "
                     f"{p.get('server_peak_rss_mib', 0):.0f} |")
        L += ["", "Client peak RSS includes the loaded array (the table's size) and the Python "
              "interpreter with numpy; server RSS includes the table's mapped pages.", ""]
    loc = g(results, "local", "contenders", default={})
    if loc:
        mb = results["local"]["bytes"] / 1e6
        L += [f"### Local load of the seed table ({mb:.0f} MB), page cache warm, best of 3", "",
              "| contender | time | GB/s | peak RSS MiB |", "|---|---:|---:|---:|"]
        for k, v in loc.items():
            maps_only = k in ("embstore.load(copy=False)", "np.load(mmap_mode='r')")
            speed = "(maps only)" if maps_only else f"{mb / 1e3 / v['seconds']:.2f}"
            L.append(f"| {k} | {fmt_s(v['seconds'])} | {speed} | {v['peak_rss_mib']:.0f} |")
        L += ["", "`copy=False` and `mmap_mode='r'` only map the file; the `+read` rows copy "
              "it into memory. Peak RSS counts the file's page-cache pages a process maps and "
              "touches (shared and reclaimable): np.load(mmap_mode='r')+read and safetensors map "
              "the file and copy out of it, so they peak near twice the table; np.load reads "
              "with read() and embstore.load with pread() (blocks verified by worker threads as "
              "they land), so both peak near once. runai-model-streamer and fastsafetensors read "
              "the table file itself, which is a safetensors file; runai's tensors live in its "
              "streamer's buffer, so its row includes the copy that keeps one.", ""]
    sv = results.get("serving")
    if sv:
        sb, pb = sv["serve_bench"], sv["pull_bench"]
        L += [f"### Serving over loopback TCP, {sv['bytes'] / 1e6:.0f} MB table", "",
              "| contender | GB/s |", "|---|---:|",
              f"| iperf3, one TCP stream (the ceiling; serve_bench / pull_bench) | "
              f"{sb['iperf3_bytes_per_s'] / 1e9:.2f} / {pb['iperf3_bytes_per_s'] / 1e9:.2f} |",
              f"| embstore serve, serve_bench's client (verified), best of rounds | "
              f"{sb['serve_bytes_per_s'] / 1e9:.2f} |",
              f"| naive copying gRPC server, same client | {sb['naive_bytes_per_s'] / 1e9:.2f} |"]
        for s in pb["streamed"]:
            L.append(f"| C++ embstore::client, {s['streams']} stream(s) | "
                     f"{s['bytes_per_s'] / 1e9:.2f} |")
        for s in sv["python_client"]:
            L.append(f"| Python embstore.load(local=False), {s['streams']} stream(s) | "
                     f"{s['bytes_per_s'] / 1e9:.2f} |")
            if s.get("reused_out_bytes_per_s"):
                L.append(f"| the same into a reused array (out=), {s['streams']} stream(s) | "
                         f"{s['reused_out_bytes_per_s'] / 1e9:.2f} |")
        if sv.get("arrow_flight"):
            L.append(f"| Arrow Flight do_get + to one numpy array | "
                     f"{sv['arrow_flight']['bytes_per_s'] / 1e9:.2f} |")
        if sv.get("pull_to_file"):
            L.append(f"| embstore pull --no-local to a .npy on tmpfs (writes included) | "
                     f"{sv['pull_to_file']['bytes_per_s'] / 1e9:.2f} |")
        L += [f"| local path, verified / unverified | {pb['local_verified_bytes_per_s'] / 1e9:.2f}"
              f" / {pb['local_bytes_per_s'] / 1e9:.2f} |",
              f"| memcpy from the page cache | {pb['memcpy_bytes_per_s'] / 1e9:.2f} |", "",
              "Arrow Flight serves the matrix as one `FixedSizeList<float32>[dim]` column in "
              "8192-row record batches: each batch is one contiguous buffer of whole rows, "
              "the layout embstore streams, so neither side pays for 128 separate columns; "
              "the client's time includes gathering the batches into one (rows, dim) array, "
              "as embstore.load returns.", "",
              "| concurrent clients | serve aggregate GB/s | naive aggregate GB/s | serve anon "
              "RSS growth MiB | naive anon growth MiB | serve total RSS peak MiB |",
              "|---:|---:|---:|---:|---:|---:|"]
        for c in sb["concurrent"]:
            s, n = c["serve"], c["naive"]
            L.append(f"| {c['clients']} | {s['aggregate_bytes_per_s'] / 1e9:.2f} | "
                     f"{n['aggregate_bytes_per_s'] / 1e9:.2f} | {s['anon_growth_kib'] / 1024:.1f}"
                     f" | {n['anon_growth_kib'] / 1024:.1f} | {s['total_peak_kib'] / 1024:.0f} |")
        L.append("")
    seed = g(results, "seed", "cases", default=[])
    if seed:
        L += ["### The seed scenario: TF1 variable, initialized and checkpointed", "",
              "From the converted table (the text parse is in the conversion table above).", "",
              "| case | ok | seconds | .meta | largest Const | checkpoint | peak RSS |",
              "|---|---|---:|---:|---:|---:|---:|"]
        for r in seed:
            name = f"{r['mode']} {r.get('rows', '?')}x{r.get('dim', '?')}"
            if not r.get("ok"):
                L.append(f"| {name} | no: {r.get('error', '')} | | | | | |")
                continue
            L.append(f"| {name} | yes | {r['seconds']:.2f} | {r['meta_bytes'] / 2**20:.2f} MiB |"
                     f" {r['largest_const_bytes'] / 2**20:.2f} MiB | "
                     f"{r['checkpoint_bytes'] / 2**20:.0f} MiB | "
                     f"{r['peak_rss_bytes'] / 2**30:.2f} GiB |")
        L.append("")
    trainer = results.get("trainer")
    if trainer:
        L += ["### The trainer load path: the seed table into framework memory", "",
              "Each case in a fresh process, page cache warm, best of 3; extra RSS is the peak "
              "above the zero-initialized variable (the Keras row: above the weight itself). "
              "Targets: TF1 from the local table <= 0.35x the workaround's time, from a server "
              "<= 0.6x, each <= 160 MiB extra; TF2 and torch <= 160 MiB.", "",
              "| case | seconds | extra peak RSS MiB |", "|---|---:|---:|"]
        for case, r in trainer.items():
            L.append(f"| {case} | {r['seconds']:.3f} | {r['extra_mib']:.0f} |")
        L.append("")
    lookup = results.get("lookup")
    if lookup:
        import lookup_bench
        L += [f"### Verified key lookups: {lookup['keys']:,} random keys, "
              f"{lookup['rows']:,} x 128 f32 table", "",
              "A lookup never returns a row from a block that fails its checksum: the first "
              "lookup on a mapping checks the key tensors and every block it touches, later "
              "ones skip blocks already checked (docs/FORMAT.md). Each case is a fresh process; "
              "page cache warm" + (f"; measured at commit `{lookup['commit']}`"
                                   if lookup.get("commit") else "") + ".", ""]
        L += lookup_bench.markdown(lookup) + [""]
    micro = results.get("micro")
    if micro:
        L += ["### Micro-benchmarks (one thread, bytes of input per second)", "",
              "| benchmark | GB/s |", "|---|---:|"]
        for prog in micro.values():
            for name, bps in prog.items():
                L.append(f"| {name} | {bps / 1e9:.2f} |")
        L.append("")
    L += ["## How to run", "",
          "```sh",
          "cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release",
          "ninja -C build/bench embstore embstore_gen_text serve_bench pull_bench convert_bench \\",
          "      store_bench embstore_make_test_table",
          ".venv/bin/python bench/run.py --build-dir build/bench --publish",
          "```", "",
          "`--quick` runs every phase on small sizes in under a minute (the CI smoke test, "
          "`tests/python/test_bench_quick.py`, asserts no speed). `--skip PHASE` leaves out "
          f"one of {', '.join(PHASES)}. Data is generated into `--work-dir` (default: a temporary "
          "directory on /dev/shm when it has room), so file-system speed stays out of the "
          "numbers. The full run needs about 10 GB there.", ""]
    path.write_text("\n".join(L))


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
        results["ratios"] = derive(results)
        results["behind"] = behind(results, results["ratios"])
        return publish(results, args, pathlib.Path(args.out_dir))

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
    results["ratios"] = derive(results)
    results["behind"] = behind(results, results["ratios"])
    return publish(results, args, ctx.out)


def publish(results, args, out):
    """Writes plots, results.json and the report; prints the ratios. Returns the exit status."""
    out.mkdir(parents=True, exist_ok=True)
    img = pathlib.Path(args.report_dir) / "img" if args.report_dir else out
    results["plots"] = plots(results, img)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    if args.report_dir:
        rd = pathlib.Path(args.report_dir)
        (rd / "benchmarks.json").write_text(json.dumps(results, indent=1))
        write_report(results, rd / "benchmarks.md", "img")
        log(f"report: {rd / 'benchmarks.md'}")
    else:
        write_report(results, out / "benchmarks.md", ".")
    print()
    for area, desc, val, note in results["ratios"]:
        print(f"  {area:10s} {'n/a' if val is None else f'{val:8.2f}'}  {desc}  {note}")
    for b in results["behind"]:
        print(f"  behind: {b}")
    log(f"done in {results['total_seconds']:.0f} s; results in {out / 'results.json'}"
        + (f"; errors in {list(results['errors'])}" if results["errors"] else ""))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
