"""The headline ratios of a run, and plain sentences on where embstore is behind.

A ratio row is (area, description, value, note); above 1 means embstore (in `micro`: its SIMD
kernel) is ahead. The note states the target or what the ratio means; where_behind() reads the
targets back out of it, so a note's wording is part of its meaning.
"""
import re

from harness.contenders.text_parsers import BASELINE_LABELS
from harness.report import get_nested, ratio

CEILING = "a ceiling: 1.0 at best"
# The AVX2 parse kernel's speed-up over the scalar one that it is designed to reach.
AVX2_OVER_SCALAR = {("avx2", "%.18e"): 2.5, ("avx2", "%.8g"): 3.0}


def _conversion(results):
    rows = []
    for f in get_nested(results, "conversion", "formats", default=[]):
        best = min(v["seconds"] for v in f["embstore"].values())
        one_thread = f["embstore"]["1"]["seconds"]
        for which, label in BASELINE_LABELS.items():
            baseline = get_nested(f, "baselines", which, "seconds")
            if baseline:
                rows.append(("conversion", f"`{f['format']}`: {label} time / embstore convert "
                             "(all threads)", baseline / best, "target >= 10"))
        rows.append(("conversion", f"`{f['format']}`: embstore, 1 thread, GB/s per core",
                     f["bytes"] / one_thread / 1e9, "target >= 1.0 (absolute, machine-dependent)"))
        most = max(int(k) for k in f["embstore"])
        all_threads = get_nested(f, "embstore", str(most), "seconds")
        if len(f["embstore"]) > 1:
            rows.append(("conversion", f"`{f['format']}`: embstore scaling, 1 thread -> "
                         f"{most} threads", one_thread / all_threads, "ideal = thread count"))
        w2v = f.get("word2vec")
        if w2v:
            w2v_best = min(v["seconds"] for v in w2v["embstore"].values())
            rows.append(("conversion", f"word2vec text form ({w2v['rows']:,} rows): gensim "
                         "load_word2vec_format / embstore convert",
                         w2v["gensim"]["seconds"] / w2v_best, "target >= 10"))
    return rows


def _local_load(local):
    rows = []
    verified = get_nested(local, "embstore.load", "seconds")
    for other in ["np.load", "np.load(mmap_mode='r')+read", "safetensors.load_file",
                  "safetensors.safe_open"]:
        if get_nested(local, other, "seconds"):
            rows.append(("local load", f"full read: {other} / embstore.load (verified)",
                         local[other]["seconds"] / verified, ""))
    unverified = get_nested(local, "embstore.load(verify=False)", "seconds")
    if unverified and get_nested(local, "np.load", "seconds"):
        rows.append(("local load", "full read: np.load / embstore.load(verify=False)",
                     local["np.load"]["seconds"] / unverified, ""))
    zero_copy = get_nested(local, "embstore.load(copy=False, verify=False)", "seconds")
    np_mmap = get_nested(local, "np.load(mmap_mode='r')", "seconds")
    if zero_copy and np_mmap:
        rows.append(("local load", "zero-copy open: np.load(mmap_mode='r') / "
                     "embstore.load(copy=False, verify=False)", np_mmap / zero_copy, ""))
    verified_view = get_nested(local, "embstore.load(copy=False)", "seconds")
    np_read = get_nested(local, "np.load(mmap_mode='r')+read", "seconds")
    if verified_view and np_read:
        rows.append(("local load", "verified zero-copy view: np.load(mmap_mode='r')+read / "
                     "embstore.load(copy=False)", np_read / verified_view,
                     "every block hashed before the view is handed out"))
    return rows


def _local_load_peers(local):
    """Peers reading the table file itself, and the memory and time targets against np.load."""
    rows = []
    verified = get_nested(local, "embstore.load", "seconds")
    for peer in ["runai-model-streamer", "fastsafetensors (cpu)"]:
        if get_nested(local, peer, "seconds"):
            rows.append(("local load", f"full read of the table file: {peer} / embstore.load "
                         "(verified)", local[peer]["seconds"] / verified, ""))
    if get_nested(local, "np.load", "peak_rss_mib") and \
            get_nested(local, "embstore.load", "peak_rss_mib"):
        rows.append(("local load", "peak RSS: np.load / embstore.load (verified)",
                     local["np.load"]["peak_rss_mib"] / local["embstore.load"]["peak_rss_mib"],
                     "target >= 0.91 (ratio; embstore <= 1.1x np.load)"))
        rows.append(("local load", "full read: np.load / embstore.load (verified)",
                     local["np.load"]["seconds"] / verified, "target >= 1.00 (ratio)"))
    return rows


def _serving(serving):
    rows = []
    serve, pull = serving["serve_bench"], serving["pull_bench"]
    rows.append(("serving", "embstore serve, 1 client / iperf3 single stream (median of "
                 "rounds)", serve["ratio_serve_iperf3_median"], "target >= 0.70"))
    rows.append(("serving", "embstore serve / naive copying gRPC server, 1 client (median)",
                 serve["ratio_serve_naive_median"], ""))
    best_cpp = max(s["bytes_per_s"] for s in pull["streamed"])
    rows.append(("serving", "C++ client, best of 1..N streams / iperf3",
                 ratio(best_cpp, pull["iperf3_bytes_per_s"]), CEILING))
    best_py = max(s["bytes_per_s"] for s in serving["python_client"])
    rows.append(("serving", "Python client (embstore.load, best of 1..N streams) / iperf3",
                 ratio(best_py, pull["iperf3_bytes_per_s"]), CEILING))
    flight = get_nested(serving, "arrow_flight", "bytes_per_s")
    if flight:
        rows.append(("serving", "Python client (best streams) / Arrow Flight do_get",
                     best_py / flight, ""))
        py_one_stream = serving["python_client"][0]["bytes_per_s"]
        rows.append(("serving", "Python client, 1 stream / Arrow Flight do_get (1 stream)",
                     py_one_stream / flight, ""))
    rows.append(("serving", "local path (verified) / memcpy from the page cache",
                 ratio(pull["local_verified_bytes_per_s"], pull["memcpy_bytes_per_s"]), CEILING))
    for c in serve["concurrent"]:
        rows.append(("serving", f"{c['clients']} concurrent clients: aggregate serve / naive",
                     ratio(c["serve"]["aggregate_bytes_per_s"],
                           c["naive"]["aggregate_bytes_per_s"]), ""))
    return rows


def _load_path(serving):
    """The Python client against the C++ client, and pull to a file against both."""
    rows = []
    cpp = {s["streams"]: s["bytes_per_s"] for s in serving["pull_bench"]["streamed"]}
    for py in serving["python_client"]:
        # The C++ figures measured round by round with the Python ones (same server, same
        # moment); older results have only pull_bench's own run.
        paired = py.get("cpp_bytes_per_s") or cpp.get(py["streams"])
        paired_fresh = py.get("cpp_fresh_bytes_per_s") or paired
        if paired and py.get("reused_out_bytes_per_s"):
            # Both into memory already in use.
            rows.append(("load path", f"Python embstore.load(out=) over TCP / C++ client, "
                         f"{py['streams']} stream(s)", py["reused_out_bytes_per_s"] / paired,
                         "target >= 0.90 (ratio)"))
        if paired_fresh:
            # Both into new memory each load.
            rows.append(("load path", f"Python embstore.load (a new array) over TCP / C++ "
                         f"client into new memory, {py['streams']} stream(s)",
                         py["bytes_per_s"] / paired_fresh, ""))
    to_file = get_nested(serving, "pull_to_file", "bytes_per_s")
    if to_file:
        rows.append(("load path", "embstore pull to a .npy on tmpfs / C++ client in memory "
                     "(best streams)", to_file / max(cpp.values()), "target >= 0.80 (ratio)"))
        fresh = [py["cpp_fresh_bytes_per_s"] for py in serving["python_client"]
                 if py.get("cpp_fresh_bytes_per_s")]
        if fresh:
            # The file's pages are new memory too (tmpfs allocates and zeroes each one).
            rows.append(("load path", "embstore pull to a .npy on tmpfs / C++ client into new "
                         "memory (best streams)", to_file / max(fresh), ""))
    return rows


def _trainer(trainer):
    rows = []
    workaround = get_nested(trainer, "tf1 workaround", "seconds")
    for case, target in [("tf1 embstore (local table)", 0.35),
                         ("tf1 embstore (server, local=False)", 0.6)]:
        if workaround and get_nested(trainer, case, "seconds"):
            rows.append(("load path", f"seed into a TF1 variable: np.load + feed_dict workaround "
                         f"time / {case}", workaround / trainer[case]["seconds"],
                         f"target >= {1 / target:.2f} (ratio; embstore <= {target}x the time)"))
    hook = get_nested(trainer, "tf1 init_hook (local table)", "seconds")
    zeros = get_nested(trainer, "tf1 workaround", "init_seconds")
    if workaround and zeros and hook:
        # From an uninitialized variable: the workaround's zeros initialization counts too.
        rows.append(("load path", "seed into a TF1 variable from scratch: zeros initializer + "
                     "np.load + feed_dict workaround time / tf1 init_hook (local table)",
                     (zeros + workaround) / hook, ""))
    return rows


def _distributed(distributed):
    """A job's start three ways; the naive way (every rank loads the whole table) is the
    baseline the two sharing ways are measured against."""
    ways = distributed["ways"]
    naive = ways["every rank loads all"]
    ranks = f"{distributed['ranks']} ranks"
    rows = []
    for way in ("load_sharded", "broadcast_load"):
        rows.append(("distributed", f"{ranks}, job start time: every rank loads the whole table "
                     f"/ {way}", ratio(naive["seconds"], ways[way]["seconds"]), ""))
    rows.append(("distributed", f"{ranks}, bytes served: every rank loads the whole table / "
                 "load_sharded", ratio(naive["server_bytes"], ways["load_sharded"]["server_bytes"]),
                 "ideal = rank count (the table read once)"))
    rows.append(("distributed", f"{ranks}, peak RSS above start (largest rank): every rank loads "
                 "the whole table / load_sharded",
                 ratio(naive["extra_rss_mib"], ways["load_sharded"]["extra_rss_mib"]), ""))
    return rows


def _pull_against(area, where, contenders):
    """Rows of `embstore pull` against each other downloader of the same table from `where`, and
    against the best of them (target: at least as fast)."""
    mine = get_nested(contenders, "embstore pull", "seconds")
    others = {k: v["seconds"] for k, v in contenders.items()
              if k != "embstore pull" and v.get("seconds")}
    if not mine or not others:
        return []
    rows = [(area, f"seed table from {where}: {k} time / embstore pull", t / mine, "")
            for k, t in others.items()]
    best = min(others, key=others.get)
    rows.append((area, f"seed table from {where}: best other ({best}) time / embstore pull",
                 others[best] / mine, "target >= 1.00 (ratio)"))
    return rows


def _object_store(store):
    """embstore pull against the best other downloader of the same object."""
    rows = _pull_against("object store", "S3", store["contenders"])
    if not rows:
        return []
    partial = store.get("partial")
    if partial and partial.get("transferred_bytes"):
        rows.append(("object store", f"export s3://.../seed.emb --rows 0:{partial['rows']}: "
                     "table bytes / bytes transferred",
                     store["bytes"] / partial["transferred_bytes"],
                     "target >= 50 (ratio; under 2% of the table)"))
    return rows


def _hdfs(hdfs):
    """embstore pull against the best other reader of the same HDFS file, and the loads."""
    rows = _pull_against("hdfs", "HDFS", hdfs["downloads"])
    if not rows:
        return []
    loads = hdfs.get("loads", {})
    for theirs, ours in [("hdfs-native + safetensors -> numpy", "embstore.load -> numpy"),
                         ("hdfs-native + feed_dict -> TF1 variable",
                          "embstore.tf.initialize -> TF1 variable")]:
        t, m = get_nested(loads, theirs, "seconds"), get_nested(loads, ours, "seconds")
        if t and m:
            rows.append(("hdfs", f"from HDFS, {theirs} time / {ours}", t / m, ""))
    return rows


def _writers(w):
    """embstore's writers against np.save of the same matrix, each with the same promise."""
    cases = w.get("cases", {})
    rows = []
    for theirs, ours, target in [
            ("np.save", "embstore.save (durable=False)", "target >= 1.00 (ratio)"),
            ("np.save + fsync", "embstore.save", ""),
            ("np.save (torch tensor)", "embstore.torch.save (durable=False)",
             "target >= 1.00 (ratio; both with torch imported)"),
            ("np.save (TF1 variable's value)", "embstore.tf.save (TF1 variable, durable=False)",
             "target >= 1.00 (ratio; both with TensorFlow imported)"),
            ("np.save", "embstore.torch.save (durable=False)", ""),
            ("np.save", "embstore.tf.save (TF1 variable, durable=False)", ""),
            ("session.run + np.save (TF1 variable)",
             "embstore.tf.save (TF1 variable, durable=False)", "")]:
        t, m = get_nested(cases, theirs, "seconds"), get_nested(cases, ours, "seconds")
        if t and m:
            rows.append(("writers", f"seed matrix to disk: {theirs} time / {ours}", t / m,
                         target))
    for case in ("embstore.torch.save (durable=False)",
                 "embstore.tf.save (TF1 variable, durable=False)"):
        extra = get_nested(cases, case, "extra_rss_mib")
        if extra is not None:
            rows.append(("writers", f"{case}: peak RSS above the matrix (MiB)", extra,
                         "target <= 64 (MiB)"))
    return rows


def _sync(sync):
    """Delta syncs of the seed table's next version (1% of its rows changed) against full
    fetches of it, from a server and from S3."""
    rows = []
    for where, label in (("server", "server"), ("s3", "S3")):
        for spread in ("random", "clustered"):
            cases = get_nested(sync, where, spread, default={})
            what = f"sync from {label}, 1% of rows changed ({spread})"
            for full, delta in (("embstore pull (full)", "embstore pull --update"),
                                ("embstore pull (full)", "embstore pull --update --spare"),
                                ("embstore.load (full, out=)", "embstore.update (in memory)")):
                t, m = get_nested(cases, full, "seconds"), get_nested(cases, delta, "seconds")
                if t and m:
                    rows.append(("sync", f"{what}: {full} time / {delta}", t / m,
                                 "target >= 5.00 (ratio)"))
            moved = get_nested(cases, "embstore.update (in memory)", "moved_bytes")
            if moved:
                rows.append(("sync", f"{what}: bytes moved, % of the table", 100 * moved /
                             sync["table_bytes"], "target <= 4 (% of the table)"))
    return rows


def _seed(results):
    rows = []
    seed = get_nested(results, "seed", "cases", default=[])
    if len(seed) >= 2 and seed[0].get("ok") and seed[1].get("ok"):
        old, new = seed[0], seed[1]
        rows.append(("seed", ".meta size: tf.constant / embstore",
                     old["meta_bytes"] / max(1, new["meta_bytes"]), ""))
        rows.append(("seed", "graph + init + save time: tf.constant / embstore",
                     old["seconds"] / new["seconds"], ""))
        rows.append(("seed", "peak RSS: tf.constant / embstore",
                     old["peak_rss_bytes"] / new["peak_rss_bytes"], ""))
        formats = get_nested(results, "conversion", "formats", default=[])
        e18 = next((f for f in formats if f["format"] == "%.18e"), None)
        if e18 and get_nested(e18, "baselines", "loadtxt", "seconds"):
            t_old = e18["baselines"]["loadtxt"]["seconds"] + old["seconds"]
            t_new = min(v["seconds"] for v in e18["embstore"].values()) + new["seconds"]
            rows.append(("seed", "text -> variable -> checkpoint: (np.loadtxt + tf.constant) / "
                         "(embstore convert + embstore.tf)", t_old / t_new,
                         "sum of the measured steps"))
    return rows


def _micro(results):
    rows = []
    micro = results.get("micro") or {}
    parse = micro.get("convert_bench", {})
    per_kernel = get_nested(results, "conversion", "per_kernel", default={})
    for fmt in ["%.18e", "%.8g"]:
        scalar = parse.get(f"ParseChunk/scalar/{fmt}/f32")
        simd = {k.split("/")[1]: v for k, v in parse.items()
                if k.endswith(f"/{fmt}/f32") and "/scalar/" not in k}
        for kernel in sorted(simd) if scalar else []:
            target = AVX2_OVER_SCALAR.get((kernel, fmt))
            rows.append(("micro", f"parse `{fmt}` to f32: {kernel} kernel / scalar kernel",
                         simd[kernel] / scalar,
                         f"target >= {target:.2f} (ratio; one thread, data in cache)" if target
                         else "SIMD speed-up, one thread"))
        # The pipeline around each kernel: convert --threads 1 end to end (reading, chunking,
        # parsing, writing, checksumming, fsync) against the kernel alone on data in cache.
        conv = per_kernel.get(fmt, {})
        for kernel, run in sorted(conv.get("kernels", {}).items()):
            alone = parse.get(f"ParseChunk/{kernel}/{fmt}/f32")
            if alone:
                e2e = conv["bytes"] / run["seconds"]
                rows.append(("micro", f"`{fmt}`, {kernel} kernel: `embstore convert --threads 1` "
                             f"end to end ({e2e / 1e9:.2f} GB/s) / the kernel alone "
                             f"({alone / 1e9:.2f} GB/s per core)", e2e / alone,
                             "target >= 0.85 (ratio; the pipeline at the kernel's speed)"))
    dtype = micro.get("store_bench", {})
    for op in ["f16_to_f32", "f32_to_f16", "bf16_to_f32", "f32_to_bf16"]:
        scalar = dtype.get(f"DType/{op}/scalar")
        simd = {k.rsplit("/", 1)[1]: v for k, v in dtype.items()
                if k.startswith(f"DType/{op}/") and not k.endswith("/scalar")}
        if scalar and simd:
            kernel = max(simd, key=simd.get)
            rows.append(("micro", f"{op}: {kernel} kernel / scalar kernel", simd[kernel] / scalar,
                         "SIMD speed-up, one thread"))
    for tensor_dtype, op in [("F16", "f32_to_f16"), ("BF16", "f32_to_bf16")]:
        checked = dtype.get(f"DType/ConvertFromF32_checked/{tensor_dtype}/active")
        kernel = get_nested(results, "machine", "embstore_active_kernel")
        active = dtype.get(f"DType/{op}/{kernel}")
        if checked and active:
            rows.append(("micro", f"f32 -> {tensor_dtype} with the overflow check "
                         "(ConvertFromF32, kError) / the bare active kernel", checked / active,
                         "target >= 0.90 (ratio; 1.0 = the check costs nothing)"))
    return rows


def headline_ratios(results):
    """The ratio rows of a run, in the report's order."""
    rows = _conversion(results)
    local = get_nested(results, "local", "contenders", default={})
    if local:
        rows += _local_load(local)
    serving = results.get("serving")
    if serving:
        rows += _serving(serving)
    if local:
        rows += _local_load_peers(local)
    if serving:
        rows += _load_path(serving)
    rows += _trainer(results.get("trainer") or {})
    if results.get("distributed"):
        rows += _distributed(results["distributed"])
    if get_nested(results, "object_store", "contenders"):
        rows += _object_store(results["object_store"])
    if get_nested(results, "hdfs", "downloads"):
        rows += _hdfs(results["hdfs"])
    if get_nested(results, "writers", "cases"):
        rows += _writers(results["writers"])
    if get_nested(results, "sync", "server"):
        rows += _sync(results["sync"])
    rows += _seed(results)
    rows += _micro(results)
    return rows


def where_behind(results, ratios):
    """Plain sentences on where embstore is behind, from the measured ratios."""
    out = []
    for _area, desc, val, note in ratios:
        if val is None:
            continue
        target = re.search(r"target >= ([0-9.]+) \(ratio", note)
        if target:
            if val < float(target.group(1)):
                out.append(f"{desc}: {val:.2f}, short of the {target.group(1)} target.")
        elif (cap := re.search(r"target <= ([0-9.]+) \((MiB|%)", note)):
            if val > float(cap.group(1)):
                out.append(f"{desc}: {val:.2f}, over the {cap.group(1)} {cap.group(2)} target.")
        elif "target >= 10" in note and val < 10:
            out.append(f"{desc}: {val:.1f}x, short of the 10x target.")
        elif "target >= 1.0" in note and val < 1.0:
            out.append(f"{desc}: {val:.2f} GB/s, short of the 1 GB/s per core target.")
        elif "target >= 0.70" in note and val < 0.70:
            out.append(f"{desc}: {val:.2f}, short of the 0.70 target.")
        elif note == CEILING and val < 0.70:
            out.append(f"{desc}: {val:.2f}, under 0.70 of its ceiling.")
        elif "ideal" in note and val < 1.6:
            out.append(f"{desc}: {val:.2f}x, well short of linear.")
        elif not note and val < 1.0:
            out.append(f"{desc}: {val:.2f} (below 1: the other tool is faster or smaller).")
    for c in get_nested(results, "serving", "serve_bench", "concurrent", default=[]):
        growth = c["serve"]["anon_growth_kib"] / 1024
        if growth > 64:
            out.append(f"{c['clients']} concurrent clients: server anonymous memory grew "
                       f"{growth:.0f} MiB, over the 64 MiB target.")
    for f in get_nested(results, "conversion", "formats", default=[]):
        rss = max(v["peak_rss_mib"] for v in f["embstore"].values())
        if rss > 256:
            out.append(f"`{f['format']}`: embstore convert peak RSS {rss:.0f} MiB, over 256 MiB.")
    return out
