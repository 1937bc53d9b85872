"""Readers of Syncopate run directories and sweep directories (the files are the interface).

A run directory holds metrics.csv (one row per worker and epoch), summary.json (totals and the
resolved scenario) and trace.json (Chrome trace events). A sweep directory holds sweep.csv (one
row per point: the grid values, the point's run directory and its summary figures) and the run
directories of its points.
"""

import csv
import json
import os
from dataclasses import dataclass, field

# metrics.csv columns that hold integers and floats; the others are kept as text.
_INT_COLUMNS = {"worker", "epoch", "bytes_sent", "bytes_recv"}


def _number(text, integer):
    if text is None or text == "":
        return None  # absent (e.g. accuracy of a cost-only run, or an epoch not evaluated)
    return int(text) if integer else float(text)


class RunDirError(Exception):
    """A file of a run or sweep directory is missing or malformed (names the file and line)."""


def read_metrics(path):
    """metrics.csv as a list of dicts with numbers parsed (absent values are None)."""
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        required = {"worker", "epoch", "start_s", "end_s", "compute_s", "comm_s", "idle_s"}
        missing = required - set(reader.fieldnames or [])
        if missing:
            raise RunDirError(f"{path}:1: missing columns {', '.join(sorted(missing))}")
        for line, row in enumerate(reader, start=2):
            try:
                rows.append({k: _number(v, k in _INT_COLUMNS) for k, v in row.items()})
            except ValueError as e:
                raise RunDirError(f"{path}:{line}: {e}") from None
    return rows


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise RunDirError(f"{path}:{e.lineno}: {e.msg}") from None


@dataclass
class Run:
    """One run directory."""

    path: str
    summary: dict
    metrics: list
    trace: list = field(default_factory=list)  # complete ("X") trace events

    @property
    def backend(self):
        return self.summary.get("backend", "")

    @property
    def time_kind(self):
        """'simulated' on the simulator, 'measured' on the real backends."""
        return "simulated" if self.backend == "sim" else "measured"

    @property
    def workers(self):
        return int(self.summary["workers"])

    @property
    def epochs(self):
        return sorted({r["epoch"] for r in self.metrics})

    def worker_rows(self, worker):
        return sorted((r for r in self.metrics if r["worker"] == worker), key=lambda r: r["epoch"])

    def epoch_rows(self, epoch):
        return [r for r in self.metrics if r["epoch"] == epoch]

    def phase_totals(self):
        """(compute, comm, idle) seconds summed over workers and epochs."""
        return tuple(sum(r[k] for r in self.metrics) for k in ("compute_s", "comm_s", "idle_s"))

    def bytes_per_worker_per_epoch(self):
        """Mean bytes sent by one worker in one epoch."""
        if not self.metrics:
            return 0.0
        return sum(r["bytes_sent"] or 0 for r in self.metrics) / len(self.metrics)

    def time_to_accuracy(self):
        """{target: seconds or None} from summary.json."""
        return {float(k): v for k, v in (self.summary.get("time_to_accuracy") or {}).items()}


def read_run(path):
    for name in ("summary.json", "metrics.csv"):
        if not os.path.isfile(os.path.join(path, name)):
            raise RunDirError(f"{path}: not a run directory (no {name})")
    summary = read_json(os.path.join(path, "summary.json"))
    metrics = read_metrics(os.path.join(path, "metrics.csv"))
    trace = []
    trace_path = os.path.join(path, "trace.json")
    if os.path.isfile(trace_path):
        events = read_json(trace_path)
        events = events.get("traceEvents", []) if isinstance(events, dict) else events
        trace = [e for e in events if e.get("ph") == "X"]
    return Run(path, summary, metrics, trace)


@dataclass
class Sweep:
    """A sweep directory: its points (rows of sweep.csv) and their runs."""

    path: str
    columns: list
    points: list  # dicts: the sweep.csv row, numbers parsed
    runs: dict  # point index -> Run (finished points only)


def _parse_cell(text):
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_sweep(path):
    csv_path = os.path.join(path, "sweep.csv")
    if not os.path.isfile(csv_path):
        raise RunDirError(f"{path}: not a sweep directory (no sweep.csv)")
    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        columns = list(reader.fieldnames or [])
        for required in ("run_dir", "total_time_s"):
            if required not in columns:
                raise RunDirError(f"{csv_path}:1: missing column {required}")
        points = [{k: _parse_cell(v) for k, v in row.items()} for row in reader]
    runs = {}
    for i, point in enumerate(points):
        run_dir = point.get("run_dir")
        if run_dir is None:
            continue
        full = run_dir if os.path.isabs(run_dir) else os.path.join(path, run_dir)
        if os.path.isfile(os.path.join(full, "summary.json")):
            runs[i] = read_run(full)
    # A grid without a strategy or worker axis: the values come from the runs' summaries.
    for key in ("workers", "strategy"):
        if key not in columns:
            columns.insert(columns.index("run_dir"), key)
            for i, point in enumerate(points):
                point[key] = runs[i].summary.get(key) if i in runs else None
    return Sweep(path, columns, points, runs)


def is_sweep(path):
    return os.path.isfile(os.path.join(path, "sweep.csv"))
