#!/usr/bin/python3
"""collectives.md and collectives.png: simulated against measured collectives.

    python3 analysis/validation/collectives.py CSV_DIR --out collectives.md [--check]
                                               [--target-median PCT] [--note T]...

CSV_DIR holds `sim-<W>.csv` and `mpi-<W>.csv` pairs written by `syncopate collectives` (one row
per collective and size), or several trials of a pair, `sim-<W>.<K>.csv` and `mpi-<W>.<K>.csv`,
whose times are joined by their median. Each row's error is (simulated - measured) / measured
of the median seconds per call. With trials, the summary also gives each side's spread: every
trial's time against its row's median over the trials (the measured side: how the machine
repeats itself; the simulated side: how its calibrations do). --check: exit 1 when the median
|error| over all rows exceeds the target (--target-median, default the issue's 10%).
"""

import argparse
import csv
import os
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from summarize import percent  # noqa: E402

TARGET_MEDIAN = 0.10  # the target for the collectives
OPS = ("allreduce", "broadcast", "allgather")


def read_csv(path):
    with open(path, newline="") as f:
        return {(r["op"], int(r["bytes"])): r for r in csv.DictReader(f)}


def median_row(rows):
    """One row of several trials' rows: the median of their medians; p10 and p90 the lowest and
    highest over the trials."""
    row = dict(rows[0])
    row["trials_s"] = [float(r["median_s"]) for r in rows]
    row["median_s"] = statistics.median(row["trials_s"])
    row["p10_s"] = min(float(r["p10_s"]) for r in rows)
    row["p90_s"] = max(float(r["p90_s"]) for r in rows)
    return row


def read_pairs(csv_dir):
    """{ranks: [(op, bytes, simulated row, measured row)]} for every size both sides have.

    A rank count's pair is `sim-<W>.csv` and `mpi-<W>.csv`, or trials `sim-<W>.<K>.csv` and
    `mpi-<W>.<K>.csv` (K = 1, 2, ...), whose rows are joined by median_row."""
    trials = {}
    for name in sorted(os.listdir(csv_dir)):
        match = re.fullmatch(r"sim-(\d+)((?:\.\d+)?)\.csv", name)
        if not match:
            continue
        measured = os.path.join(csv_dir, f"mpi-{match.group(1)}{match.group(2)}.csv")
        if not os.path.isfile(measured):
            continue
        ranks = int(match.group(1))
        if ranks in trials and bool(match.group(2)) != trials[ranks][0]:
            raise ValueError(f"{ranks} ranks both as one pair and as trials; keep one")
        sim, mpi = read_csv(os.path.join(csv_dir, name)), read_csv(measured)
        for k in (k for k in sim if k in mpi):
            if wire(sim[k]) != wire(mpi[k]):
                raise ValueError(f"{name} and {os.path.basename(measured)}: {k[0]} of {k[1]} B "
                                 f"sends {wire(sim[k])} in one and {wire(mpi[k])} in the other")
        trials.setdefault(ranks, (bool(match.group(2)), []))[1].append((sim, mpi))
    pairs = {}
    for ranks, (_, runs) in trials.items():
        keys = set.intersection(*(set(sim) & set(mpi) for sim, mpi in runs))
        keys = sorted(keys, key=lambda k: (OPS.index(k[0]), k[1]))
        pairs[ranks] = [(op, size, median_row([sim[(op, size)] for sim, _ in runs]),
                         median_row([mpi[(op, size)] for _, mpi in runs])) for op, size in keys]
    return pairs


def wire(row):
    """What the row's collective sent (CSV files before the column: fp32)."""
    return row.get("wire") or "fp32"


def error(sim_row, mpi_row):
    return float(sim_row["median_s"]) / float(mpi_row["median_s"]) - 1


def size_label(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def table(ranks, rows):
    wires = sorted({wire(sim) for _, _, sim, _ in rows} - {"fp32"})
    lines = [f"### {ranks} ranks" + (f", {' and '.join(wires)} on the wire" if wires else ""), "",
             "| collective | size | algorithm | simulated µs | measured µs (p10 – p90) | error |",
             "|---|---|---|---|---|---|"]
    for op, size, sim, mpi in rows:
        lines.append(f"| {op} | {size_label(size)} | {sim['algorithm'] or '-'} | "
                     f"{1e6 * float(sim['median_s']):.1f} | {1e6 * float(mpi['median_s']):.1f} "
                     f"({1e6 * float(mpi['p10_s']):.1f} – {1e6 * float(mpi['p90_s']):.1f}) | "
                     f"{100 * error(sim, mpi):+.1f}% |")
    return lines + [""]


def trial_errors(row):
    """Each trial's time against the row's median over the trials, (trial - median) / median;
    of an odd count, the middle trial (the median itself) left out."""
    trials = sorted(row.get("trials_s", []))
    if len(trials) < 2:
        return []
    middle = len(trials) // 2 if len(trials) % 2 else None
    return [t / row["median_s"] - 1 for k, t in enumerate(trials) if k != middle]


def summary(pairs, target=TARGET_MEDIAN):
    """(lines, median |error| over every row), against the median's target (a fraction)."""
    every = [abs(error(s, m)) for rows in pairs.values() for _, _, s, m in rows]
    lines = ["| rows | median abs. error | worst | target (median) | met |", "|---|---|---|---|---|"]
    lines.append(f"| all ({len(every)}) | {100 * statistics.median(every):.1f}% | "
                 f"{100 * max(every):.1f}% | {100 * target:g}% | "
                 f"{'yes' if statistics.median(every) <= target else 'no'} |")
    for ranks, rows in sorted(pairs.items()):
        for op in OPS:
            errs = [abs(error(s, m)) for o, _, s, m in rows if o == op]
            if errs:
                lines.append(f"| {op}, {ranks} ranks | {100 * statistics.median(errs):.1f}% | "
                             f"{100 * max(errs):.1f}% | | |")
    for side, index in (("measured", 3), ("simulated", 2)):
        spread = [abs(e) for rows in pairs.values() for row in rows
                  for e in trial_errors(row[index])]
        if spread:
            lines.append(f"| {side} trials against their row's median ({len(spread)}) | "
                         f"{100 * statistics.median(spread):.1f}% | {100 * max(spread):.1f}% | "
                         "| |")
    return lines + [""], statistics.median(every)


def plot(pairs, path):
    fig, axes = plt.subplots(1, len(OPS), figsize=(13, 3.8), squeeze=False)
    for ax, op in zip(axes[0], OPS):
        for ranks, rows in sorted(pairs.items()):
            mine = [(size, s, m) for o, size, s, m in rows if o == op]
            if not mine:
                continue
            sizes = [size for size, _, _ in mine]
            line, = ax.plot(sizes, [float(s["median_s"]) for _, s, _ in mine], "-",
                            label=f"simulated, {ranks} ranks")
            medians = [float(m["median_s"]) for _, _, m in mine]
            low = [med - float(m["p10_s"]) for med, (_, _, m) in zip(medians, mine)]
            high = [float(m["p90_s"]) - med for med, (_, _, m) in zip(medians, mine)]
            ax.errorbar(sizes, medians, yerr=[low, high], fmt="o", color=line.get_color(),
                        ms=3, capsize=2, label=f"measured, {ranks} ranks (p10 – p90)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xlabel("bytes")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("seconds per call")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv_dir")
    parser.add_argument("--out", required=True)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--target-median", type=percent, default=100 * TARGET_MEDIAN,
                        help="the median |error|'s target in percent (default %(default)g)")
    parser.add_argument("--note", action="append", default=[])
    args = parser.parse_args(argv)
    target = args.target_median / 100
    try:
        pairs = read_pairs(args.csv_dir)
    except ValueError as e:
        print(f"collectives.py: {args.csv_dir}: {e}", file=sys.stderr)
        return 2
    if not any(pairs.values()):
        print(f"collectives.py: {args.csv_dir}: no sim-W.csv / mpi-W.csv pair", file=sys.stderr)
        return 2
    png = os.path.splitext(args.out)[0] + ".png"
    plot(pairs, png)
    summary_lines, median = summary(pairs, target)
    lines = ["# Collectives: simulated vs measured", ""] + [f"- {n}" for n in args.note] + [""]
    lines += summary_lines
    for ranks, rows in sorted(pairs.items()):
        lines += table(ranks, rows)
    lines += [f"![]({os.path.basename(png)})", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    if args.check and median > target:
        print(f"collectives.py: median error {100 * median:.1f}% exceeds the target "
              f"{100 * target:g}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
