"""paper_at_scale/tables.py: the tables, the verdict and the plot follow the runs' summaries."""

import os
import sys

from conftest import make_run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "paper_at_scale"))
import tables  # noqa: E402

CONFIGS = "ddp-ib --strategy ddp\nsync-allreduce --strategy epoch_sync\n# a comment\n" \
          "async-master --strategy epoch_async\n"


def make_study(path):
    """serial: 64 s per epoch. ddp-ib: 64 / W + 4 s; sync-allreduce: 64 / W + 0.01 s (ideal);
    async-master: 64 / W + 0.5 W s (merges queue on the master)."""
    make_run(os.path.join(path, "serial-w1"), strategy="serial", workers=1, epochs=2,
             epoch_s=64.0, comm_s=0.0)
    for w in (2, 4, 8, 16, 32, 64):
        for name, extra in (("ddp-ib", 4.0), ("sync-allreduce", 0.01), ("async-master", 0.5 * w)):
            make_run(os.path.join(path, f"{name}-w{w}"), workers=w, epochs=2,
                     epoch_s=64.0 / w + extra, comm_s=extra)
    with open(os.path.join(path, "configs.txt"), "w") as f:
        f.write(CONFIGS)


def test_figures_and_verdict(tmp_path):
    make_study(str(tmp_path))
    configs = tables.read_configs(str(tmp_path / "configs.txt"))
    assert [c[0] for c in configs] == ["ddp-ib", "sync-allreduce", "async-master"]
    rows = tables.table_rows(tables.read_runs(str(tmp_path)), configs)
    f = rows["sync-allreduce"][64]
    assert abs(f["epoch_s"] - 1.01) < 1e-12
    assert abs(f["speedup"] - 64 / 1.01) < 1e-9
    assert abs(f["efficiency"] - 1 / 1.01) < 1e-9
    assert abs(f["sync_share"] - 0.01 / 1.01) < 1e-9
    assert abs(f["less_time"] - (1 - 1.01 / 5.0)) < 1e-9
    assert rows["ddp-ib"][8]["less_time"] == 0
    best = tables.best_less_time(rows)
    assert best[1:] == ("sync-allreduce", 64)
    # async-master's time rises past W = 8: it does not scale; sync-allreduce does.
    assert tables.scales_to(rows["sync-allreduce"])
    assert not tables.scales_to(rows["async-master"])
    assert not tables.scales_to(rows["ddp-ib"])  # efficiency 1 / 5 at 64
    lines = tables.verdict(rows)
    assert "against ddp-ib at the same W: not reproduced; the largest reduction is 79.8%, by " \
        "sync-allreduce at W=64" in lines[0]
    assert "holds for sync-allreduce; fails for ddp-ib, async-master" in lines[1]
    # Against a slower baseline (10 x ddp-ib) the claim holds: 1 - 1.01 / 50 = 98%.
    for w, f in rows["ddp-ib"].items():
        rows.setdefault("ddp-slow", {})[w] = dict(f, epoch_s=10 * f["epoch_s"])
    assert tables.best_less_time(rows, "ddp-slow") == (1 - 1.01 / 50, "sync-allreduce", 64)
    assert "against ddp-slow at the same W: reproduced; the largest reduction is 98.0%" \
        in tables.verdict(rows)[1]


def test_markdown_and_plot(tmp_path):
    make_study(str(tmp_path))
    md, png = str(tmp_path / "out.md"), str(tmp_path / "out.png")
    assert tables.main([str(tmp_path), "--configs", str(tmp_path / "configs.txt"), "--md", md,
                        "--png", png, "--note", "a note"]) == 0
    text = open(md).read()
    assert "- a note" in text
    assert "| configuration | W=2 | W=4 | W=8 | W=16 | W=32 | W=64 |" in text
    assert "| async-master | 33.0 | 18.0 | 12.0 | 12.0 | 18.0 | 33.0 |" in text
    assert "![scaling](out.png)" in text
    assert os.path.getsize(png) > 10000


def test_no_runs_is_an_error(tmp_path):
    (tmp_path / "configs.txt").write_text(CONFIGS)
    assert tables.main([str(tmp_path), "--configs", str(tmp_path / "configs.txt"),
                        "--md", str(tmp_path / "x.md")]) == 1
