"""Phase micro: bench/convert_bench (parsing kernels) and bench/store_bench (dtype conversion per
kernel, Checksum64), Google Benchmark programs; bytes of input per second."""
import json
import subprocess


def run(ctx):
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
