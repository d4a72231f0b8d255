"""Phase scaling: embstore convert over rows (10k .. 4M, '%.8g') with 1 and all threads, pandas
and np.loadtxt up to 1M rows; and the peak RSS of the client (embstore.load from a server) and
of the server, loading each table over the wire."""
import os
import shutil

from harness.data import gen_text, warm
from harness.phases.conversion import convert_once, run_baseline
from harness.procfs import RssSampler
from harness.processes import embstore_server, run_json_child
from harness.timing import log


def run(ctx):
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
        point = {"rows": n, "bytes": text.stat().st_size, "embstore": {}, "baselines": {}}
        table = store / f"t{n}.emb"
        for t in threads:
            point["embstore"][str(t)] = convert_once(ctx.build, text, t, table)
        if n <= baseline_max:
            for which in ["loadtxt", "pandas"]:
                secs, rss, _ = run_baseline(which, str(text))
                point["baselines"][which] = {"seconds": secs, "peak_rss_mib": rss}
        text.unlink()
        point["table_bytes"] = table.stat().st_size
        res["points"].append(point)
    # Client and server memory at each size: one streamed load per table, server RSS sampled.
    with embstore_server(ctx.build, store) as server:
        for point in res["points"]:
            with RssSampler(server.pid) as sampler:
                r = run_json_child("client-load", server.target, f"t{point['rows']}", 0, 1)
            point["client"] = {"seconds": r["seconds"], "peak_rss_mib": r["peak_rss_mib"]}
            point["server_peak_rss_mib"] = sampler.peak
    shutil.rmtree(store)
    return res
