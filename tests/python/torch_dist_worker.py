"""One rank of the torch.distributed tests (test_torch_distributed.py starts four of these).

    python torch_dist_worker.py RANK WORLD INIT_FILE SCENARIO ARGS_JSON

Joins a gloo process group through a FileStore, runs the scenario's checks and asserts in this
process; prints `ok NAME` after each check and `RESULT {json}` lines for the test to read. Any
failure exits non-zero with its traceback.
"""
import json
import os
import sys
import time
import urllib.request

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor import zeros as dzeros

import embstore
import embstore.torch
from conftest import expected_matrix


def ok(name):
    print(f"ok {name}", flush=True)


def result(**values):
    print("RESULT " + json.dumps(values), flush=True)


def bytes_served(metrics_url, table):
    """embstore_bytes_served_total for `table`, once the server has finished every stream (it
    counts a stream's bytes when the call ends, which can follow the client's last read)."""
    last = None
    deadline = time.monotonic() + 10
    while True:
        text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
        served, active = 0, None
        for line in text.splitlines():
            if line.startswith(f'embstore_bytes_served_total{{table="{table}"}} '):
                served = int(line.split()[-1])
            elif line.startswith("embstore_active_streams "):
                active = int(float(line.split()[-1]))
        if active == 0 and served == last:
            return served
        if time.monotonic() > deadline:
            raise TimeoutError(f"{metrics_url}: streams still active or bytes still changing")
        last = served
        time.sleep(0.1)


def as_torch(ref):
    return torch.from_numpy(np.ascontiguousarray(ref))


def check_dtensor(dt, want, name):
    """The local shard is torch's own split of `want` for the DTensor's placements (computed by
    distribute_tensor, independently of embstore), bit for bit; and the shards together are
    `want` on every rank."""
    local = dt.to_local()
    mine = distribute_tensor(want.to(dt.dtype), dt.device_mesh, dt.placements,
                             src_data_rank=None).to_local()
    assert local.shape == mine.shape, (name, local.shape, mine.shape)
    assert torch.equal(local, mine), name
    full = dt.full_tensor()
    assert torch.equal(full, want.to(dt.dtype)), name
    ok(name)


def scenario_sharded(rank, world, args):
    rows, dim, table = args["rows"], args["dim"], args["table"]
    ref = as_torch(expected_matrix(rows, dim))
    mesh1 = init_device_mesh("cpu", (world,))
    mesh2 = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    cases = [
        ("shard0", mesh1, [Shard(0)], {}),
        ("shard1", mesh1, [Shard(1)], {}),
        ("shard1_chunks", mesh1, [Shard(1)], {"chunk_rows": 300}),
        ("replicate", mesh1, [Replicate()], {}),
        ("mesh2_shard0_shard1", mesh2, [Shard(0), Shard(1)], {}),
        ("mesh2_replicate_shard0", mesh2, [Replicate(), Shard(0)], {}),
        ("mesh2_shard1_replicate", mesh2, [Shard(1), Replicate()], {}),
        ("mesh2_shard0_shard0", mesh2, [Shard(0), Shard(0)], {}),
    ]
    for kind, source, kw in (("file", args["file"], {}),
                             ("server", embstore.Source.resolve(args["server"]), {"local": False})):
        for name, mesh, placements, extra in cases:
            dt = dzeros((rows, dim), device_mesh=mesh, placements=placements)
            assert embstore.torch.load_sharded(dt, source, table, **kw, **extra) is dt
            check_dtensor(dt, ref, f"{kind}/{name}")
        for dtype in (torch.bfloat16, torch.float16):
            for placements in ([Shard(0)], [Shard(1)]):
                dt = dzeros((rows, dim), dtype=dtype, device_mesh=mesh1, placements=placements)
                embstore.torch.load_sharded(dt, source, table, **kw)
                check_dtensor(dt, ref, f"{kind}/{dtype}/{placements[0]}")
        part = dzeros((1000, dim), device_mesh=mesh2, placements=[Shard(0), Shard(1)])
        embstore.torch.load_sharded(part, source, table, rows=(1500, 2500), **kw)
        check_dtensor(part, ref[1500:2500], f"{kind}/rows")

        # FSDP2: fully_shard makes the embedding's weight a Shard(0) DTensor over the mesh.
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(rows, dim), torch.nn.Linear(dim, 3))
        fully_shard(model[0], mesh=mesh1)
        fully_shard(model, mesh=mesh1)
        weight = model[0].weight
        assert weight.placements == (Shard(0),)
        embstore.torch.load_sharded(weight, source, table, **kw)
        check_dtensor(weight, ref, f"{kind}/fsdp2")
        # The forward all-gathers the shards: the embedding computes with the loaded rows.
        seen = []
        hook = model[0].register_forward_hook(lambda mod, inp, out: seen.append(out.detach()))
        ids = torch.tensor([0, 1, rows // 2, rows - 1])
        model(ids)
        hook.remove()
        assert torch.equal(seen[0], ref[ids])
        ok(f"{kind}/fsdp2_forward")

    # Wrong uses fail on the rank, before anything is read.
    with pytest.raises(embstore.errors.InvalidArgumentError, match="not Partial"):
        embstore.torch.load_sharded(dzeros((rows, dim), device_mesh=mesh1,
                                           placements=[Partial()]), args["file"])
    with pytest.raises(embstore.errors.InvalidArgumentError, match=r"\[10, 18\]"):
        embstore.torch.load_sharded(dzeros((10, dim), device_mesh=mesh1, placements=[Shard(0)]),
                                    args["file"])
    with torch.device("meta"):
        emb = torch.nn.Embedding(rows, dim)
    fully_shard(emb, mesh=mesh1)
    with pytest.raises(embstore.errors.InvalidArgumentError, match="meta device"):
        embstore.torch.load_sharded(emb.weight, args["file"])
    ok("wrong_uses")

    # Each rank of a Shard(0) load asks the server for its own rows only: the job reads the
    # table once. Shard(1) reads whole rows on every rank.
    src = embstore.Source.resolve(args["server"])
    served = {}
    for name, placements in (("shard0", [Shard(0)]), ("shard1", [Shard(1)])):
        dist.barrier()
        before = bytes_served(args["metrics"], table) if rank == 0 else 0
        dist.barrier()
        dt = dzeros((rows, dim), device_mesh=mesh1, placements=placements)
        embstore.torch.load_sharded(dt, src, table, local=False)
        dist.barrier()
        if rank == 0:
            served[name] = bytes_served(args["metrics"], table) - before
    if rank == 0:
        result(served=served, table_bytes=rows * dim * 4)


def scenario_dcp(rank, world, args):
    rows, dim, table = args["rows"], args["dim"], args["table"]
    ref = as_torch(expected_matrix(rows, dim))
    mesh1 = init_device_mesh("cpu", (world,))
    mesh2 = init_device_mesh("cpu", (2, world // 2))
    for kind, source, kw in (("file", args["file"], {}),
                             ("server", args["server"], {"local": False})):
        state = {
            "rows": dzeros((rows, dim), device_mesh=mesh1, placements=[Shard(0)]),
            "cols": dzeros((rows, dim), dtype=torch.bfloat16, device_mesh=mesh1,
                           placements=[Shard(1)]),
            "grid": dzeros((rows, dim), device_mesh=mesh2, placements=[Shard(0), Shard(1)]),
            "part": dzeros((1000, dim), dtype=torch.float16, device_mesh=mesh2,
                           placements=[Replicate(), Shard(0)]),
            "nested": {"plain": torch.zeros(rows, dim)},
        }
        reader = embstore.torch.StorageReader(
            source, {"rows": table, "cols": table, "grid": table, "part": (table, (10, 1010)),
                     "nested.plain": table}, chunk_rows=500, **kw)
        assert isinstance(reader, dcp.StorageReader)
        dcp.load(state, storage_reader=reader)
        for key in ("rows", "cols", "grid"):
            check_dtensor(state[key], ref, f"{kind}/dcp/{key}")
        check_dtensor(state["part"], ref[10:1010], f"{kind}/dcp/part")
        assert torch.equal(state["nested"]["plain"], ref)
        ok(f"{kind}/dcp/plain")

        # An FSDP2 model's own state dict: its embedding weight is a Shard(0) DTensor, loaded in
        # place; the other parameters are not tables, so the planner allows a partial load.
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(rows, dim), torch.nn.Linear(dim, 3))
        fully_shard(model[0], mesh=mesh1)
        fully_shard(model, mesh=mesh1)
        bias = model[1].bias.full_tensor().clone()
        sd = model.state_dict()
        dcp.load(sd, storage_reader=embstore.torch.StorageReader(source, {"0.weight": table},
                                                                 **kw),
                 planner=DefaultLoadPlanner(allow_partial_load=True))
        check_dtensor(model[0].weight, ref, f"{kind}/dcp/fsdp2")
        assert torch.equal(model[1].bias.full_tensor(), bias)
        ok(f"{kind}/dcp/fsdp2_others_untouched")

    # Reads follow the ReadItems: for Shard(0), the job reads the table once.
    dist.barrier()
    before = bytes_served(args["metrics"], table) if rank == 0 else 0
    dist.barrier()
    state = {"w": dzeros((rows, dim), device_mesh=mesh1, placements=[Shard(0)])}
    dcp.load(state, storage_reader=embstore.torch.StorageReader(args["server"], {"w": table},
                                                                local=False))
    dist.barrier()
    if rank == 0:
        result(served=bytes_served(args["metrics"], table) - before, table_bytes=rows * dim * 4)


def scenario_broadcast(rank, world, args):
    rows, dim, table = args["rows"], args["dim"], args["table"]
    ref = as_torch(expected_matrix(rows, dim))
    src = embstore.Source.resolve(args["server"])

    dist.barrier()
    before = bytes_served(args["metrics"], table) if rank == 0 else 0
    dist.barrier()
    w = torch.zeros(rows, dim)
    assert embstore.torch.broadcast_load(w, src, table, local=False) is w
    assert torch.equal(w, ref)
    dist.barrier()
    after_broadcast = bytes_served(args["metrics"], table) if rank == 0 else 0
    ok("broadcast")

    # The alternative it replaces: every rank loads the whole table.
    dist.barrier()
    full = torch.zeros(rows, dim)
    embstore.torch.load_into(full, src, table, local=False)
    assert torch.equal(full, ref)
    dist.barrier()
    if rank == 0:
        result(broadcast=after_broadcast - before,
               per_rank_full=bytes_served(args["metrics"], table) - after_broadcast,
               table_bytes=rows * dim * 4)
    ok("per_rank_full")

    # Uneven blocks (3,999 rows over 4 ranks), a narrower dtype, a parameter that needs grads,
    # a file source.
    p = torch.nn.Parameter(torch.zeros(rows - 1, dim, dtype=torch.bfloat16))
    embstore.torch.broadcast_load(p, args["file"], rows=(1, rows))
    assert torch.equal(p.detach(), ref[1:].to(torch.bfloat16))
    ok("broadcast_uneven_bf16")

    # A subgroup: only its members call, and only they are filled.
    sub = dist.new_group([0, 2])
    w = torch.zeros(rows, dim)
    if rank in (0, 2):
        embstore.torch.broadcast_load(w, args["file"], group=sub, chunk_rows=128)
        assert torch.equal(w, ref)
    else:
        assert not w.any()
    ok("broadcast_subgroup")

    # One rank's read fails: it raises its own error and the others hear of it; none hangs.
    w = torch.zeros(rows, dim)
    name = "no_such_table" if rank == 2 else table
    try:
        embstore.torch.broadcast_load(w, src, name, local=False)
    except embstore.errors.NotFoundError as e:
        assert rank == 2, e
    except embstore.errors.FailedPreconditionError as e:
        assert rank != 2 and "[2]" in str(e), e
    else:
        raise AssertionError("broadcast_load did not fail")
    dist.barrier()
    ok("broadcast_failure_reaches_every_rank")


def scenario_save(rank, world, args):
    """embstore.torch.save of sharded and replicated DTensors after a training step: each row
    range written once, a manifest that loads back bit for bit, and errors on every rank."""
    rows, dim, out = args["rows"], args["dim"], args["out"]
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)  # the same module on every rank
    emb = torch.nn.Embedding(rows, dim)
    fully_shard(emb, mesh=mesh)
    opt = torch.optim.SGD(emb.parameters(), lr=0.5)
    emb(torch.tensor([rank, rows - 1 - rank, 1000 + rank])).sum().backward()
    opt.step()
    want = emb.weight.full_tensor().detach()
    keys = [f"w{i}" for i in range(rows)]
    manifest = os.path.join(out, "trained.shards.json")
    r = embstore.torch.save(emb, manifest, keys=keys)
    assert r["shards"] == world and r["written"] == os.path.join(out, f"trained-{rank}.emb"), r
    dist.barrier()
    got = embstore.load(manifest)
    assert np.array_equal(got, want.numpy()), "manifest round trip"
    assert np.array_equal(embstore.load(manifest, keys=["w5", f"w{rows - 1}"]),
                          want.numpy()[[5, rows - 1]])
    back = dzeros((rows, dim), device_mesh=mesh, placements=[Shard(0)])
    embstore.torch.load_sharded(back, manifest)
    assert torch.equal(back.full_tensor(), want)
    ok("save_fsdp2")

    # Replicated: the full table is written once, by rank 0.
    rep = distribute_tensor(want, mesh, [Replicate()])
    r = embstore.torch.save(rep, os.path.join(out, "rep.shards.json"), dtype="bf16")
    assert r["shards"] == 1 and (r["written"] is not None) == (rank == 0), r
    dist.barrier()
    assert np.array_equal(embstore.load(os.path.join(out, "rep.shards.json"), dtype="float32"),
                          want.to(torch.bfloat16).float().numpy())
    ok("save_replicated")

    # An existing manifest without force=True: every rank refuses, nothing is written.
    before = sorted(os.listdir(out))
    dist.barrier()
    with pytest.raises(embstore.errors.AlreadyExistsError, match="force=True"):
        embstore.torch.save(emb, manifest)
    dist.barrier()
    assert sorted(os.listdir(out)) == before
    # One rank's rows fail (a value too large for f16 on rank 1 only): every rank raises, rank 1
    # its own error, the others naming it; no manifest, and no shard left behind.
    bad = distribute_tensor(want.clone(), mesh, [Shard(0)])
    if rank == 1:
        bad.to_local()[3, 2] = 1e6
    with pytest.raises((embstore.errors.OutOfRangeError, embstore.errors.FailedPreconditionError)) as e:
        embstore.torch.save(bad, os.path.join(out, "bad.shards.json"), dtype="f16")
    assert ("too large for F16" in str(e.value)) if rank == 1 else "[1]" in str(e.value), e.value
    dist.barrier()
    assert not [f for f in os.listdir(out) if f.startswith("bad")], os.listdir(out)
    ok("save_failure_reaches_every_rank")


def main():
    rank, world, init_file, scenario, raw = sys.argv[1:6]
    rank, world = int(rank), int(world)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        globals()[f"scenario_{scenario}"](rank, world, json.loads(raw))
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
