"""Small generated run and sweep directories, in the files' real formats."""

import csv
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

METRICS_HEADER = ["worker", "epoch", "start_s", "end_s", "compute_s", "comm_s", "idle_s",
                  "bytes_sent", "bytes_recv", "train_loss", "train_accuracy", "test_accuracy",
                  "lr", "comm_total_s", "test_mse", "test_mae", "test_r2", "test_pearson"]


def regression_errors(e):
    return [10.0 / (e + 1), 3.0 / (e + 1), 1.0 - 1.0 / (e + 2), 0.5 + 0.1 * e]


def make_run(path, strategy="epoch_sync", workers=2, epochs=3, epoch_s=1.5, comm_s=0.25,
             bytes_per_epoch=1000, backend="sim", accuracy=True, regression=False):
    """Writes a run directory whose numbers follow simple closed forms, and returns its summary.
    regression: no accuracy, and test errors mse = 10 / (e + 1), mae = 3 / (e + 1),
    r2 = 1 - 1 / (e + 2), pearson = 0.5 + 0.1 e."""
    accuracy = accuracy and not regression
    os.makedirs(path, exist_ok=True)
    rows, events = [], []
    for w in range(workers):
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": w,
                       "args": {"name": f"worker {w}"}})
    for e in range(epochs):
        for w in range(workers):
            start, end = e * epoch_s, (e + 1) * epoch_s
            acc = 0.5 + 0.1 * e if accuracy else None
            rows.append([w, e, start, end, epoch_s - comm_s, comm_s, 0.0, bytes_per_epoch,
                         bytes_per_epoch, 2.0 / (e + 1), 0.4 + 0.1 * e,
                         "" if acc is None else acc, 0.05, comm_s]
                        + (regression_errors(e) if regression else ["", "", "", ""]))
            events.append({"name": f"epoch {e}", "cat": "epoch", "ph": "X", "pid": w, "tid": 0,
                           "ts": start * 1e6, "dur": epoch_s * 1e6})
            events.append({"name": "average", "cat": "sync", "ph": "X", "pid": w, "tid": 0,
                           "ts": (end - comm_s) * 1e6, "dur": comm_s * 1e6})
    with open(os.path.join(path, "metrics.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(METRICS_HEADER)
        out.writerows(rows)
    summary = {
        "name": os.path.basename(path), "backend": backend, "strategy": strategy,
        "platform": "mn5-acc" if backend == "sim" else "", "workers": workers, "epochs": epochs,
        "seed": 42, "final_test_accuracy": (0.5 + 0.1 * (epochs - 1)) if accuracy else None,
        "total_time_s": epochs * epoch_s, "compute_time_s": workers * epochs * (epoch_s - comm_s),
        "comm_time_s": workers * epochs * comm_s, "idle_time_s": 0.0,
        "bytes_sent": workers * epochs * bytes_per_epoch,
        "bytes_recv": workers * epochs * bytes_per_epoch,
        **{f"final_{k}": (regression_errors(epochs - 1)[i] if regression else None)
           for i, k in enumerate(["test_mse", "test_mae", "test_r2", "test_pearson"])},
        "time_to_accuracy": {"0.6": 2 * epoch_s if accuracy and epochs >= 2 else None,
                             "0.9": None},
    }
    with open(os.path.join(path, "summary.json"), "w") as f:
        json.dump(summary, f)
    with open(os.path.join(path, "trace.json"), "w") as f:
        json.dump({"traceEvents": events}, f)
    return summary


def make_sweep(path, strategies=("ddp", "epoch_sync"), workers=(2, 4, 8), missing=()):
    """A sweep whose time halves with the workers for epoch_sync and falls slower for ddp."""
    os.makedirs(path, exist_ok=True)
    header = ["strategy", "workers", "run_dir", "total_time_s", "comm_time_s", "bytes_sent",
              "final_test_accuracy"]
    rows = []
    for s in strategies:
        for w in workers:
            run_dir = f"runs/{s}-w{w}"
            if (s, w) in missing:
                rows.append([s, w, run_dir, "", "", "", ""])
                continue
            epoch_s = (8.0 / w) if s == "epoch_sync" else (8.0 / w + 0.5)
            summary = make_run(os.path.join(path, run_dir), strategy=s, workers=w,
                               epoch_s=epoch_s, comm_s=0.1 if s == "epoch_sync" else 0.4,
                               bytes_per_epoch=100 * w)
            rows.append([s, w, run_dir, summary["total_time_s"], summary["comm_time_s"],
                         summary["bytes_sent"], summary["final_test_accuracy"]])
    with open(os.path.join(path, "sweep.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        out.writerows(rows)


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "run"
    make_run(str(path))
    return str(path)


@pytest.fixture
def sweep_dir(tmp_path):
    path = tmp_path / "sweep"
    make_sweep(str(path))
    return str(path)
