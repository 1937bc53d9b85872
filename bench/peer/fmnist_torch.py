#!/usr/bin/python3
"""PyTorch peer for bench_kernels: trains the zoo's mlp or cnn on Fashion-MNIST, one thread.

    /usr/bin/python3 bench/peer/fmnist_torch.py --model mlp|cnn --epochs 1 --batch 64

Same architectures as core/nn/zoo.cpp, SGD lr 0.05 momentum 0.9, softmax cross-entropy. The data
(Debian's dataset-fashion-mnist gz files) is read with gzip + numpy and kept in memory as
tensors; each epoch draws a random permutation and slices batches from it (the last batch is
partial, so an epoch is ceil(60000 / batch) steps). Only the training loop is timed. Prints JSON:
{model, seconds_per_epoch (wall, median over epochs), cpu_seconds_per_epoch, test_accuracy, ...}.
"""
import argparse
import gzip
import json
import os
import statistics
import struct
import time

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(split, data_dir):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    raise SystemExit(f"--model {name}: unknown; allowed: mlp, cnn")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", default=DATA_DIR)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)
    x_train, y_train = load("train", args.data)
    x_test, y_test = load("test", args.data)
    model = make_model(args.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    generator = torch.Generator().manual_seed(args.seed)
    n = x_train.shape[0]

    epoch_seconds, epoch_cpu_seconds = [], []
    for _ in range(args.epochs):
        model.train()
        start, start_cpu = time.perf_counter(), time.process_time()
        order = torch.randperm(n, generator=generator)
        for first in range(0, n, args.batch):
            idx = order[first:first + args.batch]
            xb, yb = x_train[idx], y_train[idx]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
        epoch_seconds.append(time.perf_counter() - start)
        epoch_cpu_seconds.append(time.process_time() - start_cpu)

    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, x_test.shape[0], 1000):
            logits = model(x_test[first:first + 1000])
            correct += (logits.argmax(1) == y_test[first:first + 1000]).sum().item()
    print(json.dumps({
        "model": args.model,
        "seconds_per_epoch": statistics.median(epoch_seconds),
        # CPU time of this process: the fairer figure on a machine shared with other jobs.
        "cpu_seconds_per_epoch": statistics.median(epoch_cpu_seconds),
        "test_accuracy": correct / x_test.shape[0],
        "epochs": args.epochs,
        "batch": args.batch,
        "steps_per_epoch": (n + args.batch - 1) // args.batch,
        "epoch_seconds": epoch_seconds,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
