"""report: a directory holding compare.json gets the comparison section and the plot per phase,
with the file's numbers."""

import json
import os

import compare
import pytest
import report
from conftest import make_run
from test_report import is_png, legend_labels, md_table

KEYS = ("compute_s", "comm_s", "idle_s", "total_s")


def phases(compute, comm, idle):
    return {"compute_s": compute, "comm_s": comm, "idle_s": idle,
            "total_s": compute + comm + idle}


def error(a, b):
    return {k: (a[k] - b[k]) / b["total_s"] for k in KEYS}


def make_compare(path, epochs=3, workers=2, comm_factor=2.0, tolerance=0.1):
    """compare.json as `syncopate compare` writes it: A's communication comm_factor x B's."""
    rows = []
    mean_a = phases(0, 0, 0)
    mean_b = phases(0, 0, 0)
    for e in range(epochs):
        of_epoch = []
        for w in range(workers):
            b = phases(1.0 + 0.1 * w, 0.2 + 0.05 * e, 0.01)
            a = phases(b["compute_s"], b["comm_s"] * comm_factor, b["idle_s"])
            of_epoch.append({"epoch": e, "worker": w, "gated": False, "a": a, "b": b,
                             "error": error(a, b)})
        a = {k: sum(r["a"][k] for r in of_epoch) / workers for k in KEYS}
        b = {k: sum(r["b"][k] for r in of_epoch) / workers for k in KEYS}
        rows.append({"epoch": e, "worker": None, "gated": True, "a": a, "b": b,
                     "error": error(a, b)})
        rows += of_epoch
        mean_a = {k: mean_a[k] + a[k] for k in KEYS}
        mean_b = {k: mean_b[k] + b[k] for k in KEYS}
    rows.append({"epoch": None, "worker": None, "gated": True, "a": mean_a, "b": mean_b,
                 "error": error(mean_a, mean_b)})
    exceeded = [f"epoch {r['epoch']} (all workers) exposed comm" for r in rows
                if r["gated"] and abs(r["error"]["comm_s"]) > tolerance]
    data = {"format": compare.FORMAT,
            "a": {"path": "/runs/sim", "backend": "sim", "platform": "loopback"},
            "b": {"path": "/runs/mpi", "backend": "mpi", "platform": ""},
            "tolerance": tolerance, "allowed_differences": ['backend: "sim" vs "mpi"'],
            "rows": rows,
            "training_time": {"a": mean_a["total_s"], "b": mean_b["total_s"],
                              "error": error(mean_a, mean_b)["total_s"]},
            "bytes": {"equal": True, "mismatches": []}, "exceeded": exceeded,
            "passed": not exceeded}
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "compare.json"), "w") as f:
        json.dump(data, f)
    return data


def test_run_with_a_comparison_gets_its_section_and_plot(tmp_path):
    path = str(tmp_path / "run")
    make_run(path, backend="mpi")
    data = make_compare(path)
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    assert "## Epochs (worker 0)" in text  # the run's own report is still there
    assert "## Comparison: predicted (A) vs measured (B)" in text
    assert "FAILED: epoch 0 (all workers) exposed comm" in text
    rows = md_table(text[text.index("## Comparison"):], "epoch")
    gated = [r for r in data["rows"] if r["worker"] is None]
    assert [r[0] for r in rows] == ["0", "1", "2", "whole run"]
    for row, r in zip(rows, gated):
        for i, key in enumerate(KEYS):
            assert float(row[1 + 3 * i]) == pytest.approx(r["a"][key], rel=1e-5)
            assert float(row[2 + 3 * i]) == pytest.approx(r["b"][key], rel=1e-5)
            assert float(row[3 + 3 * i].rstrip("%")) == pytest.approx(
                100 * r["error"][key], abs=0.05)
    assert is_png(os.path.join(path, "compare.png"))
    assert "(compare.png)" in text


def test_plot_has_a_panel_per_phase_with_the_figures(tmp_path):
    data = make_compare(str(tmp_path))
    fig = compare.plot_compare(data)
    assert [ax.get_title() for ax in fig.axes] == [
        "compute per epoch", "exposed communication per epoch", "idle per epoch",
        "total per epoch"]
    workers = [r for r in data["rows"] if r["worker"] is not None]
    for ax, key in zip(fig.axes, KEYS):
        assert "measured" in ax.get_xlabel() and "simulated" in ax.get_ylabel()
        lines = {l.get_label(): l for l in ax.get_lines()}
        points = lines["one worker, one epoch"]
        assert list(points.get_xdata()) == pytest.approx([r["b"][key] for r in workers])
        assert list(points.get_ydata()) == pytest.approx([r["a"][key] for r in workers])
        assert "predicted = measured" in legend_labels(ax)
    assert "within 10%" in legend_labels(fig.axes[3])


def test_comparison_alone_is_reported(tmp_path):
    path = str(tmp_path / "cmp")
    make_compare(path, comm_factor=1.0)
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    assert "within the tolerance, bytes equal" in text
    assert is_png(os.path.join(path, "compare.png"))


def test_a_file_that_is_not_a_comparison_exits_2(tmp_path, capsys):
    path = str(tmp_path / "run")
    make_run(path)
    with open(os.path.join(path, "compare.json"), "w") as f:
        json.dump({"format": "something-else"}, f)
    assert report.main([path]) == 2
    assert "compare.json:1: format: not a comparison" in capsys.readouterr().err
