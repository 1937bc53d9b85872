"""accuracy_parity/parity_table.py: parity.md's gaps are the runs' accuracies, in points."""

import json
import os
import sys

from conftest import make_run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "accuracy_parity"))
import parity_table  # noqa: E402


def set_final(path, final):
    """make_run's accuracy is 0.5 + 0.1 e; here the last epoch's is `final`."""
    lines = open(os.path.join(path, "metrics.csv")).read().splitlines()
    header = lines[0].split(",")
    col = header.index("test_accuracy")
    epochs = max(int(l.split(",")[1]) for l in lines[1:])
    out = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        if int(cells[1]) == epochs:
            cells[col] = str(final)
        out.append(",".join(cells))
    open(os.path.join(path, "metrics.csv"), "w").write("\n".join(out) + "\n")
    summary = json.load(open(os.path.join(path, "summary.json")))
    summary["final_test_accuracy"] = final
    json.dump(summary, open(os.path.join(path, "summary.json"), "w"))


def make_study(root):
    finals = {("serial", 1): 0.90, ("ddp", 2): 0.89, ("epoch_sync", 2): 0.885,
              ("epoch_async", 2): 0.87, ("ddp", 4): 0.88, ("epoch_sync", 4): 0.86}
    for (config, w), final in finals.items():
        path = os.path.join(root, "serial" if config == "serial" else f"{config}-w{w}")
        make_run(path, strategy=config, workers=w, epochs=3)
        set_final(path, final)


def test_gaps_against_serial_and_ddp(tmp_path):
    make_study(str(tmp_path / "runs"))
    out = str(tmp_path / "parity.md")
    assert parity_table.main([str(tmp_path / "runs"), "--out", out, "--note", "a note"]) == 0
    text = open(out).read()
    assert "- a note" in text
    # epoch_sync at 4 workers: 0.86 against serial's 0.90 and ddp's 0.88.
    assert "| epoch_sync | 4 | 0.8600 | 0.8600 | -4.00 | -2.00 |" in text
    assert "| epoch_async | 2 | 0.8700 | 0.8700 | -3.00 | -2.00 |" in text
    assert "| ddp | 2 | 0.8900 | 0.8900 | -1.00 | - |" in text
    assert "epoch_sync: final accuracy 0.8600 to 0.8850 over W = 2, 4; largest gap to one " \
           "worker -4.00 points (W = 4)" in text
    assert os.path.isfile(str(tmp_path / "parity.png"))


def test_no_runs_is_an_error(tmp_path, capsys):
    os.makedirs(str(tmp_path / "empty"))
    assert parity_table.main([str(tmp_path / "empty"), "--out", str(tmp_path / "p.md")]) == 2
    assert "no run directories" in capsys.readouterr().err
