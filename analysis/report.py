#!/usr/bin/python3
"""syncopate report: report.md and PNG plots for a run directory or a sweep directory.

    python3 analysis/report.py RUN_OR_SWEEP_DIR [--out DIR] [--baseline RUN]

Writes report.md and its plots into the directory itself (or --out). A directory that holds a
compare.json (`syncopate compare`) gets its comparison section and compare.png as well; one that
holds only a compare.json gets that section alone. Exit 2 on bad arguments or a directory that is
neither a run nor a sweep nor a comparison.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare  # noqa: E402
import plots  # noqa: E402
import rundir  # noqa: E402


def fmt(value):
    """Numbers as the report prints them: 6 significant digits; absent values as '-'."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def save(fig, out_dir, name):
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plots.plt.close(fig)
    return name


def mean_phases(run):
    n = max(1, len(run.metrics))
    compute, comm, idle = run.phase_totals()
    return {"compute_s": compute / n, "comm_s": comm / n, "idle_s": idle / n}


def fault_rows(summary):
    """The [[sim.faults]] of the run's scenario: (kind, target, when, factor) each."""
    faults = ((summary.get("scenario") or {}).get("sim") or {}).get("faults") or []
    rows = []
    for f in faults:
        target = f"link {f['link']}" if "link" in f else f"worker {f.get('worker')}"
        when = (f"at {fmt(f['at_s'])} s" if "at_s" in f
                else f"[{fmt(f.get('from_s'))}, {fmt(f.get('until_s'))}) s")
        rows.append((f.get("kind"), target, when, f.get("factor")))
    return rows


def lost_worker_rows(summary):
    """The workers an elastic run lost (summary.json's lost_workers): (worker, kind, when,
    lost work) each, the lost work being the seconds since the worker's last finished epoch."""
    return [(w.get("worker"), w.get("kind"), f"at {fmt(w.get('at_s'))} s",
             f"{fmt(w.get('lost_seconds'))} s") for w in summary.get("lost_workers") or []]


def restart_rows(summary):
    """The restarts after faults (summary.json's restarts): (fault, target, when, resumed from,
    work lost, recovery, relaunched at) each."""
    rows = []
    for r in summary.get("restarts") or []:
        target = f"link {r['link']}" if "link" in r else f"worker {r.get('worker')}"
        start = r.get("resumed_from_s")
        rows.append((r.get("kind"), target, f"at {fmt(r.get('at_s'))} s",
                     "the start" if not start else f"checkpoint of {fmt(start)} s",
                     f"{fmt(r.get('lost_seconds'))} s", f"{fmt(r.get('recovery_s'))} s",
                     f"{fmt(r.get('restart_s'))} s"))
    return rows


# Keys that may differ between a run and its fault-free baseline: the faults themselves and what
# only they read, and the checkpoints (which change no result).
FAULT_ONLY_KEYS = {("name",), ("sim", "faults"), ("sim", "fault_blocks"), ("sim", "restart"),
                   ("checkpoint",)}


def scenario_difference(a, b, path=()):
    """The first key (dotted) where scenarios a and b differ outside FAULT_ONLY_KEYS, or None."""
    if path in FAULT_ONLY_KEYS:
        return None
    if isinstance(a, dict) or isinstance(b, dict):
        a, b = {} if a is None else a, {} if b is None else b  # an absent table: empty
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return ".".join(path)
        for key in sorted(set(a) | set(b)):
            diff = scenario_difference(a.get(key), b.get(key), path + (key,))
            if diff:
                return diff
        return None
    return None if a == b else ".".join(path)


def baseline_section(run, baseline):
    """What the faults cost against a fault-free run of the same scenario: time and accuracy."""
    s, b = run.summary, baseline.summary
    diff = scenario_difference(s.get("scenario") or {}, b.get("scenario") or {})
    if diff:
        raise rundir.RunDirError(
            f"--baseline {baseline.path}: not the same scenario as {run.path} (they differ in "
            f"{diff}; only sim.faults, sim.restart, sim.fault_blocks and checkpoint may)")

    def lost(value, base, more_is_worse=True):
        if value is None or base is None:
            return None
        return value - base if more_is_worse else base - value

    kind = run.time_kind
    rows = [(f"training time ({kind} s)", s.get("total_time_s"), b.get("total_time_s"),
             lost(s.get("total_time_s"), b.get("total_time_s"))),
            ("final test accuracy", s.get("final_test_accuracy"), b.get("final_test_accuracy"),
             lost(s.get("final_test_accuracy"), b.get("final_test_accuracy"), False))]
    tta, base_tta = run.time_to_accuracy(), baseline.time_to_accuracy()
    for target in sorted(set(tta) | set(base_tta)):
        rows.append((f"time to accuracy {fmt(target)} ({kind} s)", tta.get(target),
                     base_tta.get(target), lost(tta.get(target), base_tta.get(target))))
    return ["", "## Lost to faults", "",
            f"Against `{baseline.path}`, the same scenario without the faults: time lost is this "
            "run's figure minus the baseline's, accuracy lost the baseline's minus this run's "
            "('-' where either is absent, e.g. a target never reached).", "",
            table(["against the baseline", "this run", "baseline", "lost"], rows)]


def run_report(run, out_dir, baseline=None):
    s = run.summary
    kind = run.time_kind
    md = [f"# Run report: {s.get('name', os.path.basename(run.path))}", ""]
    md.append(table(["figure", "value"], [
        ("backend", s.get("backend")), ("strategy", s.get("strategy")),
        ("platform", s.get("platform") or "-"), ("workers", s.get("workers")),
        ("epochs", s.get("epochs")), ("seed", s.get("seed")),
        ("final test accuracy", s.get("final_test_accuracy")),
        *[(f"final {name}", s.get(f"final_{key}")) for key, name in plots.REGRESSION_ERRORS
          if s.get(f"final_{key}") is not None],
        (f"training time ({kind} s)", s.get("total_time_s")),
        ("compute time (s, summed over workers)", s.get("compute_time_s")),
        ("communication time (s, summed over workers)", s.get("comm_time_s")),
        ("idle time (s, summed over workers)", s.get("idle_time_s")),
        ("bytes sent (all workers)", s.get("bytes_sent")),
        ("bytes received (all workers)", s.get("bytes_recv")),
    ]))
    faults = fault_rows(s)
    if faults:
        md += ["", "## Faults (sim.faults)", "",
               "The run completed under these faults; the time and accuracy they cost are the "
               "difference to the same scenario without them (`syncopate report RUN --baseline "
               "FAULT_FREE_RUN`, or `syncopate compare`).", "",
               table(["kind", "target", "when", "factor"], faults)]
    restarts = restart_rows(s)
    if restarts:
        md += ["", "## Restarts after faults", "",
               "Each fault aborted the job, which was relaunched (sim.restart.recovery_s) from its "
               "last complete checkpoint set, every clock starting at the fault's date plus the "
               "recovery time; the work since that checkpoint was done again. Time lost to "
               f"faults: {fmt(s.get('restart_lost_seconds'))} s (work lost plus recovery, "
               "summed).", "",
               table(["fault", "target", "when", "resumed from", "work lost", "recovery",
                      "relaunched at"], restarts)]
    lost = lost_worker_rows(s)
    if lost:
        md += ["", "## Lost workers", "",
               "epoch_sync and epoch_async went on without them, averaging over the survivors; "
               "a lost worker's metrics end at its failure, and its work since its last finished "
               "epoch is lost. The accuracy this cost is the difference to the same scenario "
               "without the faults (`--baseline`, or `syncopate compare`).", "",
               table(["worker", "fault", "when", "work lost"], lost)]
    if baseline is not None:
        md += baseline_section(run, baseline)
    tta = run.time_to_accuracy()
    if tta:
        md += ["", "## Time to accuracy", "",
               table(["target", f"first reached ({kind} s)"], sorted(tta.items()))]
    md += ["", "## Epochs (worker 0)", "",
           table(["epoch", f"end ({kind} s)", "compute s", "comm s", "idle s", "bytes sent",
                  "train loss", "test accuracy"],
                 [(r["epoch"], r["end_s"], r["compute_s"], r["comm_s"], r["idle_s"],
                   r["bytes_sent"], r.get("train_loss"), r.get("test_accuracy"))
                  for r in run.worker_rows(0)])]
    if plots.has_regression_errors(run):
        md += ["", "## Test errors (worker 0, in the targets' units)", "",
               table(["epoch"] + [name for _, name in plots.REGRESSION_ERRORS],
                     [[r["epoch"]] + [r.get(k) for k, _ in plots.REGRESSION_ERRORS]
                      for r in run.worker_rows(0)])]
    images = []
    if plots.has_regression_errors(run):
        images.append(("Regression errors",
                       save(plots.plot_regression({s.get("strategy", "run"): run}, kind),
                            out_dir, "regression.png")))
    if any(r.get("test_accuracy") is not None or r.get("train_loss") for r in run.metrics):
        images.append(("Accuracy and loss",
                       save(plots.plot_accuracy({s.get("strategy", "run"): run}, kind), out_dir,
                            "accuracy.png")))
    labels = [f"worker {w}" for w in range(run.workers)]
    rows = []
    for w in range(run.workers):
        wr = run.worker_rows(w)
        n = max(1, len(wr))
        rows.append({k: sum(r[k] for r in wr) / n for _, k, _ in plots.PHASES})
    images.append(("Compute, communication and idle per worker",
                   save(plots.plot_phases(labels, rows, "Time per epoch by phase", "worker"), out_dir,
                        "phases.png")))
    images.append(("Bytes per worker per epoch",
                   save(plots.plot_bytes_per_epoch(run), out_dir, "bytes.png")))
    if run.trace:
        images.append(("Timeline", save(plots.plot_timeline(run, kind), out_dir,
                                        "timeline.png")))
    for title, name in images:
        md += ["", f"## {title}", "", f"![{title}]({name})"]
    return "\n".join(md) + "\n"


def sweep_report(sweep, out_dir):
    grid = plots.grid_columns(sweep)
    kinds = {run.time_kind for run in sweep.runs.values()}
    kind = kinds.pop() if len(kinds) == 1 else "measured or simulated"
    done = [p for p in sweep.points if p.get("total_time_s") is not None]
    md = [f"# Sweep report: {os.path.basename(os.path.abspath(sweep.path))}", "",
          f"{len(done)} of {len(sweep.points)} points finished.", ""]
    speed = {}
    scales = any(len(v) > 1 for v in plots.scaling_groups(sweep).values())
    for label, values in plots.scaling_groups(sweep).items():
        for w, s, e in plots.speedup_efficiency(values):
            if len(values) > 1:  # one worker count: no speedup to speak of
                speed[(label, w)] = (s, e)
    rows = []
    for i, p in enumerate(sweep.points):
        t = p.get("total_time_s")
        s, e = speed.get((plots.group_label(sweep, p), p.get("workers")), (None, None))
        run = sweep.runs.get(i)
        bpw = run.bytes_per_worker_per_epoch() if run else None
        comm_share = None
        if run:
            c, m, idle = run.phase_totals()
            comm_share = m / (c + m + idle) if c + m + idle > 0 else None
        rows.append([p.get(c) for c in grid] +
                    [t, s, e, comm_share, bpw, p.get("final_test_accuracy")])
    md.append(table(grid + [f"time ({kind} s)", "speedup", "efficiency", "comm share",
                            "bytes/worker/epoch", "final accuracy"], rows))
    images = []
    if scales:
        images.append(("Speedup and efficiency",
                       save(plots.plot_scaling(sweep, kind), out_dir, "scaling.png")))
    point_labels, phase_rows = [], []
    for i, p in enumerate(sweep.points):
        if i in sweep.runs:
            point_labels.append(" ".join(f"{p.get(c)}" for c in grid))
            phase_rows.append(mean_phases(sweep.runs[i]))
    if phase_rows:
        images.append(("Compute, communication and idle",
                       save(plots.plot_phases(point_labels, phase_rows,
                                              "Time per worker per epoch by phase",
                                              "sweep point (" + ", ".join(grid) + ")"),
                            out_dir, "phases.png")))
    bytes_groups = {}
    for i, p in enumerate(sweep.points):
        if i not in sweep.runs or p.get("workers") is None:
            continue
        bytes_groups.setdefault(plots.group_label(sweep, p), []).append(
            (int(p["workers"]), sweep.runs[i].bytes_per_worker_per_epoch()))
    images.append(("Bytes per worker per epoch",
                   save(plots.plot_bytes_vs_workers(
                       {k: sorted(v) for k, v in bytes_groups.items() if v}),
                       out_dir, "bytes.png")))
    curves = {point_labels[j]: sweep.runs[i] for j, i in enumerate(sorted(sweep.runs))
              if any(r.get("test_accuracy") is not None for r in sweep.runs[i].metrics)}
    if curves:
        images.append(("Accuracy and loss",
                       save(plots.plot_accuracy(curves, kind), out_dir, "accuracy.png")))
    for title, name in images:
        md += ["", f"## {title}", "", f"![{title}]({name})"]
    return "\n".join(md) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="syncopate report", description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="a run directory or a sweep directory")
    parser.add_argument("--out", help="where report.md and the plots go (default: DIR)")
    parser.add_argument("--baseline", help="a fault-free run of the same scenario: the time and "
                        "accuracy the faults cost")
    args = parser.parse_args(argv)
    out_dir = args.out or args.dir
    try:
        if rundir.is_sweep(args.dir):
            if args.baseline:
                raise rundir.RunDirError(f"--baseline: {args.dir} is a sweep, not a run")
            os.makedirs(out_dir, exist_ok=True)
            text = sweep_report(rundir.read_sweep(args.dir), out_dir)
        else:
            comparison = compare.read_compare(args.dir)
            alone = comparison is not None and not os.path.isfile(
                os.path.join(args.dir, "summary.json"))
            run = None if alone else rundir.read_run(args.dir)
            if args.baseline and run is None:
                raise rundir.RunDirError(f"--baseline: {args.dir} is not a run directory")
            baseline = rundir.read_run(args.baseline) if args.baseline else None
            os.makedirs(out_dir, exist_ok=True)
            text = (f"# Comparison report: {args.dir}\n" if alone
                    else run_report(run, out_dir, baseline))
            if comparison is not None:
                text += "\n".join(compare.compare_section(
                    comparison, lambda fig, name: save(fig, out_dir, name))) + "\n"
    except rundir.RunDirError as e:
        print(f"syncopate report: {e}", file=sys.stderr)
        return 2
    path = os.path.join(out_dir, "report.md")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    print(f"report written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
