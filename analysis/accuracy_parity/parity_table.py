#!/usr/bin/python3
"""parity.md and parity.png from the runs of an accuracy-parity study (parity.sh).

    python3 analysis/accuracy_parity/parity_table.py RUNS_DIR --out parity.md [--note TEXT]...

RUNS_DIR holds one run directory per configuration: `serial` (one worker) and `<config>-w<W>`
(ddp, epoch_sync, epoch_sync_every2, epoch_async, local_sgd at W workers). For each, worker 0's
test accuracy per epoch (metrics.csv; the model summary.json reports) is compared with the serial
run's and with ddp's at the same worker count, in percentage points.
"""

import argparse
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ("ddp", "epoch_sync", "epoch_sync_every2", "epoch_async", "local_sgd")


def read_run(path):
    """{'config', 'workers', 'accuracy': [per epoch], 'final', 'time_s'} of one run directory."""
    with open(os.path.join(path, "summary.json")) as f:
        summary = json.load(f)
    accuracy = {}
    with open(os.path.join(path, "metrics.csv"), newline="") as f:
        for row in csv.DictReader(f):
            if row["worker"] == "0" and row["test_accuracy"] != "":
                accuracy[int(row["epoch"])] = float(row["test_accuracy"])
    name = os.path.basename(os.path.normpath(path))
    config = name.rsplit("-w", 1)[0] if "-w" in name else name
    return {"config": config, "workers": int(summary["workers"]),
            "accuracy": [accuracy[e] for e in sorted(accuracy)],
            "final": summary.get("final_test_accuracy"), "time_s": summary.get("total_time_s")}


def read_runs(runs_dir):
    runs = []
    for name in sorted(os.listdir(runs_dir)):
        path = os.path.join(runs_dir, name)
        if os.path.isfile(os.path.join(path, "summary.json")):
            runs.append(read_run(path))
    return runs


def points(a, b):
    return "-" if a is None or b is None else f"{100 * (a - b):+.2f}"


def table(runs, serial):
    """The markdown table: one row per configuration and worker count."""
    lines = ["| strategy | workers | final accuracy | best | vs one worker (points) | "
             "vs ddp (points) | simulated s |", "|---|---|---|---|---|---|---|"]
    if serial:
        lines.append(f"| serial | 1 | {serial['final']:.4f} | {max(serial['accuracy']):.4f} | - | - "
                     f"| {serial['time_s']:.4g} |")
    for w in sorted({r["workers"] for r in runs if r["config"] != "serial"}):
        at_w = {r["config"]: r for r in runs if r["workers"] == w and r["config"] != "serial"}
        ddp = at_w.get("ddp")
        for config in sorted(at_w, key=lambda c: ORDER.index(c) if c in ORDER else len(ORDER)):
            r = at_w[config]
            lines.append(
                f"| {config} | {w} | {r['final']:.4f} | {max(r['accuracy']):.4f} | "
                f"{points(r['final'], serial and serial['final'])} | "
                f"{'-' if config == 'ddp' else points(r['final'], ddp and ddp['final'])} | "
                f"{r['time_s']:.4g} |")
    return lines


def gaps(runs, serial):
    """Summary lines: the largest shortfall of the epoch-level strategies against serial and ddp."""
    if not serial:
        return ["- no serial run: gaps against one worker not computed"]
    out = []
    for config in ORDER:
        mine = [r for r in runs if r["config"] == config]
        if not mine:
            continue
        worst = min(mine, key=lambda r: r["final"])
        out.append(f"- {config}: final accuracy {min(r['final'] for r in mine):.4f} to "
                   f"{max(r['final'] for r in mine):.4f} over W = "
                   f"{', '.join(str(r['workers']) for r in sorted(mine, key=lambda r: r['workers']))};"
                   f" largest gap to one worker {points(worst['final'], serial['final'])} points "
                   f"(W = {worst['workers']})")
    return out


def plot(runs, serial, path):
    counts = sorted({r["workers"] for r in runs if r["config"] != "serial"})
    fig, axes = plt.subplots(1, max(1, len(counts)), figsize=(4.5 * max(1, len(counts)), 3.6),
                             sharey=True, squeeze=False)
    for ax, w in zip(axes[0], counts):
        if serial:
            ax.plot(range(1, len(serial["accuracy"]) + 1), serial["accuracy"], "k--",
                    label="one worker")
        for r in sorted((r for r in runs if r["workers"] == w and r["config"] != "serial"),
                        key=lambda r: ORDER.index(r["config"]) if r["config"] in ORDER else 9):
            ax.plot(range(1, len(r["accuracy"]) + 1), r["accuracy"], marker=".", label=r["config"])
        ax.set_title(f"{w} workers")
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (worker 0)")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_dir")
    parser.add_argument("--out", required=True)
    parser.add_argument("--note", action="append", default=[])
    args = parser.parse_args(argv)
    runs = read_runs(args.runs_dir)
    if not runs:
        print(f"parity_table.py: {args.runs_dir}: no run directories", file=sys.stderr)
        return 2
    serial = next((r for r in runs if r["config"] == "serial"), None)
    png = os.path.splitext(args.out)[0] + ".png"
    plot(runs, serial, png)
    lines = ["# Accuracy parity in emulation", ""] + [f"- {n}" for n in args.note] + [""]
    lines += table(runs, serial) + [""] + gaps(runs, serial) + ["", f"![]({os.path.basename(png)})", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
