#!/usr/bin/python3
"""paper_at_scale.md and its plot from the runs of analysis/paper_at_scale/run.sh.

    python3 analysis/paper_at_scale/tables.py RUNS --configs configs.txt --md OUT.md
                                              [--png OUT.png] [--note TEXT]...

RUNS holds one run directory per configuration and worker count, named CONFIG-wW, plus
serial-w1 (the baseline of speedup and efficiency). Per run, from summary.json:
  seconds per epoch = total_time_s / epochs (training time: the final average included);
  sync share        = 1 - compute_time_s / (workers x total_time_s): the share of the workers'
                      time not spent computing (communication and waiting on others);
  speedup           = serial seconds per epoch / seconds per epoch; efficiency = speedup / W;
  less time         = 1 - seconds per epoch / ddp-ib's at the same W (the paper's baseline:
                      PyTorch DDP with NCCL over InfiniBand).
The verdict on the paper's two claims uses the criteria written next to it.
"""

import argparse
import json
import os
import re
import sys

BASELINE = "ddp-ib"  # the paper's DDP baseline
CLAIM_LESS_TIME = 0.95  # "up to 95% less training time"
SCALING_EFFICIENCY = 0.5  # "strong scaling to 64 workers": efficiency at 64 at least this
SCALING_WORKERS = 64


def read_configs(path):
    """[(name, arguments)] in file order (comments and blank lines skipped)."""
    configs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, rest = line.partition(" ")
                configs.append((name, rest.strip()))
    return configs


def read_runs(runs_dir):
    """{(config, workers): summary dict} of every finished run (a folder CONFIG-wW)."""
    runs = {}
    for name in sorted(os.listdir(runs_dir)):
        match = re.fullmatch(r"(.+)-w(\d+)", name)
        path = os.path.join(runs_dir, name, "summary.json")
        if match and os.path.isfile(path):
            with open(path) as f:
                runs[(match.group(1), int(match.group(2)))] = json.load(f)
    return runs


def figures(summary, serial_epoch_s):
    """The figures of one run (see the module's docstring)."""
    epoch_s = summary["total_time_s"] / summary["epochs"]
    busy = summary["compute_time_s"] / (summary["workers"] * summary["total_time_s"])
    speedup = serial_epoch_s / epoch_s if serial_epoch_s else None
    return {"epoch_s": epoch_s, "sync_share": 1 - busy, "speedup": speedup,
            "efficiency": speedup / summary["workers"] if speedup else None}


def table_rows(runs, configs):
    """{config: {workers: figures}}, with less_time against BASELINE at the same W."""
    serial = runs.get(("serial", 1))
    serial_epoch_s = serial["total_time_s"] / serial["epochs"] if serial else None
    rows = {}
    for name, _ in configs:
        rows[name] = {w: figures(s, serial_epoch_s) for (c, w), s in sorted(runs.items())
                      if c == name}
    for name in rows:
        for w, f in rows[name].items():
            base = rows.get(BASELINE, {}).get(w)
            f["less_time"] = 1 - f["epoch_s"] / base["epoch_s"] if base else None
    return rows


def best_less_time(rows, baseline=BASELINE):
    """(fraction, config, workers) of the largest reduction of seconds per epoch against
    `baseline` at the same W, among the configurations that are not ddp, or None."""
    best = None
    for name, by_w in rows.items():
        if name.startswith("ddp"):
            continue
        for w, f in by_w.items():
            base = rows.get(baseline, {}).get(w)
            if base:
                less = 1 - f["epoch_s"] / base["epoch_s"]
                if best is None or less > best[0]:
                    best = (less, name, w)
    return best


def scales_to(by_w, workers=SCALING_WORKERS, efficiency=SCALING_EFFICIENCY):
    """Whether a configuration strongly scales to `workers`: its seconds per epoch fall at every
    doubling up to `workers` and its efficiency there is at least `efficiency`."""
    if workers not in by_w or by_w[workers]["efficiency"] is None:
        return False
    ws = sorted(w for w in by_w if w <= workers)
    falling = all(by_w[b]["epoch_s"] < by_w[a]["epoch_s"] for a, b in zip(ws, ws[1:]))
    return falling and by_w[workers]["efficiency"] >= efficiency


def fmt(value, kind):
    if value is None:
        return "-"
    if kind == "s":
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    if kind == "%":
        return f"{100 * value:.0f}%"
    return f"{value:.1f}"


def md_table(rows, configs, key, kind):
    workers = sorted({w for by_w in rows.values() for w in by_w})
    lines = ["| configuration | " + " | ".join(f"W={w}" for w in workers) + " |",
             "|---|" + "---:|" * len(workers)]
    for name, _ in configs:
        cells = [fmt(rows[name].get(w, {}).get(key), kind) for w in workers]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def verdict(rows):
    """The verdict lines on the paper's two claims."""
    lines = []
    for baseline in [name for name in rows if name.startswith("ddp")] or [BASELINE]:
        best = best_less_time(rows, baseline)
        if best is None:
            lines.append(f"- \"Up to 95% less training time\": not assessed (no {baseline} "
                         "runs).")
            continue
        holds = "reproduced" if best[0] >= CLAIM_LESS_TIME - 0.005 else "not reproduced"
        lines.append(f"- \"Up to 95% less training time\" against {baseline} at the same W: "
                     f"{holds}; the largest reduction is {100 * best[0]:.1f}%, by {best[1]} at "
                     f"W={best[2]}.")
    scaling = [name for name, by_w in rows.items() if scales_to(by_w)]
    failing = [name for name, by_w in rows.items() if SCALING_WORKERS in by_w
               and not scales_to(by_w)]
    lines.append(f"- \"Strong scaling to {SCALING_WORKERS} workers\" (criterion: seconds per "
                 f"epoch fall at every doubling up to W={SCALING_WORKERS} and efficiency there "
                 f">= {100 * SCALING_EFFICIENCY:.0f}% of the serial run): holds for "
                 f"{', '.join(scaling) or 'none'}; fails for {', '.join(failing) or 'none'}.")
    return lines


def plot(rows, configs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    panels = (("epoch_s", "seconds per epoch", True), ("sync_share", "sync share", False),
              ("speedup", "speedup vs serial", True), ("efficiency", "efficiency", False))
    for ax, (key, label, log) in zip(axes.flat, panels):
        for i, (name, _) in enumerate(configs):
            points = [(w, f[key]) for w, f in sorted(rows[name].items()) if f[key] is not None]
            if points:
                ax.plot(*zip(*points), marker="os^vD"[i % 5], label=name,
                        color=plt.cm.tab20(i % 20),
                        linestyle="--" if name.startswith("ddp") else "-")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("workers (GPUs)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("paper-nfnet-cinic on mn5-acc, cost-only")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


READING = """\
What the configurations assume. ddp-ib is the paper's baseline, PyTorch DDP with NCCL: gradient
buckets allreduced every step over NVLink inside a node and 4 NDR200 NICs per node across nodes;
ddp-eth runs the same over one 25 GbE NIC per node. sync-allreduce averages the weights once per
epoch (or every 2 or 3) by the same NCCL-like allreduce; sync-master averages them as the paper's
runtime moved them, every model to the master host over its one 25 GbE link and back. async-master
merges each worker's model into a global model that lives on the master: the merges queue one at
a time on the master's link, the model going up and the merged model coming back each time.
async-migrating keeps the global model where the last merge ran (PyCOMPSs moves data to where a
task runs): the next merging worker fetches it from that worker's node over the two nodes' own
25 GbE NICs (from a GPU of its own node: over NVLink) and merges on its own GPU; nothing comes
back. Merges stay one at a time, but each costs one transfer instead of two, none when the
previous merger shares the node, and no one link carries them all. async-migrating-ib is the same
over node links as fast as an NDR200 NIC (25 GB/s)."""


def write_md(rows, configs, path, notes, png):
    lines = ["# The paper at scale: paper-nfnet-cinic on mn5-acc (simulated, cost-only)", ""]
    lines += [f"- {n}" for n in notes]
    lines += ["", "Configurations (the arguments of `syncopate run`):", ""]
    lines += [f"- `{name}`: `{args}`" for name, args in configs]
    lines += ["", READING, "", "## Verdict on the paper's claims", ""] + verdict(rows)
    for title, key, kind in (("Seconds per epoch", "epoch_s", "s"),
                             ("Sync share (time not computing)", "sync_share", "%"),
                             ("Speedup against the serial run (1 GPU, batch 128)", "speedup", "x"),
                             ("Efficiency (speedup / W)", "efficiency", "%"),
                             (f"Less time than {BASELINE} at the same W", "less_time", "%")):
        lines += ["", f"## {title}", ""] + md_table(rows, configs, key, kind)
    if png:
        lines += ["", f"![scaling]({os.path.basename(png)})"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs")
    parser.add_argument("--configs", required=True)
    parser.add_argument("--md", required=True)
    parser.add_argument("--png")
    parser.add_argument("--note", action="append", default=[])
    args = parser.parse_args(argv)
    configs = read_configs(args.configs)
    rows = table_rows(read_runs(args.runs), configs)
    if not any(rows.values()):
        print(f"tables.py: no runs in {args.runs}", file=sys.stderr)
        return 1
    if args.png:
        plot(rows, configs, args.png)
    write_md(rows, configs, args.md, args.note, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
