"""PNG plots of a run, one per area that measured something: conversion, scaling, serving and
local load. matplotlib is imported here only, so measuring never pays for it."""
from harness.contenders.text_parsers import BASELINE_LABELS
from harness.report import get_nested


def _conversion(ax, formats):
    width = 0.8 / len(formats)
    per_format = []
    for f in formats:
        bars = {f"embstore {t}T": f["bytes"] / v["seconds"] / 1e6
                for t, v in f["embstore"].items()}
        for which, label in BASELINE_LABELS.items():
            if get_nested(f, "baselines", which):
                bars[label.split("(")[0].split(" ")[0]] = f["bytes"] / f["baselines"][which][
                    "seconds"] / 1e6
        if f.get("word2vec"):
            w2v = f["word2vec"]
            for t, v in w2v["embstore"].items():
                bars[f"embstore {t}T (w2v form)"] = w2v["bytes"] / v["seconds"] / 1e6
            bars["gensim (w2v form)"] = w2v["bytes"] / w2v["gensim"]["seconds"] / 1e6
        per_format.append(bars)
    names = list(dict.fromkeys(k for bars in per_format for k in bars))
    for i, (f, bars) in enumerate(zip(formats, per_format)):
        xs = [j + i * width for j in range(len(names))]
        ax.bar(xs, [bars.get(k, 0) for k in names], width, label=f["format"])
    ax.set_xticks([j + width * (len(formats) - 1) / 2 for j in range(len(names))])
    ax.set_xticklabels(names, rotation=20, fontsize=7)
    ax.set_ylabel("MB of text / s")
    ax.set_title("Text -> float32 matrix, same files (higher is better)")
    ax.legend()


def _scaling(speed_ax, memory_ax, points):
    xs = [p["rows"] for p in points]
    for t in points[0]["embstore"]:
        speed_ax.plot(xs, [p["bytes"] / p["embstore"][t]["seconds"] / 1e6 for p in points], "o-",
                      label=f"embstore {t} thread(s)")
    for which in ["pandas", "loadtxt"]:
        pts = [(p["rows"], p["bytes"] / p["baselines"][which]["seconds"] / 1e6) for p in points
               if which in p["baselines"]]
        if pts:
            speed_ax.plot(*zip(*pts), "s--", label=BASELINE_LABELS[which].split("(")[0])
    speed_ax.set_xscale("log")
    speed_ax.set_xlabel("rows (dim 128, %.8g)")
    speed_ax.set_ylabel("MB/s")
    speed_ax.set_title("Conversion throughput vs rows")
    speed_ax.legend(fontsize=7)
    memory_ax.plot(xs, [max(v["peak_rss_mib"] for v in p["embstore"].values()) for p in points],
                   "o-", label="embstore convert")
    memory_ax.plot(xs, [get_nested(p, "client", "peak_rss_mib", default=0) for p in points],
                   "^-", label="Python client (embstore.load)")
    memory_ax.plot(xs, [p.get("server_peak_rss_mib", 0) for p in points], "v-",
                   label="embstore serve (incl. mapped pages)")
    memory_ax.plot(xs, [p["table_bytes"] / 2**20 for p in points], "k:", label="table size")
    pts = [(p["rows"], p["baselines"]["pandas"]["peak_rss_mib"]) for p in points
           if "pandas" in p["baselines"]]
    if pts:
        memory_ax.plot(*zip(*pts), "s--", label="pandas.read_csv")
    memory_ax.set_xscale("log")
    memory_ax.set_yscale("log")
    memory_ax.set_xlabel("rows")
    memory_ax.set_ylabel("peak RSS, MiB")
    memory_ax.set_title("Memory vs rows")
    memory_ax.legend(fontsize=7)


def _serving(one_client_ax, concurrent_ax, serving):
    pull, serve = serving["pull_bench"], serving["serve_bench"]
    bars = {"iperf3 (1 stream)": pull["iperf3_bytes_per_s"],
            "serve (serve_bench)": serve["serve_bytes_per_s"]}
    for s in pull["streamed"]:
        bars[f"C++ {s['streams']}s"] = s["bytes_per_s"]
    for s in serving["python_client"]:
        bars[f"Py {s['streams']}s"] = s["bytes_per_s"]
    if serving.get("arrow_flight"):
        bars["Flight"] = serving["arrow_flight"]["bytes_per_s"]
    bars["naive gRPC (serve_bench)"] = serve["naive_bytes_per_s"]
    one_client_ax.bar(range(len(bars)), [v / 1e9 for v in bars.values()],
                      color=["gray", "C0"] + ["C0"] * len(pull["streamed"])
                      + ["C1"] * len(serving["python_client"])
                      + ["C2"] * (1 if serving.get("arrow_flight") else 0) + ["C3"])
    one_client_ax.set_xticks(range(len(bars)))
    one_client_ax.set_xticklabels(list(bars), rotation=45, ha="right", fontsize=7)
    one_client_ax.set_ylabel("GB/s")
    one_client_ax.set_title("Loopback, whole table, 1 client")
    concurrent = serve["concurrent"]
    x = [c["clients"] for c in concurrent]
    concurrent_ax.plot(x, [c["serve"]["aggregate_bytes_per_s"] / 1e9 for c in concurrent], "o-",
                       label="embstore serve, aggregate GB/s")
    concurrent_ax.plot(x, [c["naive"]["aggregate_bytes_per_s"] / 1e9 for c in concurrent], "s--",
                       label="naive gRPC, aggregate GB/s")
    concurrent_ax.set_xscale("log", base=2)
    concurrent_ax.set_xlabel("concurrent clients")
    concurrent_ax.set_ylabel("GB/s")
    memory_ax = concurrent_ax.twinx()
    memory_ax.plot(x, [c["serve"]["anon_growth_kib"] / 1024 for c in concurrent], "C2^:",
                   label="serve anon RSS growth, MiB")
    memory_ax.plot(x, [c["naive"]["anon_growth_kib"] / 1024 for c in concurrent], "C3v:",
                   label="naive anon RSS growth, MiB")
    memory_ax.set_ylabel("MiB")
    handles, labels = concurrent_ax.get_legend_handles_labels()
    memory_handles, memory_labels = memory_ax.get_legend_handles_labels()
    concurrent_ax.legend(handles + memory_handles, labels + memory_labels, fontsize=6)
    concurrent_ax.set_title("Concurrent clients")


def _local_load(ax, local, nbytes):
    names = list(local)
    ax.barh(range(len(names)), [local[n]["seconds"] * 1e3 for n in names],
            color=["C0" if n.startswith("embstore") else "C1" for n in names])
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("ms (lower is better; log scale)")
    ax.set_title(f"Local load of {nbytes / 1e6:.0f} MB, page cache warm")


def write_plots(results, img):
    """Writes the plots into directory `img`; returns their file names, in the report's order."""
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

    formats = get_nested(results, "conversion", "formats", default=[])
    if formats:
        fig, ax = plt.subplots(figsize=(8, 3.6))
        _conversion(ax, formats)
        save(fig, "conversion.png")
    points = get_nested(results, "scaling", "points", default=[])
    if points:
        fig, (speed_ax, memory_ax) = plt.subplots(1, 2, figsize=(9, 3.6))
        _scaling(speed_ax, memory_ax, points)
        save(fig, "scaling.png")
    serving = results.get("serving")
    if serving:
        fig, (one_client_ax, concurrent_ax) = plt.subplots(1, 2, figsize=(10, 4))
        _serving(one_client_ax, concurrent_ax, serving)
        save(fig, "serving.png")
    local = get_nested(results, "local", "contenders", default={})
    if local:
        fig, ax = plt.subplots(figsize=(8, 3.4))
        _local_load(ax, local, results["local"]["bytes"])
        save(fig, "local_load.png")
    return made
