"""Phase distributed: what a 4-rank torch.distributed job's start costs, three ways
(harness.contenders.distributed_ranks): every rank loading the whole table, load_sharded and
broadcast_load, from a server with local=False. bench/distributed_bench.py runs the same on its
own."""
import json
import pathlib
import subprocess

from harness.contenders.distributed_ranks import WAYS
from harness.data import SEED_DIM, make_test_table, warm
from harness.processes import child_command, child_env, embstore_server


def measure(build_dir, work_dir, rows, ranks=4, repeats=3):
    """Runs the three ways on a new rows x 128 float32 table under `work_dir`; returns
    {"rows", "dim", "ranks", "table_bytes", "repeats", "ways": {way: {...}}}."""
    build = pathlib.Path(build_dir)
    store = pathlib.Path(work_dir) / "distributed-store"
    store.mkdir(parents=True, exist_ok=True)
    table = store / "seed.emb"
    make_test_table(build, table, rows, SEED_DIM)
    warm(table)  # the server's pages warm, as for a table it serves often
    init = pathlib.Path(work_dir) / "distributed-init"
    init.unlink(missing_ok=True)
    try:
        with embstore_server(build, store, metrics=True) as server:
            env = child_env(OMP_NUM_THREADS="1")
            procs = [subprocess.Popen(child_command("distributed-rank", r, ranks, init,
                                                    server.target, server.metrics_url, "seed",
                                                    repeats),
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
    table_bytes = rows * SEED_DIM * 4
    for r in ways.values():
        r["server_bytes_vs_table"] = r["server_bytes"] / table_bytes
    return {"rows": rows, "dim": SEED_DIM, "ranks": ranks, "table_bytes": table_bytes,
            "repeats": repeats, "ways": ways}


def markdown(res):
    """The Markdown table of one measure() result, with the line that says what was loaded."""
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


def run(ctx):
    return measure(ctx.build, ctx.work, ctx.rows, repeats=1 if ctx.quick else 3)
