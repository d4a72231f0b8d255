"""A torch.distributed job's start: one rank of R (gloo, one host), loading a table from a server
with local=False three ways, each into what a rank keeps:

  every rank loads all   the whole table, then its Shard(0) rows copied into its DTensor shard
  load_sharded           only its Shard(0) rows, straight into its DTensor shard
  broadcast_load         a quarter, broadcast to the others: a full replica on every rank

Rank 0 reports, for each way, the job's wall time (barrier to barrier, best of the repeats), the
bytes the server sent for one load (embstore_bytes_served_total from its metrics endpoint,
before and after) and the ranks' peak RSS above their resident memory just before the load (the
destination is allocated and touched before the mark is reset; harness.procfs).
"""
import time
import urllib.request

from harness.procfs import peak_rss_mib, reset_peak_rss

WAYS = ("every rank loads all", "load_sharded", "broadcast_load")


def _served_bytes(metrics, table):
    """The server's embstore_bytes_served_total for `table`, once no stream is active: the
    server counts a stream's bytes when the call ends."""
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


def _expected_row(r, dim):
    """Row r as embstore_make_test_table writes it: ((31r + 7c) % 256 - 128) / 4."""
    import torch
    c = torch.arange(dim, dtype=torch.int64)
    return (((r * 31 + c * 7) % 256 - 128) / 4).float()


class _Job:
    """One rank's view of the job: the process group, the mesh and the source."""

    def __init__(self, rank, world, init, target, table):
        # Everything the loads use is imported here, before any clock starts; the imports in
        # the methods below only look the modules up.
        import torch
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        import torch.distributed.tensor  # noqa: F401
        import torch.distributed.tensor._utils  # noqa: F401
        import embstore
        import embstore.torch  # noqa: F401
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method="file://" + init, rank=rank,
                                world_size=world)
        self.rank, self.world, self.table = rank, world, table
        self.mesh = init_device_mesh("cpu", (world,))
        self.src = embstore.Source.resolve(target)
        desc = self.src.describe(table, local=False)
        self.rows, self.dim = desc["rows"], desc["dim"]

    def shard_offset(self, dtensor):
        """(rows, first row) of this rank's shard of `dtensor`."""
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
        (n, _), (first, _) = compute_local_shape_and_global_offset(
            dtensor.shape, self.mesh, dtensor.placements)
        return n, first

    def destination(self, way):
        import torch
        from torch.distributed.tensor import Shard, zeros as dtensor_zeros
        if way == "broadcast_load":
            return torch.zeros(self.rows, self.dim)
        return dtensor_zeros((self.rows, self.dim), device_mesh=self.mesh, placements=[Shard(0)])

    def load(self, way, dest):
        import torch
        import embstore.torch
        if way == "every rank loads all":
            full = torch.empty(self.rows, self.dim)
            embstore.torch.load_into(full, self.src, self.table, local=False)
            n, first = self.shard_offset(dest)
            dest.to_local().copy_(full[first:first + n])
            del full
        elif way == "load_sharded":
            embstore.torch.load_sharded(dest, self.src, self.table, local=False)
        else:
            embstore.torch.broadcast_load(dest, self.src, self.table, local=False)

    def check(self, way, dest):
        """A few rows of every block a rank read or received: the load landed where it should."""
        import torch
        local = dest if way == "broadcast_load" else dest.to_local()
        first = 0 if way == "broadcast_load" else self.shard_offset(dest)[1]
        n = local.shape[0]
        for i in sorted({0, n // 7, n // 3, n // 2, n - 1} |
                        {n * k // self.world for k in range(self.world)}):
            assert torch.equal(local[i], _expected_row(first + i, self.dim)), \
                (way, self.rank, first + i)


def _measure_way(job, way, repeats, metrics):
    """Rank 0: the best of `repeats` loads the way `way` does, with what one load cost the
    server; other ranks: None."""
    import torch
    import torch.distributed as dist
    best = None
    for i in range(repeats):
        dest = job.destination(way)
        dist.barrier()
        before = _served_bytes(metrics, job.table) if job.rank == 0 and i == 0 else 0
        base = reset_peak_rss()
        dist.barrier()
        t0 = time.perf_counter()
        job.load(way, dest)
        dist.barrier()
        seconds = time.perf_counter() - t0
        job.check(way, dest)
        peak = peak_rss_mib()
        peaks = [torch.zeros(2, dtype=torch.float64) for _ in range(job.world)]
        dist.all_gather(peaks, torch.tensor([peak - base, peak], dtype=torch.float64))
        if job.rank == 0:
            if i == 0:  # what one load of the job costs the server
                server_bytes = _served_bytes(metrics, job.table) - before
            r = {"seconds": seconds, "extra_rss_mib": max(float(p[0]) for p in peaks),
                 "peak_rss_mib": max(float(p[1]) for p in peaks),
                 "extra_rss_mib_by_rank": [round(float(p[0]), 1) for p in peaks]}
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        del dest
    return dict(best, server_bytes=server_bytes) if job.rank == 0 else None


def run_rank(rank, world, init, target, metrics, table, repeats):
    """Rank `rank` of `world`, rendezvous through file `init`; loads `table` from server
    `target` (metrics endpoint `metrics`) every way, `repeats` times. Rank 0 returns
    {way: {"seconds", "server_bytes", "extra_rss_mib", "peak_rss_mib",
    "extra_rss_mib_by_rank"}}; the others None."""
    import torch.distributed as dist
    job = _Job(int(rank), int(world), init, target, table)
    out = {way: _measure_way(job, way, int(repeats), metrics) for way in WAYS}
    dist.barrier()
    dist.destroy_process_group()
    return out if job.rank == 0 else None
