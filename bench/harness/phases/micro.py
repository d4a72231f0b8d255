"""Phase micro: bench/convert_bench (parsing kernels) and bench/store_bench (dtype conversion per
kernel, Checksum64), Google Benchmark programs; bytes of input per second."""
import json
import subprocess


def run(ctx):
    """Each benchmark --repeat times, the repetitions interleaved at random with the other
    benchmarks' (so a slow spell of this shared machine hits them alike); the best repetition of
    each is kept, as phase conversion keeps each contender's best round, so the ratios that set
    a kernel against the end-to-end runs compare like with like."""
    res = {}
    min_time = "0.01" if ctx.quick else "0.2"
    for name in ["convert_bench", "store_bench"]:
        out = ctx.out / f"{name}.json"
        subprocess.run([str(ctx.build / "bench" / name), f"--benchmark_out={out}",
                        "--benchmark_out_format=json", f"--benchmark_min_time={min_time}",
                        f"--benchmark_repetitions={ctx.repeat}",
                        "--benchmark_enable_random_interleaving=true"],
                       check=True, stdout=subprocess.DEVNULL)
        data = json.loads(out.read_text())
        best = {}
        for b in data["benchmarks"]:
            if b.get("run_type") == "aggregate":
                continue
            name_ = b.get("run_name", b["name"])
            best[name_] = max(best.get(name_, 0.0), b.get("bytes_per_second", 0.0))
        res[name] = best
        out.unlink()
    return res
