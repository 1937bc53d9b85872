#!/usr/bin/env python3
"""The strategies-at-scale table from the run folders of run.sh: seconds per step, memory per GPU
(with its parts), bytes, exposed and total communication per step and worker, in markdown.

    table.py RUNS_DIR > strategies_at_scale.md

A strategy whose run was refused (it does not fit the GPU) shows the refusal's first line."""
import json
import math
import os
import sys

# (folder, label) in the table's order.
ROWS = [
    ("ddp", "ddp"),
    ("zero1", "zero, stage 1"),
    ("zero2", "zero, stage 2"),
    ("zero3", "zero, stage 3 (25 MiB units)"),
    ("zero3-200mb", "zero, stage 3 (200 MiB units)"),
    ("local_sgd", "local_sgd, H = 8"),
    ("diloco", "diloco, H = 8"),
    ("epoch_sync", "epoch_sync"),
    ("ddp-bf16", "ddp, compression = bf16"),
    ("ddp-powersgd", "ddp, compression = powersgd, rank 4"),
    ("zero1-bf16", "zero, stage 1, compression = bf16"),
    ("zero3-200mb-bf16", "zero, stage 3 (200 MiB units), compression = bf16"),
]


def gb(n):
    return f"{n / 1e9:.3g}"


def steps_of(summary):
    s = summary["scenario"]
    samples = s["sim"]["cost_only_train_samples"]
    return math.ceil(samples / (summary["workers"] * s["batch_size"])) * summary["epochs"]


def row(label, summary):
    steps, workers = steps_of(summary), summary["workers"]
    per_step_ms = lambda key: 1e3 * summary[key] / workers / steps
    memory = (f"{gb(summary['memory_per_gpu_bytes'])} GB (parameters "
              f"{gb(summary['memory_parameters_bytes'])}, gradients "
              f"{gb(summary['memory_gradients_bytes'])}, optimizer state "
              f"{gb(summary['memory_optimizer_state_bytes'])}, activations "
              f"{gb(summary['memory_activations_bytes'])})")
    return (f"| {label} | {summary['total_time_s'] / steps:.4f} | {memory} | "
            f"{summary['bytes_sent']:.4g} | {per_step_ms('compute_time_s'):.1f} | "
            f"{per_step_ms('comm_time_s'):.1f} | {per_step_ms('comm_total_time_s'):.1f} |")


def main(runs):
    print("| strategy | seconds per step | memory per GPU | bytes sent (all workers) | "
          "compute ms/step | exposed comm ms/step | comm in flight ms/step |")
    print("|---|---|---|---|---|---|---|")
    for folder, label in ROWS:
        path = os.path.join(runs, folder, "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                print(row(label, json.load(f)))
            continue
        log = os.path.join(runs, folder + ".log")
        why = "not run"
        if os.path.exists(log):
            with open(log) as f:
                lines = [line.strip() for line in f if line.strip()]
            why = "refused: " + lines[0].replace("|", "/") if lines else "failed"
        print(f"| {label} | {why} | | | | | |")


if __name__ == "__main__":
    main(sys.argv[1])
