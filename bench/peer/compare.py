#!/usr/bin/env python3
"""Side-by-side speed comparison of Syncopate and PyTorch on this machine, in one run.

The machine is shared and noisy, so the two are run alternately (ours, theirs, ours, ...) and
compared by the ratio of their medians of seconds per epoch.

  bench/peer/compare.py single --model mlp --epochs 3 --reps 3
  bench/peer/compare.py ddp --epochs 2 --reps 3           # 2 ranks, ours on MPI, theirs gloo
  bench/peer/compare.py epoch_sync --epochs 2 --reps 3

Prints one JSON object: per-side medians, the ratio ours/theirs, final accuracies, and which
BLAS, allocator and versions the peer ran with. The peer must run with an optimised BLAS
(OpenBLAS: run bench/peer/setup.sh once): with the reference BLAS it refuses, since that peer is
not one a user would run. It runs with TCMalloc preloaded (--peer-malloc tcmalloc, the default),
as PyTorch's CPU performance guide recommends: under glibc's malloc torch maps and unmaps its
large tensors every step, which made its cnn epochs swing between 19 s and 73 s here. Ours runs
with the system's malloc (it allocates nothing per step).
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYNCOPATE = os.path.join(ROOT, "build", "bin", "syncopate")
PYTHON = "/usr/bin/python3"  # Debian's torch is installed for the system interpreter


def peer_blas():
    """The libblas.so.3 that the peer's torch loads (Debian's alternatives), and versions."""
    target = os.path.realpath(f"/usr/lib/{multiarch()}/libblas.so.3")
    probe = subprocess.run(
        [PYTHON, "-c", "import torch, numpy; print(torch.__version__, numpy.__version__)"],
        capture_output=True, text=True)
    torch_version, numpy_version = (probe.stdout.split() + ["?", "?"])[:2]
    versions = {}
    for package in ("python3-torch", "libopenblas0-pthread", "libblas3"):
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                             capture_output=True, text=True)
        versions[package] = out.stdout.strip() if out.returncode == 0 else None
    return {"libblas.so.3": target, "torch": torch_version, "numpy": numpy_version,
            "packages": versions}


def multiarch():
    return subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                          text=True).stdout.strip() or "x86_64-linux-gnu"


TCMALLOC = f"/usr/lib/{multiarch()}/libtcmalloc_minimal.so.4"


def one_thread_env(preload=None):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    return env


def peer_malloc(choice):
    """The library to preload for the peer (None: glibc's malloc), checked to be the one the
    peer's interpreter maps."""
    if choice == "glibc":
        return None, {"malloc": "glibc"}
    if not os.path.exists(TCMALLOC):
        sys.exit(f"{TCMALLOC} not found: run bench/peer/setup.sh first (or pass --peer-malloc glibc)")
    probe = subprocess.run(
        [PYTHON, "-c", "print(any('tcmalloc' in l for l in open('/proc/self/maps')))"],
        capture_output=True, text=True, env=one_thread_env(TCMALLOC))
    if probe.stdout.strip() != "True":
        sys.exit(f"LD_PRELOAD={TCMALLOC} did not load into {PYTHON}: {probe.stderr.strip()}")
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libtcmalloc-minimal4"],
                         capture_output=True, text=True)
    return TCMALLOC, {"malloc": "tcmalloc", "LD_PRELOAD": TCMALLOC,
                      "libtcmalloc-minimal4": out.stdout.strip() or None}


def epoch_seconds(run_dir):
    """Seconds per epoch from a run directory: per epoch, last end minus first start."""
    spans = {}
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        for row in csv.DictReader(f):
            e = int(row["epoch"])
            start, end = float(row["start_s"]), float(row["end_s"])
            lo, hi = spans.get(e, (start, end))
            spans[e] = (min(lo, start), max(hi, end))
    return [hi - lo for _, (lo, hi) in sorted(spans.items())]


def run_ours(mode, model, epochs, lr, seed, workdir):
    out = tempfile.mkdtemp(prefix="ours-", dir=workdir)
    shutil.rmtree(out)
    scenario = os.path.join(ROOT, "scenarios", f"fmnist-{model}.toml")
    # The peer's training recipe: pixels scaled to [0, 1] only, constant learning rate,
    # momentum 0.9, no weight decay.
    cmd = [SYNCOPATE, "run", scenario, "--epochs", str(epochs), "--out", out,
           "--set", "eval_every_epoch=false", "--set", "schedule.kind=constant",
           "--set", f"schedule.lr={lr}", "--set", "schedule.warmup_epochs=0",
           "--set", "optimizer.weight_decay=0", "--set", "data.normalize=false",
           "--seed", str(seed)]
    if mode == "single":
        cmd += ["--workers", "1"]
    else:
        mpirun = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none"]
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        cmd = mpirun + cmd + ["--backend", "mpi", "--workers", "2", "--strategy", mode]
    subprocess.run(cmd, check=True, env=one_thread_env(), stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as f:
        accuracy = json.load(f)["final_test_accuracy"]
    return epoch_seconds(out), accuracy


def run_theirs(mode, model, epochs, lr, seed, preload):
    if mode == "single":
        cmd = [PYTHON, os.path.join(ROOT, "bench", "peer", "fmnist_torch.py"),
               "--model", model, "--epochs", str(epochs), "--batch", "64", "--lr", str(lr), "--seed", str(seed)]
    else:
        cmd = [PYTHON, os.path.join(ROOT, "bench", "peer", "ddp_torch.py"),
               "--mode", mode, "--epochs", str(epochs), "--lr", str(lr), "--seed", str(seed)]
    out = subprocess.run(cmd, check=True, env=one_thread_env(preload), capture_output=True,
                         text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    per_epoch = result.get("epoch_seconds") or [result["seconds_per_epoch"]]
    accuracy = result.get("final_test_accuracy", result.get("test_accuracy"))
    return per_epoch, accuracy


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", choices=["single", "ddp", "epoch_sync"])
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--allow-reference-blas", action="store_true",
                   help="measure even if the peer's torch would load the reference BLAS")
    p.add_argument("--peer-malloc", choices=["tcmalloc", "glibc"], default="tcmalloc",
                   help="the peer's allocator (default tcmalloc, preloaded)")
    args = p.parse_args()
    if not os.path.exists(SYNCOPATE):
        sys.exit(f"{SYNCOPATE} not found: build first (scripts/setup.sh)")
    blas = peer_blas()
    if "openblas" not in blas["libblas.so.3"] and not args.allow_reference_blas:
        sys.exit(f"the peer's libblas.so.3 is {blas['libblas.so.3']}, not OpenBLAS: run "
                 "bench/peer/setup.sh first (or pass --allow-reference-blas)")
    preload, malloc = peer_malloc(args.peer_malloc)
    ours, theirs, acc_ours, acc_theirs = [], [], None, None
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.reps):
            seconds, acc_ours = run_ours(args.mode, args.model, args.epochs, args.lr, args.seed, workdir)
            ours += seconds
            seconds, acc_theirs = run_theirs(args.mode, args.model, args.epochs, args.lr, args.seed,
                                              preload)
            theirs += seconds
    m_ours, m_theirs = statistics.median(ours), statistics.median(theirs)
    print(json.dumps({
        "mode": args.mode, "model": args.model, "epochs": args.epochs, "reps": args.reps,
        "ours_seconds_per_epoch_median": round(m_ours, 4),
        "peer_seconds_per_epoch_median": round(m_theirs, 4),
        "ratio_ours_over_peer": round(m_ours / m_theirs, 3),
        "ours_final_test_accuracy": acc_ours, "peer_final_test_accuracy": acc_theirs,
        "ours_samples": ours, "peer_samples": theirs, "peer_blas": blas,
        "peer_malloc": malloc}))


if __name__ == "__main__":
    main()
