"""Phase serving: bench/serve_bench (embstore serve against iperf3 and a naive copying gRPC
server; 1..64 concurrent clients: aggregate throughput and server RSS), bench/pull_bench (the
C++ client with 1..N streams, the local path against memcpy), the Python client with 1..N
streams, `embstore pull` to a .npy, and Arrow Flight (do_get of the same matrix)."""
import json
import subprocess

from harness.procfs import RssSampler
from harness.processes import child_command, child_env, embstore_server, run_json_child
from harness.timing import best_of, log


def _cpp_bench(ctx, name, args):
    """Runs bench/`name` with `args` and --json; returns the JSON it wrote."""
    path = ctx.out / f"{name}.json"
    cmd = [ctx.build / "bench" / name] + args + ["--json", path]
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)
    res = json.loads(path.read_text())
    path.unlink()
    return res


def _python_client(ctx, server, table_bytes, repeats):
    """The Python client against the C++ client (pull_bench --target) on the same server and
    table, round by round (C++, Python into a new array, Python into out=), best of each: a
    shared machine's drift between two separate runs would otherwise land in their ratio."""
    log("  Python client against the C++ client (embstore.load over TCP, 1..N streams, "
        "interleaved)")
    res = []
    for n in ([1, 2] if ctx.quick else [1, 2, 4, 8]):
        cpp = cpp_fresh = fresh = reused = 1e9
        peak = 0
        for _ in range(repeats):
            c = _cpp_bench(ctx, "pull_bench", ["--target", server.target, "--table", "seed",
                                               "--streams", n, "--repeats", 1])["streamed"][0]
            cpp = min(cpp, table_bytes / c["bytes_per_s"])
            cpp_fresh = min(cpp_fresh, table_bytes / c["fresh_bytes_per_s"])
            f = run_json_child("client-load", server.target, "seed", n, 1)
            fresh, peak = min(fresh, f["seconds"]), max(peak, f["peak_rss_mib"])
            reused = min(reused, run_json_child("client-load", server.target, "seed", n, 1,
                                                "reuse")["seconds"])
        res.append({"streams": n, "bytes_per_s": table_bytes / fresh,
                    "reused_out_bytes_per_s": table_bytes / reused,
                    "cpp_bytes_per_s": table_bytes / cpp,
                    "cpp_fresh_bytes_per_s": table_bytes / cpp_fresh,
                    "client_peak_rss_mib": peak})
    return res


def _pull_to_file(ctx, server, table_bytes, repeats):
    # embstore pull into a .npy on the work directory (tmpfs when /dev/shm has room),
    # streamed, against the C++ client's in-memory load.
    log("  embstore pull --no-local to a .npy in the work directory")
    dest = ctx.work / "pulled.npy"
    seconds = best_of(repeats, lambda: subprocess.run(
        [str(ctx.build / "cli" / "embstore"), "pull", "--from", server.target, "--table", "seed",
         "--out", str(dest), "--no-local", "--force"], check=True, stdout=subprocess.DEVNULL),
        release=dest.unlink)
    return {"bytes_per_s": table_bytes / seconds, "work_dir": str(ctx.work)}


def _arrow_flight(ctx, table_bytes, repeats):
    log("  Arrow Flight (pyarrow.flight do_get of the same matrix)")
    server = subprocess.Popen(child_command("flight-server", ctx.seed_table),
                              stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        port = int(server.stdout.readline())
        with RssSampler(server.pid) as sampler:
            r = run_json_child("flight-get", port, repeats, ctx.dim)
        return {"bytes_per_s": table_bytes / r["seconds"],
                "client_peak_rss_mib": r["peak_rss_mib"],
                "server_peak_rss_mib": sampler.peak}
    finally:
        server.terminate()
        server.wait(timeout=30)


def run(ctx):
    quick = ctx.quick
    repeats = 1 if quick else 3
    seconds = 1 if quick else 2
    res = {}
    clients = "1,4" if quick else "1,4,16,64"
    log(f"  serve_bench (iperf3, embstore serve, naive server; clients {clients})")
    res["serve_bench"] = _cpp_bench(ctx, "serve_bench", [
        "--rows", ctx.rows, "--dim", ctx.dim, "--repeats", repeats, "--seconds", seconds,
        "--clients", clients])
    streams = "1,2" if quick else "1,2,4,8"
    log(f"  pull_bench (C++ client, streams {streams}; local path vs memcpy)")
    res["pull_bench"] = _cpp_bench(ctx, "pull_bench", [
        "--rows", ctx.rows, "--dim", ctx.dim, "--streams", streams, "--repeats", repeats,
        "--seconds", seconds])
    table_bytes = ctx.rows * ctx.dim * 4
    res["bytes"] = table_bytes
    with embstore_server(ctx.build, ctx.store) as server:
        # Five rounds for the paired Python/C++ rows: with three, one noisy round on a shared
        # two-core machine moved a one-stream ratio from 1.03 to 0.87 between two runs.
        python_client = _python_client(ctx, server, table_bytes, 1 if quick else 5)
        res["pull_to_file"] = _pull_to_file(ctx, server, table_bytes, repeats)
    res["python_client"] = python_client
    res["arrow_flight"] = _arrow_flight(ctx, table_bytes, repeats)
    return res
