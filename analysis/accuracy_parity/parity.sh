#!/usr/bin/env bash
# Accuracy parity in emulation: one scenario (fmnist-cnn by default) trained for real on the
# simulator at several worker counts with ddp, epoch_sync, epoch_sync every 2 epochs, epoch_async
# and local_sgd, against ddp and against one worker; writes analysis/accuracy_parity/parity.md and
# parity.png.
#
#   analysis/accuracy_parity/parity.sh [--scenario NAME] [--epochs N] [--workers "2 4 8"]
#                                      [--out DIR] [--bin PATH] [--md FILE] [--set key=value]...
#
# Every run uses the scenario's per-worker batch size and learning rate unchanged (so ddp's global
# batch is W times the serial one), the sim backend at analytic fidelity (the arithmetic does not
# depend on the fidelity) and the scenario's seed. Runs go to DIR (default runs/parity/<scenario>)
# and are kept: re-running finishes an interrupted study. Exit 1 when a run failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/bin/syncopate
scenario=fmnist-cnn
epochs=15
workers="2 4 8"
out=""
md=$here/parity.md
sets=()
args="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --scenario) scenario=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --md) md=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "parity.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${out:-$root/runs/parity/$scenario}
mkdir -p "$out"
export OMP_NUM_THREADS=1

# name strategy workers extra-settings...
configs=("serial serial 1")
for w in $workers; do
  configs+=("ddp-w$w ddp $w"
            "epoch_sync-w$w epoch_sync $w"
            "epoch_sync_every2-w$w epoch_sync $w strategy.every=2"
            "epoch_async-w$w epoch_async $w"
            "local_sgd-w$w local_sgd $w strategy.every=8")
done

failed=0
start=$(date +%s)
for config in "${configs[@]}"; do
  read -r name strategy w extra <<<"$config"
  [ -f "$out/$name/summary.json" ] && continue
  echo "== $name"
  knob=()
  [ -n "${extra:-}" ] && knob=(--set "$extra")
  "$bin" run "$scenario" --backend sim --strategy "$strategy" --workers "$w" --epochs "$epochs" \
    --set sim.fidelity=analytic "${knob[@]}" "${sets[@]}" --quiet --out "$out/$name" \
    >"$out/$name.log" 2>&1 || { echo "   failed: $out/$name.log"; failed=1; }
done
wall=$(( $(date +%s) - start ))

/usr/bin/python3 "$here/parity_table.py" "$out" --out "$md" \
  --note "command: analysis/accuracy_parity/parity.sh ${args:-} (runs in ${out#"$root"/})" \
  --note "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc --all) cores; ${wall} s of wall time for the runs made by this call" \
  --note "scenario $scenario, $epochs epochs, sim backend (emulation), analytic fidelity; per-worker batch and learning rate as in the scenario; local_sgd strategy.every=8; settings: ${sets[*]:-none}"
exit $failed
