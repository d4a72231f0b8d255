#!/usr/bin/env python3
"""Distributed PyTorch: each rank loads only its part of the table (FSDP2, DDP, DCP).

    torchrun --nproc_per_node 4 examples/torch_distributed.py --source unix:demo/embstore.sock

Three ways to start one job from a table; in each, the job reads the table about once:
  FSDP2  the embedding is built on the meta device and sharded by fully_shard; load_sharded
         fills each rank's rows. No rank ever holds the whole table.
  DDP    the embedding is replicated; broadcast_load has each rank read a quarter of the rows
         and broadcast it to the others.
  DCP    torch.distributed.checkpoint.load fills the sharded model's state dict from the
         table, through embstore.torch.StorageReader.
Run without torchrun, it is a job of one rank.
"""
import os
import socket

from _common import parse_args  # first: it quiets TensorFlow's start-up logging

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

import embstore
import embstore.torch


class Model(torch.nn.Module):
    def __init__(self, rows, dim, emb_device=None):
        super().__init__()
        torch.manual_seed(0)  # the same head on every rank
        self.emb = torch.nn.Embedding(rows, dim, device=emb_device)
        self.head = torch.nn.Linear(dim, 1)

    def forward(self, ids):
        return self.head(self.emb(ids)).sum(-1)


def sharded_model(rows, dim, mesh, device):
    """FSDP2: the embedding is built on the meta device and gets memory after sharding, each
    rank only its own rows (uninitialized until loaded)."""
    model = Model(rows, dim, emb_device="meta")
    fully_shard(model.emb, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.emb.to_empty(device=device)
    return model


def init_distributed(device):
    if "RANK" not in os.environ:  # plain `python`: a job of one rank
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port))
    if device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if device == "cuda" else "gloo")


def main():
    args = parse_args(__doc__.splitlines()[0], extra=lambda ap: ap.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu",
        help="cuda: NCCL, one GPU per rank (default cpu: gloo)"))
    init_distributed(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    # One Source per process: it connects once and describes the table once for all three loads.
    src = embstore.Source.resolve(args.source)
    desc = src.describe(args.table)
    rows, dim = desc["rows"], desc["dim"]
    ids = torch.tensor([0, rows // 2, rows - 1], device=args.device)
    mesh = init_device_mesh(args.device, (world,))

    # FSDP2: each rank reads the rows of its own shard.
    model = sharded_model(rows, dim, mesh, args.device)
    embstore.torch.load_sharded(model.emb.weight, src, args.table)
    shard = model.emb.weight.to_local()
    model(ids).sum().backward()  # a training step would follow
    if rank == 0:
        print(f"FSDP2: rank 0 of {world} holds {tuple(shard.shape)} of {args.table} "
              f"({rows} x {dim})")

    # DDP: the same full weight on every rank, the table read about once by the job.
    model = Model(rows, dim).to(args.device)
    embstore.torch.broadcast_load(model.emb.weight, src, args.table)
    model = DistributedDataParallel(model)
    model(ids).sum().backward()
    if rank == 0:
        print(f"DDP: every rank holds {tuple(model.module.emb.weight.shape)} of {args.table}; "
              f"rank 0 read {rows // world if world > 1 else rows} rows of it")

    # DCP: the sharded model's state dict filled from the table (the head is not a table, so
    # the load is partial).
    model = sharded_model(rows, dim, mesh, args.device)
    state = model.state_dict()
    dcp.load(state, storage_reader=embstore.torch.StorageReader(src, {"emb.weight": args.table}),
             planner=DefaultLoadPlanner(allow_partial_load=True))
    if rank == 0:
        print(f"DCP: emb.weight filled from {args.table}, rank 0 shard "
              f"{tuple(model.emb.weight.to_local().shape)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
