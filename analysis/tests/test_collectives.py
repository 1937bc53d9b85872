"""validation/collectives.py: each row's error, the summary, and --check against the target."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "validation"))
import collectives  # noqa: E402

HEADER = ("backend,platform,fidelity,ranks,op,bytes,algorithm,wire,median_s,p10_s,p90_s,repeats,"
          "algbw_GBps,busbw_GBps\n")


def write(path, backend, ranks, seconds, wire="fp32"):
    """seconds: {(op, bytes): median}."""
    with open(path, "w") as f:
        f.write(HEADER)
        for (op, size), t in seconds.items():
            algorithm = "ring" if op == "allreduce" else ""
            f.write(f"{backend},,,{ranks},{op},{size},{algorithm},{wire},{t},{0.9 * t},{1.1 * t},"
                    "5,1,1\n")


def make(root, factor):
    """Measured times t; simulated t * factor, except allgather at 4 KiB: exact."""
    measured = {("allreduce", 4096): 1e-5, ("allreduce", 16384): 2e-5,
                ("allgather", 4096): 1e-5}
    simulated = {k: (t if k[0] == "allgather" else t * factor) for k, t in measured.items()}
    write(os.path.join(root, "mpi-2.csv"), "mpi", 2, measured)
    write(os.path.join(root, "sim-2.csv"), "sim", 2, simulated)


def test_errors_and_summary(tmp_path):
    make(str(tmp_path), 1.2)
    out = str(tmp_path / "c.md")
    assert collectives.main([str(tmp_path), "--out", out, "--note", "n1"]) == 0
    text = open(out).read()
    assert "- n1" in text
    assert "| allreduce | 4 KiB | ring | 12.0 | 10.0 (9.0 – 11.0) | +20.0% |" in text
    assert "| allgather | 4 KiB | - | 10.0 | 10.0 (9.0 – 11.0) | +0.0% |" in text
    # errors 20%, 20%, 0%: median 20%, above the 10% target.
    assert "| all (3) | 20.0% | 20.0% | 10% | no |" in text
    assert os.path.isfile(str(tmp_path / "c.png"))


def test_check_fails_above_the_target_only(tmp_path):
    make(str(tmp_path), 1.2)
    assert collectives.main([str(tmp_path), "--out", str(tmp_path / "c.md"), "--check"]) == 1
    make(str(tmp_path), 1.05)
    assert collectives.main([str(tmp_path), "--out", str(tmp_path / "c.md"), "--check"]) == 0


def test_the_target_can_be_set(tmp_path, capsys):
    # errors 20%, 20%, 0%: median 20%.
    make(str(tmp_path), 1.2)
    out = str(tmp_path / "c.md")
    assert collectives.main([str(tmp_path), "--out", out, "--check", "--target-median", "21%"]) == 0
    assert "| all (3) | 20.0% | 20.0% | 21% | yes |" in open(out).read()
    assert collectives.main([str(tmp_path), "--out", out, "--check", "--target-median", "19"]) == 1
    assert "median error 20.0% exceeds the target 19%" in capsys.readouterr().err
    assert "| all (3) | 20.0% | 20.0% | 19% | no |" in open(out).read()


def test_a_bad_target_is_refused(tmp_path, capsys):
    make(str(tmp_path), 1.2)
    for bad in ("ten", "-5", "inf"):
        with pytest.raises(SystemExit) as exit:
            collectives.main([str(tmp_path), "--out", str(tmp_path / "c.md"), "--target-median",
                              bad])
        assert exit.value.code == 2
        assert f"'{bad}': allowed: a percentage >= 0" in capsys.readouterr().err
    assert not os.path.exists(str(tmp_path / "c.md"))


def test_no_pair_is_an_error(tmp_path, capsys):
    write(str(tmp_path / "sim-4.csv"), "sim", 4, {("allreduce", 4096): 1e-5})
    assert collectives.main([str(tmp_path), "--out", str(tmp_path / "c.md")]) == 2
    assert "no sim-W.csv / mpi-W.csv pair" in capsys.readouterr().err


def test_a_wire_format_is_named_and_must_match(tmp_path, capsys):
    seconds = {("allreduce", 4096): 1e-5}
    write(str(tmp_path / "mpi-2.csv"), "mpi", 2, seconds, "fp16")
    write(str(tmp_path / "sim-2.csv"), "sim", 2, seconds, "fp16")
    out = str(tmp_path / "c.md")
    assert collectives.main([str(tmp_path), "--out", out]) == 0
    assert "### 2 ranks, fp16 on the wire" in open(out).read()
    write(str(tmp_path / "sim-2.csv"), "sim", 2, seconds, "bf16")
    assert collectives.main([str(tmp_path), "--out", out]) == 2
    assert "allreduce of 4096 B sends bf16 in one and fp16 in the other" in capsys.readouterr().err


def test_trials_are_joined_by_their_median(tmp_path):
    # Three trials of 2 ranks: simulated 10, 30, 20 us and measured 40, 10, 20 us at one size.
    for trial, (sim, mpi) in enumerate([(1e-5, 4e-5), (3e-5, 1e-5), (2e-5, 2e-5)], start=1):
        write(str(tmp_path / f"sim-2.{trial}.csv"), "sim", 2, {("allreduce", 4096): sim})
        write(str(tmp_path / f"mpi-2.{trial}.csv"), "mpi", 2, {("allreduce", 4096): mpi})
    out = str(tmp_path / "c.md")
    assert collectives.main([str(tmp_path), "--out", out]) == 0
    # The medians, 20 and 20 us; the measured spread from the lowest p10 (9) to the highest p90
    # (44).
    assert "| allreduce | 4 KiB | ring | 20.0 | 20.0 (9.0 – 44.0) | +0.0% |" in open(out).read()
    # Each side's other trials against its median: measured 10 and 40 us against 20 (50%, 100%),
    # simulated 10 and 30 (50%, 50%).
    assert "| measured trials against their row's median (2) | 75.0% | 100.0% | | |" in open(
        out).read()
    assert "| simulated trials against their row's median (2) | 50.0% | 50.0% | | |" in open(
        out).read()


def test_an_even_count_of_trials_leaves_none_out():
    row = {"trials_s": [1.0, 3.0], "median_s": 2.0}
    assert collectives.trial_errors(row) == pytest.approx([-0.5, 0.5])
    assert collectives.trial_errors({"median_s": 2.0}) == []  # a single run: no spread


def test_a_rank_count_both_as_a_pair_and_as_trials_is_refused(tmp_path, capsys):
    for name in ("sim-2.csv", "sim-2.1.csv"):
        write(str(tmp_path / name), "sim", 2, {("allreduce", 4096): 1e-5})
        write(str(tmp_path / name.replace("sim", "mpi")), "mpi", 2, {("allreduce", 4096): 1e-5})
    assert collectives.main([str(tmp_path), "--out", str(tmp_path / "c.md")]) == 2
    assert "2 ranks both as one pair and as trials; keep one" in capsys.readouterr().err
