#!/usr/bin/python3
"""PyTorch peer for Syncopate's ddp / epoch_sync strategies (CPU, gloo, Fashion-MNIST, mlp).

Launch (two processes through torch.multiprocessing.spawn; torchrun crashes on Debian's python):
  /usr/bin/python3 bench/peer/ddp_torch.py --mode ddp --epochs 3
  /usr/bin/python3 bench/peer/ddp_torch.py --mode epoch_sync --epochs 3
Prints one JSON line on rank 0:
  {"mode", "world_size", "seconds_per_epoch" (median over epochs, training only, including the
   epoch-end parameter averaging of epoch_sync), "final_test_accuracy", ...}

Data split per epoch, as DistributedSampler does: a seeded permutation of the training set, rank r
takes positions r, r + W, r + 2W, ... of it. Batch size is per rank (global batch = W x batch).
  ddp:        DistributedDataParallel, gradients averaged every batch.
  epoch_sync: each rank trains its own replica on its share; at each epoch end the parameters are
              averaged with one allreduce (sum / W). Optimizer state is kept local.
"""
import argparse
import gzip
import json
import os
import socket
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def load_idx(name, offset):
    with gzip.open(os.path.join(DATA_DIR, name), "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load_split(prefix):
    # IDX: images have a 16-byte header, labels an 8-byte header. Pixels scaled to [0, 1].
    x = load_idx(f"{prefix}-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
    y = load_idx(f"{prefix}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def make_mlp():
    # The `mlp` of Syncopate's model zoo: 784-256-128-10 with ReLU.
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum())
                      for i in range(0, len(x), 1000))
    model.train()
    return correct / len(x)


def average_parameters(model, world_size):
    with torch.no_grad():
        for p in model.parameters():
            dist.all_reduce(p.data, op=dist.ReduceOp.SUM)
            p.data.div_(world_size)


def worker(rank, args, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    x_train, y_train = load_split("train")
    x_test, y_test = load_split("t10k")

    torch.manual_seed(args.seed)  # same initial model on every rank
    model = make_mlp()
    net = nn.parallel.DistributedDataParallel(model) if args.mode == "ddp" else model
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    epoch_seconds = []
    for epoch in range(args.epochs):
        perm = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(args.seed +
                                                                                  epoch))
        mine = perm[rank::args.world_size]
        dist.barrier()
        start = time.perf_counter()
        for b in range(0, len(mine), args.batch_size):
            idx = mine[b:b + args.batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss_fn(net(x_train[idx]), y_train[idx]).backward()
            optimizer.step()
        if args.mode == "epoch_sync":
            average_parameters(model, args.world_size)
        epoch_seconds.append(time.perf_counter() - start)

    if rank == 0:
        print(json.dumps({
            "mode": args.mode,
            "world_size": args.world_size,
            "epochs": args.epochs,
            "batch_size_per_rank": args.batch_size,
            "lr": args.lr,
            "seconds_per_epoch": statistics.median(epoch_seconds),
            "epoch_seconds": epoch_seconds,
            "final_test_accuracy": accuracy(model, x_test, y_test),
        }), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["ddp", "epoch_sync"], required=True)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    mp.spawn(worker, args=(args, free_port()), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
