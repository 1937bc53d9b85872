"""The report's plots. Each function returns a matplotlib Figure (the tests inspect it) and the
report saves it as PNG. Every plot has a title, axis labels with units and a legend."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator, ScalarFormatter  # noqa: E402

PHASES = (("compute", "compute_s", "tab:blue"), ("communication", "comm_s", "tab:orange"),
          ("idle", "idle_s", "tab:gray"))


def group_label(sweep, point):
    """The label of the group a point belongs to: the points that differ only in their worker
    count form a group (named by the other grid values that vary in the sweep)."""
    grid = grid_columns(sweep)
    varying = [c for c in grid if c != "workers" and len({p.get(c) for p in sweep.points}) > 1]
    return ", ".join(str(point.get(c)) if c == "strategy" else f"{c}={point.get(c)}"
                     for c in varying) or str(point.get("strategy", "run"))


def scaling_groups(sweep):
    """{label: [(workers, total_time_s), ...] sorted by workers} over the finished points."""
    groups = {}
    for point in sweep.points:
        if point.get("total_time_s") is None or point.get("workers") is None:
            continue
        groups.setdefault(group_label(sweep, point), []).append(
            (int(point["workers"]), float(point["total_time_s"])))
    return {label: sorted(values) for label, values in groups.items()}


def grid_columns(sweep):
    """sweep.csv's grid columns: those before run_dir."""
    return sweep.columns[:sweep.columns.index("run_dir")]


def speedup_efficiency(values):
    """[(workers, speedup, efficiency)] against the smallest worker count W0 of the group:
    S(W) = W0 * T(W0) / T(W) (so S = W for perfect strong scaling), E = S / W."""
    w0, t0 = values[0]
    return [(w, w0 * t0 / t, w0 * t0 / t / w) for w, t in values]


def _workers_axis(ax, workers):
    """A log2 axis of worker counts labelled with the counts themselves."""
    ax.set_xscale("log", base=2)
    if workers:
        ax.set_xticks(workers)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("workers")


def plot_scaling(sweep, time_kind):
    fig, (ax_s, ax_e) = plt.subplots(1, 2, figsize=(11, 4.2))
    groups = scaling_groups(sweep)
    all_workers = sorted({w for values in groups.values() for w, _ in values})
    for label, values in groups.items():
        rows = speedup_efficiency(values)
        ax_s.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", label=label)
        ax_e.plot([r[0] for r in rows], [r[2] for r in rows], marker="o", label=label)
    if all_workers:
        ax_s.plot(all_workers, all_workers, linestyle=":", color="black", label="ideal")
        ax_e.axhline(1.0, linestyle=":", color="black", label="ideal")
    for ax in (ax_s, ax_e):
        _workers_axis(ax, all_workers)
        ax.legend()
        ax.grid(True, alpha=0.3)
    ax_s.set_ylabel("speedup (x, vs the smallest worker count)")
    ax_e.set_ylabel("parallel efficiency (fraction)")
    ax_s.set_title(f"Speedup vs workers ({time_kind} training time)")
    ax_e.set_title("Parallel efficiency vs workers")
    fig.tight_layout()
    return fig


def plot_phases(labels, rows, title, xlabel):
    """Stacked bars of compute / communication / idle seconds; rows: dicts with the phase keys."""
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(labels) + 3), 4.2))
    bottom = [0.0] * len(labels)
    for name, key, color in PHASES:
        values = [r[key] for r in rows]
        ax.bar(range(len(labels)), values, bottom=bottom, label=name, color=color)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(labels)))
    rotate = len(labels) > 4
    ax.set_xticklabels(labels, rotation=30 if rotate else 0, ha="right" if rotate else "center")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("seconds (mean per worker per epoch)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def _curve(run, worker=0):
    """Worker 0's epochs: (epoch, end_s, test_accuracy, train_loss), as time-to-accuracy uses."""
    return [(r["epoch"], r["end_s"], r.get("test_accuracy"), r.get("train_loss"))
            for r in run.worker_rows(worker)]


REGRESSION_ERRORS = [("test_mse", "test MSE"), ("test_mae", "test MAE"), ("test_r2", "test R²"),
                     ("test_pearson", "test Pearson r")]


def has_regression_errors(run):
    """Whether any row of the run holds a test error (regression runs evaluated on a test set)."""
    return any(r.get(k) is not None for r in run.metrics for k, _ in REGRESSION_ERRORS)


def plot_regression(runs, time_kind):
    """Test MSE, MAE, R² and Pearson r (in the targets' units) vs epoch, one line per run label;
    the MSE also vs time."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (key, name) in zip(axes.flat, REGRESSION_ERRORS):
        for label, run in runs.items():
            rows = [r for r in run.worker_rows(0) if r.get(key) is not None]
            ax.plot([r["epoch"] + 1 for r in rows], [r[key] for r in rows], marker=".",
                    label=label)
        ax.set_title(f"{name[0].upper()}{name[1:]} vs epoch (worker 0)")
        ax.set_xlabel("epoch")
        ax.set_ylabel(name + (" (targets' units²)" if key == "test_mse" else
                              " (targets' units)" if key == "test_mae" else ""))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"Regression errors on the test set ({time_kind} run)")
    fig.tight_layout()
    return fig


def plot_accuracy(runs, time_kind, targets=None):
    """Test accuracy and training loss vs epoch and vs time, one line per run label; the first
    time each run reached each accuracy target is marked."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    (acc_epoch, acc_time), (loss_epoch, loss_time) = axes
    for label, run in runs.items():
        curve = _curve(run)
        epochs = [c[0] + 1 for c in curve]
        times = [c[1] for c in curve]
        acc = [c[2] for c in curve]
        loss = [c[3] for c in curve]
        if any(a is not None for a in acc):
            line, = acc_epoch.plot(epochs, acc, marker=".", label=label)
            acc_time.plot(times, acc, marker=".", label=label, color=line.get_color())
            for target, seconds in sorted(run.time_to_accuracy().items()):
                if seconds is not None and (targets is None or target in targets):
                    acc_time.plot([seconds], [target], marker="*", markersize=11,
                                  color=line.get_color(), linestyle="none")
        if any(v is not None for v in loss):
            loss_epoch.plot(epochs, loss, marker=".", label=label)
            loss_time.plot(times, loss, marker=".", label=label)
    acc_time.plot([], [], marker="*", color="black", linestyle="none",
                  label="time to accuracy target")
    acc_epoch.set_title("Test accuracy vs epoch (worker 0)")
    acc_time.set_title(f"Test accuracy vs {time_kind} time")
    loss_epoch.set_title("Training loss vs epoch (worker 0)")
    loss_time.set_title(f"Training loss vs {time_kind} time")
    for ax in (acc_epoch, loss_epoch):
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in (acc_time, loss_time):
        ax.set_xlabel(f"{time_kind} time (s)")
    for ax in (acc_epoch, acc_time):
        ax.set_ylabel("test accuracy (fraction)")
    for ax in (loss_epoch, loss_time):
        ax.set_ylabel("training loss (mean per sample)")
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # regression runs have no accuracy line
            ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_bytes_vs_workers(groups):
    """groups: {label: [(workers, bytes per worker per epoch)]}."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for label, values in groups.items():
        ax.plot([v[0] for v in values], [v[1] / 2**20 for v in values], marker="o", label=label)
    _workers_axis(ax, sorted({v[0] for values in groups.values() for v in values}))
    ax.set_ylabel("MiB sent per worker per epoch")
    ax.set_title("Bytes per worker per epoch")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_bytes_per_epoch(run):
    """One run: MiB sent by each worker in each epoch."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for worker in range(run.workers):
        rows = run.worker_rows(worker)
        ax.plot([r["epoch"] + 1 for r in rows], [(r["bytes_sent"] or 0) / 2**20 for r in rows],
                marker=".", label=f"worker {worker}")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("MiB sent")
    ax.set_title("Bytes sent per worker per epoch")
    ax.grid(True, alpha=0.3)
    if run.workers <= 16:
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


TIMELINE_COLORS = {"compute": "tab:blue", "comm": "tab:orange", "sync": "tab:red",
                   "wait": "tab:purple", "idle": "tab:gray"}


def plot_timeline(run, time_kind):
    """Per-worker overview of the trace (one process per worker): epochs as outlines, compute,
    exposed communication, synchronisations and idle time as coloured spans (step outlines are
    left out; synchronisations and waits are drawn over the compute they interrupt)."""
    spans = [e for e in run.trace if e.get("cat") != "step"]
    order = {"epoch": 0, "compute": 1}
    spans.sort(key=lambda e: order.get(e.get("cat", ""), 2))
    workers = sorted({e.get("pid", 0) for e in spans}) or list(range(run.workers))
    fig, ax = plt.subplots(figsize=(11, max(2.5, 0.45 * len(workers) + 1.5)))
    seen = set()
    for e in spans:
        row = workers.index(e.get("pid", 0))
        start, dur = e["ts"] / 1e6, e.get("dur", 0) / 1e6
        cat = e.get("cat", "")
        if cat == "epoch":
            ax.broken_barh([(start, dur)], (row - 0.4, 0.8), facecolors="none",
                           edgecolors="black", linewidth=0.6,
                           label=None if "epoch" in seen else "epoch")
            seen.add("epoch")
        else:
            color = TIMELINE_COLORS.get(cat, "tab:green")
            ax.broken_barh([(start, dur)], (row - 0.3, 0.6), facecolors=color,
                           label=None if cat in seen else cat)
            seen.add(cat)
    ax.set_yticks(range(len(workers)))
    ax.set_yticklabels([f"worker {w}" for w in workers])
    ax.set_xlabel(f"{time_kind} time (s)")
    ax.set_title("Timeline per worker")
    ax.invert_yaxis()
    if seen:
        ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig
