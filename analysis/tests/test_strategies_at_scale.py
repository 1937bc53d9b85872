"""strategies_at_scale/table.py: each row's figures follow its run's summary.json; a refused run
quotes its log."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "strategies_at_scale"))
import table  # noqa: E402


def write_summary(folder, total_s, comm_s):
    os.makedirs(folder)
    summary = {
        "workers": 4, "epochs": 1, "total_time_s": total_s, "compute_time_s": 4 * 10 * 0.5,
        "comm_time_s": comm_s, "comm_total_time_s": 2 * comm_s, "bytes_sent": 123456789,
        "memory_per_gpu_bytes": 10_000_000_000, "memory_parameters_bytes": 4_000_000_000,
        "memory_gradients_bytes": 3_000_000_000, "memory_optimizer_state_bytes": 2_000_000_000,
        "memory_activations_bytes": 1_000_000_000,
        "scenario": {"batch_size": 2, "sim": {"cost_only_train_samples": 80}},
    }
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump(summary, f)


def test_rows_follow_the_summaries(tmp_path, capsys):
    # 80 samples, 4 workers x batch 2: 10 steps.
    write_summary(str(tmp_path / "ddp"), total_s=7.5, comm_s=4 * 10 * 0.002)
    with open(tmp_path / "zero1.log", "w") as f:
        f.write("syncopate: error: x.toml: the run needs 99 GB | more\n")
    table.main(str(tmp_path))
    lines = capsys.readouterr().out.splitlines()
    ddp = next(line for line in lines if line.startswith("| ddp |"))
    assert "| 0.7500 |" in ddp
    assert "10 GB (parameters 4, gradients 3, optimizer state 2, activations 1)" in ddp
    assert "| 500.0 | 2.0 | 4.0 |" in ddp
    zero1 = next(line for line in lines if line.startswith("| zero, stage 1 |"))
    assert "refused: syncopate: error: x.toml: the run needs 99 GB / more" in zero1
    assert any(line.startswith("| epoch_sync | not run |") for line in lines)
