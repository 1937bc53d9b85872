#!/usr/bin/env bash
# The paper at scale: paper-nfnet-cinic, cost-only (simulated time only), on mn5-acc, for W = 2,
# 4, 8, 16, 32 and 64 workers and every configuration of analysis/paper_at_scale/configs.txt (plus
# the serial baseline at W = 1); then tables.py writes analysis/paper_at_scale/paper_at_scale.md
# and paper_at_scale.png.
#
#   analysis/paper_at_scale/run.sh [--workers "2 4 8 16 32 64"] [--epochs 6] [--out DIR]
#                                  [--bin PATH] [--jobs 2]
#
# Runs go to DIR (default runs/paper_at_scale), one folder per configuration and worker count; a
# run already there is kept (re-running finishes an interrupted study; remove DIR to start over).
# Exit 0 when every run succeeded and the tables were written, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/bin/syncopate
out=$root/runs/paper_at_scale
workers="2 4 8 16 32 64"
epochs=6  # a multiple of 2 and 3: epoch_sync every 2 and every 3 epochs average on schedule
jobs=2
args="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --workers) workers=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
# The shipped scenario; the epoch-level configurations set data.blocks themselves.
scenario=$root/scenarios/paper-nfnet-cinic.toml

# One line per run: name, then the arguments of `syncopate run`. ddp runs at the paper's global
# batch of 128 (128 / W per GPU); one node per 4 GPUs.
points=$out/points.txt
: >"$points"
echo "serial-w1 --strategy serial --workers 1 --set sim.platform_params.nodes=1" >>"$points"
while read -r config rest; do
  case $config in ''|'#'*) continue ;; esac
  for w in $workers; do
    settings=${rest//@BATCH@/$((128 / w))}
    echo "$config-w$w --workers $w --set sim.platform_params.nodes=$(((w + 3) / 4)) $settings" \
      >>"$points"
  done
done <"$here/configs.txt"

run_point() {  # name, arguments...
  local name=$1
  shift
  [ -f "$out/$name/summary.json" ] && return 0
  "$bin" run "$scenario" --epochs "$epochs" \
    --set trace.steps=0 --quiet "$@" --out "$out/$name" >"$out/$name.log" 2>&1 ||
    { echo "failed: $out/$name.log" >&2; return 1; }
}
export -f run_point
export bin scenario out epochs
start=$(date +%s)
failed=0
xargs -P "$jobs" -L 1 bash -c 'run_point "$@"' _ <"$points" || failed=1
wall=$(($(date +%s) - start))

/usr/bin/python3 "$here/tables.py" "$out" --configs "$here/configs.txt" \
  --md "$here/paper_at_scale.md" --png "$here/paper_at_scale.png" \
  --note "command: analysis/paper_at_scale/run.sh${args:+ $args} (runs in ${out#"$root"/}, $wall s wall for the runs this call made)" \
  --note "scenario: scenarios/paper-nfnet-cinic.toml (cost-only, analytic fidelity, 180,000 samples per epoch, batch 128 per step), $epochs epochs, platform mn5-acc with one node per 4 GPUs" || failed=1
exit $failed
