"""validation/summarize.py: validation.md's table and error summary are the compare.json files'."""

import json
import os
import re
import sys

import pytest
from test_compare import make_compare
from test_report import md_table

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "validation"))
import summarize  # noqa: E402


def make_pairs(path, scenario="fmnist-mlp", ddp_factor=2.0):
    """Two pairs of a scenario: ddp at 2 workers (A's communication ddp_factor x B's) and
    epoch_sync at 4 (equal)."""
    for name, strategy, workers, factor in (("ddp-w2", "ddp", 2, ddp_factor),
                                            ("epoch_sync-w4", "epoch_sync", 4, 1.0)):
        data = make_compare(os.path.join(path, name), workers=workers, comm_factor=factor)
        data["a"].update(name=scenario, strategy=strategy, workers=workers)
        with open(os.path.join(path, name, "compare.json"), "w") as f:
            json.dump(data, f)


def make_runs(directory, scales):
    """Comparisons of one pair, ddp at 2 workers (ddp-w2-m<k>), one per (measured, simulated)
    scale of make_compare's seconds, with the errors recomputed."""
    for k, (measured, simulated) in enumerate(scales, start=1):
        path = os.path.join(directory, f"ddp-w2-m{k}")
        data = make_compare(path, workers=2, comm_factor=1.0)
        data["a"].update(strategy="ddp", workers=2)
        for row in data["rows"]:
            row["a"] = {key: value * simulated for key, value in row["a"].items()}
            row["b"] = {key: value * measured for key, value in row["b"].items()}
            row["error"] = {key: (row["a"][key] - row["b"][key]) / row["b"]["total_s"]
                            for key in row["a"]}
        with open(os.path.join(path, "compare.json"), "w") as f:
            json.dump(data, f)


def test_table_and_errors(tmp_path):
    make_pairs(str(tmp_path))
    out = str(tmp_path / "validation.md")
    assert summarize.main([str(tmp_path), "--out", out, "--note", "a note"]) == 0
    text = open(out).read()
    assert "- a note" in text
    rows = md_table(text, "strategy")
    assert [(r[0], r[1], r[2]) for r in rows] == [("ddp", "2", "3"), ("epoch_sync", "4", "3")]
    pairs = summarize.read_pairs(str(tmp_path))
    whole = summarize.whole_run(pairs[0])
    assert float(rows[0][3]) == pytest.approx(whole["a"]["total_s"] / 3, rel=1e-3)
    assert float(rows[0][4]) == pytest.approx(whole["b"]["total_s"] / 3, rel=1e-3)
    assert rows[1][5] == "+0.0%"
    errors = dict((r[0], r) for r in md_table(text, "error of"))
    ddp_error = abs(whole["error"]["total_s"])
    # Median of two pairs: the mean of ddp's error and epoch_sync's 0.
    assert float(errors["epoch time, per pair"][1].rstrip("%")) == pytest.approx(
        100 * ddp_error / 2, abs=0.05)
    assert float(errors["epoch time, per pair"][2].rstrip("%")) == pytest.approx(
        100 * ddp_error, abs=0.05)
    assert "targets MISSED" in text
    assert "Bytes: equal in every pair." in text


def test_each_scenario_has_its_table_and_errors(tmp_path):
    """Two scenarios' folders, given cnn first: a table each in that order, the same strategy
    and worker count kept apart, and errors over both and per scenario."""
    cnn, mlp = str(tmp_path / "cnn"), str(tmp_path / "mlp")
    make_pairs(cnn, "fmnist-cnn", ddp_factor=3.0)
    make_pairs(mlp, "fmnist-mlp", ddp_factor=2.0)
    out = str(tmp_path / "validation.md")
    assert summarize.main([cnn, mlp, "--out", out]) == 0
    text = open(out).read()
    assert text.startswith("# Validation: simulated vs measured, fmnist-cnn, fmnist-mlp\n")
    assert text.index("## fmnist-cnn") < text.index("## fmnist-mlp")
    cnn_rows = md_table(text[text.index("## fmnist-cnn"):], "strategy")
    mlp_rows = md_table(text[text.index("## fmnist-mlp"):], "strategy")
    assert [(r[0], r[1]) for r in cnn_rows] == [("ddp", "2"), ("epoch_sync", "4")]
    assert [(r[0], r[1]) for r in mlp_rows] == [("ddp", "2"), ("epoch_sync", "4")]
    assert cnn_rows[0][5] != mlp_rows[0][5]  # each table holds its own scenario's pair
    pairs = summarize.read_pairs(cnn, mlp)
    assert [summarize.key_of(p) for p in pairs] == [
        ("fmnist-cnn", "ddp", 2), ("fmnist-cnn", "epoch_sync", 4),
        ("fmnist-mlp", "ddp", 2), ("fmnist-mlp", "epoch_sync", 4)]
    errors = dict((r[0], r) for r in md_table(text, "error of"))
    assert errors["epoch time, per pair"][3] == "4"
    worst = max(abs(e) for e in summarize.pair_errors(pairs))
    assert float(errors["epoch time, per pair"][2].rstrip("%")) == pytest.approx(100 * worst,
                                                                                   abs=0.05)
    for scenario in ("fmnist-cnn", "fmnist-mlp"):
        own = [abs(e) for e in summarize.pair_errors(
            [p for p in pairs if summarize.scenario_of(p) == scenario])]
        assert f"- {scenario}, per pair: median {100 * (own[0] + own[1]) / 2:.1f}%" in text


def test_no_pairs_exits_2(tmp_path):
    assert summarize.main([str(tmp_path), "--out", str(tmp_path / "v.md")]) == 2
    make_pairs(str(tmp_path / "mlp"))  # a second folder that does not exist is refused too
    assert summarize.main([str(tmp_path / "mlp"), str(tmp_path / "none"), "--out",
                           str(tmp_path / "v.md")]) == 2


def test_repeated_measured_runs_stand_for_their_pair_by_the_median(tmp_path):
    """Three comparisons of one pair, measured 1.0x, 1.3x and 0.8x: the 1.0x one is the row."""
    make_runs(str(tmp_path), ((1.0, 1.0), (1.3, 1.0), (0.8, 1.0)))
    pairs = summarize.read_pairs(str(tmp_path))
    assert len(pairs) == 1
    median = pairs[0]
    assert summarize.whole_run(median)["error"]["total_s"] == pytest.approx(0.0, abs=1e-12)
    per_epoch = summarize.seconds_per_epoch(median, "b")
    assert median["measured_runs"] == pytest.approx([0.8 * per_epoch, per_epoch, 1.3 * per_epoch])
    out = str(tmp_path / "validation.md")
    assert summarize.main([str(tmp_path), "--out", out]) == 0
    rows = md_table(open(out).read(), "strategy")
    assert len(rows) == 1
    assert rows[0][4] == (f"{per_epoch:.4g} ({0.8 * per_epoch:.4g} - {1.3 * per_epoch:.4g}, "
                          "3 runs)")
    assert rows[0][5] == "+0.0%"
    # The other two runs against the median one: -20% and +30%, median abs 25%.
    assert summarize.repeat_errors(pairs) == pytest.approx([-0.2, 0.3])
    errors = dict((r[0], r) for r in md_table(open(out).read(), "error of"))
    assert errors["a measured run against its pair's median run"][1:] == ["25.0%", "30.0%", "2"]
    assert "range in 1 of 1 pairs" in open(out).read()


def test_runs_simulated_on_their_own_calibrations_stand_by_the_median_error(tmp_path):
    """Three comparisons of one pair, each simulated on its own calibration (validate.sh
    --calibrate run): errors +20%, -5% and +3%. The +3% one is the row, though its measured run
    is the shortest, and the simulated runs' range is beside it."""
    make_runs(str(tmp_path), ((1.0, 1.2), (1.3, 1.235), (0.8, 0.824)))
    pairs = summarize.read_pairs(str(tmp_path))
    assert summarize.pair_errors(pairs) == pytest.approx([0.03])
    shortest = summarize.seconds_per_epoch(pairs[0], "b")
    assert pairs[0]["measured_runs"] == pytest.approx(
        [shortest, shortest / 0.8, 1.3 * shortest / 0.8])
    out = str(tmp_path / "validation.md")
    assert summarize.main([str(tmp_path), "--out", out]) == 0
    row = md_table(open(out).read(), "strategy")[0]
    simulated = summarize.seconds_per_epoch(pairs[0], "a")
    low, high = simulated, 1.235 * simulated / 0.824
    assert row[3] == f"{simulated:.4g} ({low:.4g} - {high:.4g}, 3 runs)"
    assert row[5] == "+3.0%"
    # The measured runs' own spread is still against their median run (1.0x): -20% and +30%.
    assert summarize.repeat_errors(pairs) == pytest.approx([-0.2, 0.3])


def test_the_spread_counts_simulated_epochs_outside_the_measured_range(tmp_path):
    """A pair measured 1.1x and 1.2x its simulation lies outside; one measured once is left out
    of the spread."""
    make_runs(str(tmp_path), ((1.1, 1.0), (1.2, 1.0)))
    single = os.path.join(str(tmp_path), "epoch_sync-w4-m1")
    data = make_compare(single, workers=4, comm_factor=1.0)
    data["a"].update(strategy="epoch_sync", workers=4)
    with open(os.path.join(single, "compare.json"), "w") as f:
        json.dump(data, f)
    pairs = summarize.read_pairs(str(tmp_path))
    assert summarize.within_range(pairs) == (0, 1)
    assert summarize.repeat_errors(pairs) == pytest.approx([1.2 / 1.1 - 1])
    # Measured once everywhere: no spread to state.
    assert summarize.spread_lines([p for p in pairs if len(p["measured_runs"]) == 1],
                                  (0.05, 0.15)) == []


def test_check_exits_3_above_the_targets(tmp_path):
    """--check: 0 at targets just above the pairs' median and worst errors, 3 just below."""
    make_pairs(str(tmp_path))
    errors = sorted(abs(e) for e in summarize.pair_errors(summarize.read_pairs(str(tmp_path))))
    median, worst = 100 * (errors[0] + errors[1]) / 2, 100 * errors[1]
    assert worst > 1.0  # ddp's doubled communication is an error to miss
    out = str(tmp_path / "v.md")

    def check(target_median, target_worst):
        return summarize.main([str(tmp_path), "--out", out, "--check", "--target-median",
                               f"{target_median}%", "--target-worst", str(target_worst)])

    assert check(median + 0.01, worst + 0.01) == 0
    assert "targets met" in open(out).read()
    assert check(median - 0.01, worst + 0.01) == summarize.MISSED
    assert check(median + 0.01, worst - 0.01) == summarize.MISSED
    assert "targets MISSED" in open(out).read()
    # Without --check the same miss still writes the table and exits 0.
    assert summarize.main([str(tmp_path), "--out", out, "--target-worst", "0"]) == 0


def test_check_fails_when_bytes_differ(tmp_path, capsys):
    make_pairs(str(tmp_path))
    path = os.path.join(str(tmp_path), "epoch_sync-w4", "compare.json")
    with open(path) as f:
        data = json.load(f)
    data["bytes"]["equal"] = False
    with open(path, "w") as f:
        json.dump(data, f)
    out = str(tmp_path / "v.md")
    assert summarize.main([str(tmp_path), "--out", out, "--check", "--target-median", "1000",
                           "--target-worst", "1000"]) == summarize.MISSED
    assert "bytes differ in fmnist-mlp epoch_sync at 4" in capsys.readouterr().err
    assert "1 pair(s) differ." in open(out).read()


@pytest.mark.parametrize("option, bad, allowed", [
    *[("--target-worst", bad, "a percentage >= 0") for bad in ("-1", "five", "nan", "inf", "")],
    *[("--steady-spread", bad, "a number >= 1") for bad in ("0.9", "five", "nan", "inf", "")]])
def test_a_bad_target_or_threshold_is_refused(tmp_path, capsys, option, bad, allowed):
    make_pairs(str(tmp_path))
    with pytest.raises(SystemExit) as exit_info:
        summarize.main([str(tmp_path), "--out", str(tmp_path / "v.md"), option, bad])
    assert exit_info.value.code == 2
    assert f"'{bad}': allowed: {allowed}" in capsys.readouterr().err


def test_the_calibrations_spread_is_read_from_the_host_profiles(tmp_path, capsys):
    """Three calibrations of 1.0, 1.2 and 0.9 ms a step (one profile per pair's folder, and a
    profile without the line, left out): 1 ms the median, 10% and 20% from it."""
    make_pairs(str(tmp_path / "compare"))
    platforms = tmp_path / "platform"
    for name, step in (("ddp-w2", "0.001"), ("epoch_sync-w4", "0.0012"), ("serial-w1", "9e-4")):
        (platforms / name / "profiles").mkdir(parents=True)
        (platforms / name / "profiles" / "loopback-cpu.toml").write_text(
            "name = \"loopback\"\n# every pass x: the median of a step's timed parts "
            f"({step} s; p10 1, p90 2)\ncompute_skew = 1\n")
    (platforms / "other" / "profiles").mkdir(parents=True)
    (platforms / "other" / "profiles" / "h100.toml").write_text("name = \"h100\"\n")
    assert summarize.calibrated_steps(str(platforms)) == pytest.approx([0.001, 0.0012, 9e-4])
    out = str(tmp_path / "v.md")
    assert summarize.main([str(tmp_path / "compare"), "--out", out, "--calibrations",
                           f"fmnist-mlp={platforms}"]) == 0
    text = open(out).read()
    assert "## The measurement's own spread" in text  # measured once: the calibrations' alone
    assert ("- fmnist-mlp, the simulated side: 3 calibrations put a step's compute at 0.9 to 1.2 "
            "ms (median 1 ms), 10.0% from that median at the median and 20.0% at worst") in text
    for bad in ("fmnist-mlp", f"={platforms}", f"fmnist-mlp={tmp_path / 'none'}"):
        assert summarize.main([str(tmp_path / "compare"), "--out", out,
                               "--calibrations", bad]) == 2
        assert f"--calibrations '{bad}': allowed: SCENARIO=DIR" in capsys.readouterr().err


def test_runs_are_grouped_by_their_calibrations_steadiness(tmp_path):
    """Five comparisons simulated on four platforms, two runs sharing one calibration (as with
    validate.sh --calibrate pair): a step's p90 / p10 of 1.2x (errors +20% and -5%), 1.5x, the
    threshold itself (+3%), and 2x (-40%, of fmnist-cnn); a platform without a host profile is
    left out. The groups are over both scenarios, then per scenario."""
    compare = tmp_path / "compare"
    make_runs(str(compare), ((1.0, 1.2), (1.0, 0.95), (1.0, 1.03), (1.0, 0.6), (1.0, 1.0)))
    platforms = (("steady", "1.2"), ("steady", "1.2"), ("edge", "1.5"), ("wide", "2"),
                 ("committed", None))
    for k, (name, p90) in enumerate(platforms, start=1):
        platform = tmp_path / "platform" / name
        (platform / "profiles").mkdir(parents=True, exist_ok=True)
        (platform / "loopback.toml").write_text("name = \"loopback\"\n"
                                                "profile = \"loopback-cpu\"\n")
        # A profile that the platform does not name is not read, though it sorts first.
        (platform / "profiles" / "aaa-cpu.toml").write_text(
            "# every pass x: the median of a step's timed parts (1 s; p10 1, p90 9)\n")
        if p90:
            (platform / "profiles" / "loopback-cpu.toml").write_text(
                "# every pass x: the median of a step's timed parts "
                f"(1.1 s; p10 1, p90 {p90})\ncompute_skew = 1\n")
        path = compare / f"ddp-w2-m{k}" / "compare.json"
        data = json.loads(path.read_text())
        data["a"]["platform"] = str(platform / "loopback.toml")
        data["a"]["name"] = "fmnist-cnn" if name == "wide" else "fmnist-mlp"
        path.write_text(json.dumps(data))
    steadiness = summarize.calibration_steadiness(summarize.read_comparisons(str(compare)))
    assert [spread for spread, _, _ in steadiness] == pytest.approx([1.2, 1.5, 2.0])
    assert [errors for _, _, errors in steadiness] == [pytest.approx([0.2, -0.05]),
                                                       pytest.approx([0.03]),
                                                       pytest.approx([-0.4])]
    out = str(tmp_path / "v.md")
    assert summarize.main([str(compare), "--out", out]) == 0
    text = open(out).read()
    assert ("- the calibrations' steadiness: a step's timed parts spread 1.50x from p10 to p90 "
            "at the median over 3 calibrations, 2.00x at widest (the error of the runs "
            "simulated on it: -40.0%); `syncopate calibrate` warns over 1.5x") in text
    assert md_table(text, "runs simulated on a calibration") == [
        ["within 1.5x", "2", "5.0%", "20.0%", "3"],
        ["over 1.5x (warned of)", "1", "40.0%", "40.0%", "1"],
        ["fmnist-mlp, within 1.5x", "2", "5.0%", "20.0%", "3"],
        ["fmnist-mlp, over 1.5x (warned of)", "0", "-", "-", "0"],
        ["fmnist-cnn, within 1.5x", "0", "-", "-", "0"],
        ["fmnist-cnn, over 1.5x (warned of)", "1", "40.0%", "40.0%", "1"]]
    # A stricter threshold (validate.sh --steady-spread, as calibrate's) moves the 1.5x one over.
    assert summarize.main([str(compare), "--out", out, "--steady-spread", "1.3"]) == 0
    assert md_table(open(out).read(), "runs simulated on a calibration")[:2] == [
        ["within 1.3x", "1", "12.5%", "20.0%", "2"],
        ["over 1.3x (warned of)", "2", "21.5%", "40.0%", "2"]]


def test_the_steadiness_threshold_is_the_one_calibrate_warns_over():
    """summarize.py groups runs at the spread over which `syncopate calibrate` warns."""
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "app",
                          "calibrate_fit.hpp")
    with open(header) as f:
        declared = re.search(r"kSteadyStepSpread = ([0-9.]+);", f.read())
    assert declared and float(declared.group(1)) == summarize.STEADY_STEP_SPREAD


def write_platform(directory, p90):
    """A platform file and the host profile it names, a step's p10 1 s and p90 p90 s."""
    (directory / "profiles").mkdir(parents=True)
    (directory / "loopback.toml").write_text("name = \"loopback\"\nprofile = \"loopback-cpu\"\n")
    (directory / "profiles" / "loopback-cpu.toml").write_text(
        f"# every pass x: the median of a step's timed parts (1.1 s; p10 1, p90 {p90})\n")
    return str(directory / "loopback.toml")


def point_at(comparison_dir, platform, measured):
    """Sets a comparison's simulated platform and measured run's path."""
    path = comparison_dir / "compare.json"
    data = json.loads(path.read_text())
    data["a"]["platform"] = platform
    data["b"]["path"] = measured
    path.write_text(json.dumps(data))


def test_recalibrated_runs_are_set_beside_their_calibrations_set_aside(tmp_path):
    """Three measured runs on steady kept calibrations (errors +5%, -10%, +2%); the first was
    also simulated on two calibrations set aside (+30% at 2x, -4% at 1.8x), the third on one
    (+20% at 3x), and a comparison set aside whose measured run was not kept is left out. The
    table pairs them by measured run; the set-aside ones join the steadiness table; their
    profiles are not the calibrations' spread."""
    compare, aside = tmp_path / "compare", tmp_path / "recalibrated"
    make_runs(str(compare), ((1.0, 1.05), (1.0, 0.9), (1.0, 1.02)))
    make_runs(str(aside), ((1.0, 1.3), (1.0, 0.96), (1.0, 1.2), (1.0, 2.0)))
    platforms = tmp_path / "platform"
    for k in (1, 2, 3):
        point_at(compare / f"ddp-w2-m{k}", write_platform(platforms / f"ddp-w2-m{k}", "1.2"),
                 f"/runs/mpi/ddp-w2-m{k}")
    for k, (run, warned, p90) in enumerate((("m1", 1, "2"), ("m1", 2, "1.8"), ("m3", 1, "3"),
                                            ("m9", 1, "2")), start=1):
        platform = write_platform(platforms / f"ddp-w2-{run}" / f"warned-{warned}", p90)
        point_at(aside / f"ddp-w2-m{k}", platform, f"/runs/mpi/ddp-w2-{run}")
    recalibrated = summarize.recalibrated_runs(summarize.read_comparisons(str(compare)),
                                               summarize.read_comparisons(str(aside)))
    assert [(kept["b"]["path"], len(others)) for kept, others in recalibrated] == [
        ("/runs/mpi/ddp-w2-m1", 2), ("/runs/mpi/ddp-w2-m3", 1)]
    assert summarize.calibrated_steps(str(platforms)) == pytest.approx([1.1, 1.1, 1.1])
    out = str(tmp_path / "v.md")
    assert summarize.main([str(compare), "--out", out, "--recalibrated", str(aside)]) == 0
    text = open(out).read()
    assert ("- 2 measured run(s) simulated on the calibration kept and on the 3 that `syncopate "
            "calibrate` warned of before it (set aside, then calibrated again), each compared "
            "with the same measured run: on the kept ones 3.5% at the median, 5.0% at worst; on "
            "the ones set aside 20.0% at the median, 30.0% at worst; the kept calibration came "
            "closer in 2 of 3 comparisons") in text
    rows = md_table(text, "scenario | strategy | workers | measured run")
    measured = [f"{summarize.seconds_per_epoch(kept, 'b'):.4g}" for kept, _ in recalibrated]
    assert [row[3:] for row in rows] == [
        ["ddp-w2-m1", measured[0], "1.20x +5.0%", "2.00x +30.0%, 1.80x -4.0%"],
        ["ddp-w2-m3", measured[1], "1.20x +2.0%", "3.00x +20.0%"]]
    # Every comparison by its calibration's steadiness, those set aside included.
    assert md_table(text, "runs simulated on a calibration")[:2] == [
        ["within 1.5x", "3", "5.0%", "10.0%", "3"],
        ["over 1.5x (warned of)", "4", "25.0%", "100.0%", "4"]]
    # Without --recalibrated, no such section; a folder that is not there is refused.
    assert summarize.main([str(compare), "--out", out]) == 0
    assert "## Recalibrated runs" not in open(out).read()
    assert summarize.main([str(compare), "--out", out, "--recalibrated",
                           str(tmp_path / "none")]) == 2
