"""The comparison of two runs in a report: compare.json (written by `syncopate compare`) read back,
the predicted-vs-measured plot per phase, and report.md's comparison section.

compare.json's rows hold, per epoch (null: the whole run) and worker (null: the mean over the
workers), the seconds of A (predicted) and B (measured) per phase and A's error, as a fraction of
B's total of the same row.
"""

import os

from matplotlib.ticker import MaxNLocator

import plots
import rundir

FORMAT = "syncopate-compare-1"
PHASES = (("compute", "compute_s"), ("exposed communication", "comm_s"), ("idle", "idle_s"),
          ("total", "total_s"))


def read_compare(path):
    """DIR/compare.json as a dict, or None when the directory holds none."""
    file = os.path.join(path, "compare.json")
    if not os.path.isfile(file):
        return None
    data = rundir.read_json(file)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise rundir.RunDirError(f"{file}:1: format: not a comparison (expected {FORMAT})")
    for key in ("a", "b", "rows", "tolerance", "bytes", "passed"):
        if key not in data:
            raise rundir.RunDirError(f"{file}: {key}: missing")
    return data


def epoch_rows(comparison):
    """The rows of each epoch over all workers, in epoch order (the rows the verdict reads)."""
    return sorted((r for r in comparison["rows"] if r["worker"] is None and r["epoch"] is not None),
                  key=lambda r: r["epoch"])


def plot_compare(comparison):
    """One panel per phase: predicted (A) against measured (B) seconds, each worker's epochs and
    each epoch's mean over the workers; the line A = B, and on the total the tolerance band."""
    fig, axes = plots.plt.subplots(2, 2, figsize=(10, 8.5))
    tol = comparison["tolerance"]
    a_kind = "simulated" if comparison["a"].get("backend") == "sim" else "measured"
    b_kind = "simulated" if comparison["b"].get("backend") == "sim" else "measured"
    workers = [r for r in comparison["rows"] if r["worker"] is not None and r["epoch"] is not None]
    means = epoch_rows(comparison)
    for ax, (label, key) in zip(axes.flat, PHASES):
        ax.plot([r["b"][key] for r in workers], [r["a"][key] for r in workers], "o",
                markersize=4, alpha=0.45, color="tab:gray", label="one worker, one epoch")
        ax.plot([r["b"][key] for r in means], [r["a"][key] for r in means], "o",
                color="tab:blue", label="epoch, mean over workers")
        values = [r[s][key] for r in workers + means for s in ("a", "b")]
        top = max(values + [1e-12]) * 1.08
        ax.plot([0, top], [0, top], linestyle=":", color="black", label="predicted = measured")
        if key == "total_s":
            ax.fill_between([0, top], [0, top * (1 - tol)], [0, top * (1 + tol)], color="tab:green",
                            alpha=0.15, label=f"within {100 * tol:g}%")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.yaxis.set_major_locator(MaxNLocator(5))
        ax.set_title(f"{label} per epoch")
        ax.set_xlabel(f"B: {b_kind} seconds")
        ax.set_ylabel(f"A: {a_kind} seconds")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("Predicted (A) vs measured (B), per phase")
    fig.tight_layout()
    return fig


def _percent(error):
    return "-" if error is None else f"{100 * error:+.1f}%"


def compare_section(comparison, save):
    """report.md's lines for a comparison; `save(fig, name)` writes a plot and returns its name."""
    a, b = comparison["a"], comparison["b"]
    verdict = "within the tolerance, bytes equal" if comparison["passed"] else (
        "FAILED: " + ("; ".join(comparison.get("exceeded", [])) or "within the tolerance") +
        ("" if comparison["bytes"]["equal"] else "; the bytes differ"))
    md = ["", "## Comparison: predicted (A) vs measured (B)", "",
          f"- A: `{a['path']}` ({a.get('backend')}{', ' + a['platform'] if a.get('platform') else ''})",
          f"- B: `{b['path']}` ({b.get('backend')}{', ' + b['platform'] if b.get('platform') else ''})",
          f"- tolerance {100 * comparison['tolerance']:g}% of B's epoch time: {verdict}",
          "- errors: (A - B) / B's total of the same epoch, per phase", ""]
    header = ["epoch"]
    for label, _ in PHASES:
        header += [f"{label} A s", f"{label} B s", f"{label} err"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows = epoch_rows(comparison) + [r for r in comparison["rows"]
                                     if r["worker"] is None and r["epoch"] is None]
    for r in rows:
        cells = ["whole run" if r["epoch"] is None else str(r["epoch"])]
        for _, key in PHASES:
            cells += [f"{r['a'][key]:.6g}", f"{r['b'][key]:.6g}", _percent(r["error"][key])]
        lines.append("| " + " | ".join(cells) + " |")
    md += lines
    t = comparison.get("training_time")
    if t:
        md += ["", f"Training time: A {t['a']:.6g} s, B {t['b']:.6g} s ({_percent(t['error'])})."]
    mismatches = comparison["bytes"].get("mismatches", [])
    md += ["", "Bytes: equal." if not mismatches else
           f"Bytes: {len(mismatches)} mismatch(es), e.g. {mismatches[0]}."]
    name = save(plot_compare(comparison), "compare.png")
    md += ["", f"![Predicted vs measured per phase]({name})"]
    return md
