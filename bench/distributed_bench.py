#!/usr/bin/env python3
"""Distributed loads (issue #15): four torch.distributed ranks (gloo, one host) start from the
seed-sized table (938,280 x 128 float32) on a server, read with local=False, three ways:

  every rank loads all   each rank loads the whole table, then keeps its Shard(0) rows
  load_sharded           each rank reads only its Shard(0) rows into its DTensor shard
  broadcast_load         each rank reads a quarter and broadcasts it: a full replica everywhere

    .venv/bin/python bench/distributed_bench.py [--rows N] [--ranks R] [--build-dir DIR]

For each way: the job's wall time (first rank in to last rank out, best of --repeats), the bytes
the server sent (embstore_bytes_served_total, read from its metrics endpoint before and after),
and each rank's peak RSS above its resident memory just before the load (VmHWM, reset through
/proc/self/clear_refs; the destination tensor is allocated and touched before that), the largest
over the ranks. Prints a Markdown table and the JSON it came from. bench/run.py can call
measure(build_dir, work_dir, rows).
"""
import argparse
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]

DIM = 128
WAYS = ("every rank loads all", "load_sharded", "broadcast_load")

CHILD = r"""
import json, sys, time, urllib.request
rank, world, init, target, metrics, table, repeats = sys.argv[1:8]
rank, world, repeats = int(rank), int(world), int(repeats)
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, zeros as dzeros
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
import embstore, embstore.torch
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world)
mesh = init_device_mesh("cpu", (world,))
src = embstore.Source.resolve(target)
desc = src.describe(table, local=False)
rows, dim = desc["rows"], desc["dim"]

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024.0

def served():
    # The server counts a stream's bytes when the call ends; wait until none is active.
    last = None
    while True:
        served, active = 0, None
        for line in urllib.request.urlopen(metrics, timeout=5).read().decode().splitlines():
            if line.startswith('embstore_bytes_served_total{table="%s"} ' % table):
                served = int(line.split()[-1])
            elif line.startswith("embstore_active_streams "):
                active = int(float(line.split()[-1]))
        if active == 0 and served == last:
            return served
        last = served
        time.sleep(0.1)

def every_rank_loads_all(dt):
    full = torch.empty(rows, dim)
    embstore.torch.load_into(full, src, table, local=False)
    (n, _), (r0, _) = compute_local_shape_and_global_offset(dt.shape, mesh, dt.placements)
    dt.to_local().copy_(full[r0:r0 + n])
    del full

def sharded(dt):
    embstore.torch.load_sharded(dt, src, table, local=False)

def broadcast(t):
    embstore.torch.broadcast_load(t, src, table, local=False)

def expected(r):  # the values embstore_make_test_table writes
    c = torch.arange(dim, dtype=torch.int64)
    return (((r * 31 + c * 7) % 256 - 128) / 4).float()

def check(way, dest):
    # A few rows of every block a rank read or received: the load landed where it should.
    local = dest if way == "broadcast_load" else dest.to_local()
    if way == "broadcast_load":
        first = 0
    else:
        first = compute_local_shape_and_global_offset(dest.shape, mesh, dest.placements)[1][0]
    n = local.shape[0]
    for i in sorted({0, n // 7, n // 3, n // 2, n - 1} | {n * k // world for k in range(world)}):
        assert torch.equal(local[i], expected(first + i)), (way, rank, first + i)

out = {}
for way, fn in (("every rank loads all", every_rank_loads_all), ("load_sharded", sharded),
                ("broadcast_load", broadcast)):
    best = None
    for i in range(repeats):
        if way == "broadcast_load":
            dest = torch.zeros(rows, dim)
        else:
            dest = dzeros((rows, dim), device_mesh=mesh, placements=[Shard(0)])
        dist.barrier()
        before = served() if rank == 0 and i == 0 else 0
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = status("VmHWM")
        dist.barrier()
        t0 = time.perf_counter()
        fn(dest)
        dist.barrier()
        seconds = time.perf_counter() - t0
        check(way, dest)
        extra = torch.tensor([status("VmHWM") - base, status("VmHWM")], dtype=torch.float64)
        peaks = [torch.zeros(2, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(peaks, extra)
        if rank == 0:
            if i == 0:  # what one load of the job costs the server
                server_bytes = served() - before
            r = {"seconds": seconds, "extra_rss_mib": max(float(p[0]) for p in peaks),
                 "peak_rss_mib": max(float(p[1]) for p in peaks),
                 "extra_rss_mib_by_rank": [round(float(p[0]), 1) for p in peaks]}
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        del dest
    if rank == 0:
        out[way] = dict(best, server_bytes=server_bytes)
dist.barrier()
if rank == 0:
    print(json.dumps(out))
dist.destroy_process_group()
"""


def find_build_dir(explicit=None):
    cands = [explicit] if explicit else []
    if os.environ.get("EMBSTORE_BUILD_DIR"):
        cands.append(os.environ["EMBSTORE_BUILD_DIR"])
    cands += [ROOT / "build" / d for d in ("release", "bench", "dev")]
    for c in cands:
        c = pathlib.Path(c)
        if (c / "cli" / "embstore").exists() and (c / "tests" / "embstore_make_test_table").exists():
            return c
    sys.exit("distributed_bench.py: no build dir holds cli/embstore and "
             "tests/embstore_make_test_table; build them or pass --build-dir")


@contextlib.contextmanager
def server_with_metrics(build, store):
    """`embstore serve` on free loopback ports; yields (target, metrics URL)."""
    proc = subprocess.Popen([str(build / "cli" / "embstore"), "serve", "--store", str(store),
                             "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        listening = None
        for line in proc.stderr:
            with contextlib.suppress(ValueError):
                j = json.loads(line)
                if j.get("msg") == "listening":
                    listening = j
                    break
        if listening is None:
            raise RuntimeError("embstore serve did not report listening")
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        yield (listening["addresses"][0],
               f"http://127.0.0.1:{listening['metrics_port']}/metrics")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def measure(build_dir, work_dir, rows, ranks=4, repeats=3):
    """Runs the three ways on a new rows x 128 float32 table under `work_dir`; returns
    {"rows", "dim", "ranks", "table_bytes", "ways": {way: {...}}}."""
    build = pathlib.Path(build_dir)
    store = pathlib.Path(work_dir) / "distributed-store"
    store.mkdir(parents=True, exist_ok=True)
    table = store / "seed.emb"
    subprocess.run([str(build / "tests" / "embstore_make_test_table"), str(table), "--rows",
                    str(rows), "--dim", str(DIM), "--force"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(table, "rb") as f:  # the server's pages warm, as for a table it serves often
        while f.read(1 << 24):
            pass
    init = pathlib.Path(work_dir) / "distributed-init"
    init.unlink(missing_ok=True)
    try:
        with server_with_metrics(build, store) as (target, metrics):
            env = dict(os.environ, OMP_NUM_THREADS="1")
            procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(r), str(ranks), str(init),
                                       target, metrics, "seed", str(repeats)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env)
                     for r in range(ranks)]
            outs = [p.communicate(timeout=1200) for p in procs]
        for r, (p, (out, err)) in enumerate(zip(procs, outs)):
            if p.returncode != 0:
                raise RuntimeError(f"rank {r} failed (exit {p.returncode}):\n{err[-4000:]}")
        ways = json.loads(outs[0][0].strip().splitlines()[-1])
    finally:
        table.unlink(missing_ok=True)
        init.unlink(missing_ok=True)
    table_bytes = rows * DIM * 4
    for r in ways.values():
        r["server_bytes_vs_table"] = r["server_bytes"] / table_bytes
    return {"rows": rows, "dim": DIM, "ranks": ranks, "table_bytes": table_bytes,
            "repeats": repeats, "ways": ways}


def markdown(res):
    lines = [f"{res['ranks']} ranks, {res['rows']:,} x {res['dim']} float32 "
             f"({res['table_bytes'] / 2**20:.0f} MiB), server, local=False",
             "",
             "| way | wall time | server sent | vs table | peak RSS above start, per rank "
             "(largest) | peak RSS (largest) |",
             "|---|---:|---:|---:|---:|---:|"]
    for way in WAYS:
        r = res["ways"][way]
        lines.append(f"| {way} | {r['seconds']:.2f} s | {r['server_bytes'] / 2**20:,.0f} MiB | "
                     f"{r['server_bytes_vs_table']:.2f}x | {r['extra_rss_mib']:,.0f} MiB | "
                     f"{r['peak_rss_mib']:,.0f} MiB |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=938_280)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build-dir")
    args = ap.parse_args()
    build = find_build_dir(args.build_dir)
    shm = pathlib.Path("/dev/shm")
    with tempfile.TemporaryDirectory(prefix="embstore-distributed-",
                                     dir=shm if shm.is_dir() else None) as work:
        res = measure(build, work, args.rows, args.ranks, args.repeats)
    print("\n".join(markdown(res)))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
