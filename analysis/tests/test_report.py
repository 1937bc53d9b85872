"""report: every plot exists with the expected series, and report.md's numbers are the files'."""

import json
import os

import plots
import pytest
import report
import rundir
from conftest import make_run, make_sweep


def md_table(text, first_header):
    """The rows of the markdown table whose header starts with `first_header`."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 5000


def legend_labels(ax):
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def assert_labelled(fig):
    for ax in fig.axes:
        assert ax.get_title(), "every plot has a title"
        assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
        assert legend_labels(ax), f"{ax.get_title()}: no legend"


def test_run_report_numbers_equal_the_run_files(run_dir):
    assert report.main([run_dir]) == 0
    text = open(os.path.join(run_dir, "report.md")).read()
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    figures = dict(md_table(text, "figure"))
    assert float(figures["training time (simulated s)"]) == pytest.approx(
        summary["total_time_s"], rel=1e-6)
    assert float(figures["communication time (s, summed over workers)"]) == pytest.approx(
        summary["comm_time_s"], rel=1e-6)
    assert int(figures["bytes sent (all workers)"]) == summary["bytes_sent"]
    assert float(figures["final test accuracy"]) == pytest.approx(
        summary["final_test_accuracy"], rel=1e-6)
    metrics = rundir.read_run(run_dir).worker_rows(0)
    epochs = md_table(text, "epoch")
    assert len(epochs) == len(metrics)
    for row, m in zip(epochs, metrics):
        assert int(row[0]) == m["epoch"]
        assert float(row[1]) == pytest.approx(m["end_s"], rel=1e-6)
        assert int(row[5]) == m["bytes_sent"]
        assert float(row[7]) == pytest.approx(m["test_accuracy"], rel=1e-6)
    tta = dict(md_table(text, "target"))
    assert float(tta["0.6"]) == pytest.approx(summary["time_to_accuracy"]["0.6"])
    assert tta["0.9"] == "-"


def test_run_report_writes_every_plot(run_dir):
    assert report.main([run_dir]) == 0
    text = open(os.path.join(run_dir, "report.md")).read()
    for name in ("accuracy.png", "phases.png", "bytes.png", "timeline.png"):
        assert is_png(os.path.join(run_dir, name)), name
        assert f"({name})" in text


def test_accuracy_plot_series_and_time_to_accuracy_marker(run_dir):
    run = rundir.read_run(run_dir)
    fig = plots.plot_accuracy({"epoch_sync": run}, run.time_kind)
    assert_labelled(fig)
    acc_epoch, acc_time = fig.axes[0], fig.axes[1]
    line = acc_epoch.get_lines()[0]
    assert line.get_label() == "epoch_sync"
    assert list(line.get_ydata()) == pytest.approx([r["test_accuracy"]
                                                    for r in run.worker_rows(0)])
    assert list(acc_time.get_lines()[0].get_xdata()) == pytest.approx(
        [r["end_s"] for r in run.worker_rows(0)])
    markers = [l for l in acc_time.get_lines() if l.get_marker() == "*" and len(l.get_xdata())]
    assert [(m.get_xdata()[0], m.get_ydata()[0]) for m in markers] == [(3.0, 0.6)]
    assert "simulated" in acc_time.get_xlabel()


def test_phase_and_bytes_plots_carry_the_metrics(run_dir):
    run = rundir.read_run(run_dir)
    rows = [{"compute_s": 1.25, "comm_s": 0.25, "idle_s": 0.0}] * 2
    fig = plots.plot_phases(["worker 0", "worker 1"], rows, "Time per epoch by phase", "worker")
    assert_labelled(fig)
    ax = fig.axes[0]
    assert legend_labels(ax) == ["compute", "communication", "idle"]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([1.25, 1.25, 0.25, 0.25, 0.0, 0.0])
    fig = plots.plot_bytes_per_epoch(run)
    assert_labelled(fig)
    assert legend_labels(fig.axes[0]) == ["worker 0", "worker 1"]
    assert list(fig.axes[0].get_lines()[0].get_ydata()) == pytest.approx([1000 / 2**20] * 3)


def test_timeline_has_one_row_per_worker_and_each_category(run_dir):
    run = rundir.read_run(run_dir)
    fig = plots.plot_timeline(run, run.time_kind)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["worker 0", "worker 1"]
    assert sorted(legend_labels(ax)) == ["epoch", "sync"]
    assert len(ax.collections) == len(run.trace)


def test_sweep_speedup_and_efficiency(sweep_dir):
    sweep = rundir.read_sweep(sweep_dir)
    groups = plots.scaling_groups(sweep)
    assert sorted(groups) == ["ddp", "epoch_sync"]
    sync = plots.speedup_efficiency(groups["epoch_sync"])
    assert [(w, round(s, 9), round(e, 9)) for w, s, e in sync] == [(2, 2, 1), (4, 4, 1), (8, 8, 1)]
    ddp = plots.speedup_efficiency(groups["ddp"])
    assert ddp[0][1] == 2 and all(e < 1 for _, _, e in ddp[1:])
    fig = plots.plot_scaling(sweep, "simulated")
    assert_labelled(fig)
    speedup_ax = fig.axes[0]
    lines = {l.get_label(): l for l in speedup_ax.get_lines()}
    assert set(lines) == {"ddp", "epoch_sync", "ideal"}
    assert list(lines["epoch_sync"].get_ydata()) == pytest.approx([2, 4, 8])


def test_sweep_report_tables_and_plots(sweep_dir):
    assert report.main([sweep_dir]) == 0
    text = open(os.path.join(sweep_dir, "report.md")).read()
    assert "6 of 6 points finished." in text
    rows = md_table(text, "strategy")
    assert len(rows) == 6
    by_point = {(r[0], int(r[1])): r for r in rows}
    assert float(by_point[("epoch_sync", 8)][3]) == pytest.approx(8)  # speedup
    assert float(by_point[("epoch_sync", 8)][4]) == pytest.approx(1)  # efficiency
    assert float(by_point[("epoch_sync", 4)][6]) == pytest.approx(400)  # bytes/worker/epoch
    for name in ("scaling.png", "phases.png", "bytes.png", "accuracy.png"):
        assert is_png(os.path.join(sweep_dir, name)), name


def test_sweep_with_unfinished_points(tmp_path):
    path = str(tmp_path / "sweep")
    make_sweep(path, missing={("ddp", 8)})
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    assert "5 of 6 points finished." in text


def test_not_a_run_directory_exits_2(tmp_path, capsys):
    assert report.main([str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_malformed_summary_names_file_and_line(tmp_path, capsys):
    path = str(tmp_path / "run")
    make_run(path)
    with open(os.path.join(path, "summary.json"), "w") as f:
        f.write('{\n  "backend": "sim",\n  oops\n}')
    assert report.main([path]) == 2
    assert "summary.json:3:" in capsys.readouterr().err


def test_cost_only_run_without_accuracy(tmp_path):
    path = str(tmp_path / "run")
    make_run(path, accuracy=False)
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    assert dict(md_table(text, "figure"))["final test accuracy"] == "-"


def test_sweep_of_strategies_at_one_worker_count(tmp_path):
    """The main job's comparison: no workers axis (taken from the runs), no speedup to plot."""
    import csv
    path = str(tmp_path / "sweep")
    make_sweep(path, workers=(4,))
    rows = list(csv.reader(open(os.path.join(path, "sweep.csv"))))
    keep = [i for i, c in enumerate(rows[0]) if c != "workers"]
    with open(os.path.join(path, "sweep.csv"), "w", newline="") as f:
        csv.writer(f).writerows([[r[i] for i in keep] for r in rows])
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    table_rows = md_table(text, "strategy")
    assert [(r[0], r[1]) for r in table_rows] == [("ddp", "4"), ("epoch_sync", "4")]
    assert all(r[3] == "-" and r[4] == "-" for r in table_rows)  # speedup, efficiency
    assert not os.path.exists(os.path.join(path, "scaling.png"))
    assert is_png(os.path.join(path, "phases.png"))


def test_regression_run_reports_and_plots_its_test_errors(tmp_path):
    path = str(tmp_path / "regression")
    summary = make_run(path, epochs=4, regression=True)
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    figures = dict(md_table(text, "figure"))
    assert float(figures["final test R²"]) == pytest.approx(summary["final_test_r2"], rel=1e-6)
    assert float(figures["final test MSE"]) == pytest.approx(summary["final_test_mse"], rel=1e-6)
    assert figures["final test accuracy"] == "-"
    tables = [l for l in text.splitlines() if l.startswith("| epoch |")]
    assert len(tables) == 2 and "test R²" in tables[1]
    assert is_png(os.path.join(path, "regression.png")) and "(regression.png)" in text
    run = rundir.read_run(path)
    fig = plots.plot_regression({"serial": run}, run.time_kind)
    assert_labelled(fig)
    by_title = {ax.get_title(): ax for ax in fig.axes}
    r2 = by_title["Test R² vs epoch (worker 0)"].get_lines()[0]
    assert list(r2.get_xdata()) == [1, 2, 3, 4]
    assert list(r2.get_ydata()) == pytest.approx([1 - 1 / (e + 2) for e in range(4)])
    mse = by_title["Test MSE vs epoch (worker 0)"].get_lines()[0]
    assert list(mse.get_ydata()) == pytest.approx([10 / (e + 1) for e in range(4)])
    plots.plt.close(fig)


def test_classification_run_has_no_regression_section(run_dir):
    assert report.main([run_dir]) == 0
    text = open(os.path.join(run_dir, "report.md")).read()
    assert "Test errors" not in text and "regression.png" not in text
    assert not os.path.exists(os.path.join(run_dir, "regression.png"))


def test_run_report_lists_the_faults_of_the_scenario(tmp_path):
    path = str(tmp_path / "faulty")
    make_run(path)
    summary_path = os.path.join(path, "summary.json")
    summary = json.load(open(summary_path))
    summary["scenario"] = {"sim": {"faults": [
        {"kind": "straggler", "worker": 1, "from_s": 0.5, "until_s": 2.0, "factor": 0.5},
        {"kind": "link_degradation", "link": "n0-nic0", "from_s": 1.0, "until_s": 3.0,
         "factor": 0.25}]}}
    json.dump(summary, open(summary_path, "w"))
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    rows = md_table(text, "kind")
    assert rows == [["straggler", "worker 1", "[0.5, 2) s", "0.5"],
                    ["link_degradation", "link n0-nic0", "[1, 3) s", "0.25"]]


def test_run_report_without_faults_has_no_fault_section(run_dir):
    assert report.main([run_dir]) == 0
    assert "## Faults" not in open(os.path.join(run_dir, "report.md")).read()


def test_run_report_lists_the_lost_workers(tmp_path):
    path = str(tmp_path / "elastic")
    make_run(path)
    summary_path = os.path.join(path, "summary.json")
    summary = json.load(open(summary_path))
    summary["lost_workers"] = [
        {"worker": 2, "at_s": 3.25, "kind": "host_failure", "lost_seconds": 0.75}]
    json.dump(summary, open(summary_path, "w"))
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    assert "## Lost workers" in text
    assert md_table(text, "worker") == [["2", "host_failure", "at 3.25 s", "0.75 s"]]


def test_run_report_without_losses_has_no_lost_workers_section(run_dir):
    assert report.main([run_dir]) == 0
    assert "## Lost workers" not in open(os.path.join(run_dir, "report.md")).read()


def test_run_report_lists_the_restarts_and_the_time_they_lost(tmp_path):
    path = str(tmp_path / "restarted")
    make_run(path, strategy="ddp")
    summary_path = os.path.join(path, "summary.json")
    summary = json.load(open(summary_path))
    summary["restarts"] = [
        {"kind": "host_failure", "worker": 1, "at_s": 2.25, "resumed_from_s": 1.5,
         "lost_seconds": 0.75, "recovery_s": 10.0, "restart_s": 12.25},
        {"kind": "link_failure", "link": "n0-nic0", "at_s": 0.5, "resumed_from_s": 0,
         "lost_seconds": 0.5, "recovery_s": 0.0, "restart_s": 0.5}]
    summary["restart_lost_seconds"] = 11.25
    json.dump(summary, open(summary_path, "w"))
    assert report.main([path]) == 0
    text = open(os.path.join(path, "report.md")).read()
    assert "## Restarts after faults" in text
    assert "Time lost to faults: 11.25 s" in text
    assert md_table(text, "fault") == [
        ["host_failure", "worker 1", "at 2.25 s", "checkpoint of 1.5 s", "0.75 s", "10 s",
         "12.25 s"],
        ["link_failure", "link n0-nic0", "at 0.5 s", "the start", "0.5 s", "0 s", "0.5 s"]]


def test_run_report_without_restarts_has_no_restart_section(run_dir):
    assert report.main([run_dir]) == 0
    text = open(os.path.join(run_dir, "report.md")).read()
    assert "## Restarts after faults" not in text
    assert "## Lost to faults" not in text


def faulty_and_baseline(tmp_path, baseline_strategy="ddp"):
    """A run slowed by its faults (2 s epochs, accuracy 0.05 lower at the end) and its
    fault-free baseline (1.5 s epochs)."""
    scenario = {"strategy": {"name": "ddp"}, "workers": 2, "checkpoint": {"every": 1}}
    faulty, baseline = str(tmp_path / "faulty"), str(tmp_path / "baseline")
    make_run(faulty, strategy="ddp", epoch_s=2.0)
    make_run(baseline, strategy=baseline_strategy, epoch_s=1.5)
    for path, extra in ((faulty, {"sim": {"faults": [{"kind": "host_failure", "worker": 1,
                                                      "at_s": 2.5}],
                                          "restart": {"recovery_s": 1.0}}}),
                        (baseline, {"strategy": {"name": baseline_strategy},
                                    "checkpoint": {"every": 0}})):
        summary_path = os.path.join(path, "summary.json")
        summary = json.load(open(summary_path))
        summary["scenario"] = {**scenario, **extra}
        if path == faulty:
            summary["final_test_accuracy"] -= 0.05
        json.dump(summary, open(summary_path, "w"))
    return faulty, baseline


def test_run_report_against_a_baseline_shows_the_time_and_accuracy_lost(tmp_path):
    faulty, baseline = faulty_and_baseline(tmp_path)
    assert report.main([faulty, "--baseline", baseline]) == 0
    text = open(os.path.join(faulty, "report.md")).read()
    assert "## Lost to faults" in text
    rows = {r[0]: r[1:] for r in md_table(text, "against the baseline")}
    this, base, lost = rows["training time (simulated s)"]
    assert float(this) == 6.0 and float(base) == 4.5 and float(lost) == pytest.approx(1.5)
    this, base, lost = rows["final test accuracy"]
    assert float(lost) == pytest.approx(0.05)
    assert float(rows["time to accuracy 0.6 (simulated s)"][2]) == pytest.approx(1.0)
    assert rows["time to accuracy 0.9 (simulated s)"] == ["-", "-", "-"]


def test_a_baseline_of_another_scenario_is_refused(tmp_path, capsys):
    faulty, baseline = faulty_and_baseline(tmp_path, baseline_strategy="epoch_sync")
    assert report.main([faulty, "--baseline", baseline]) == 2
    err = capsys.readouterr().err
    assert "not the same scenario" in err and "strategy.name" in err
