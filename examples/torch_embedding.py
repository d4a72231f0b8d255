#!/usr/bin/env python3
"""A PyTorch nn.Embedding whose weight comes from embstore.

    python examples/torch_embedding.py --source unix:demo/embstore.sock --table sample
"""
from _common import parse_args  # first: it quiets TensorFlow's start-up logging

import torch

import embstore.torch


def main():
    args = parse_args(__doc__.splitlines()[0])
    emb = embstore.torch.embedding(args.source, args.table, freeze=True)
    out = emb(torch.tensor([0, 1, 2]))
    print(f"nn.Embedding {tuple(emb.weight.shape)} from {args.source}; lookup -> {tuple(out.shape)}")


if __name__ == "__main__":
    main()
