#!/usr/bin/env bash
# Strategies at scale: GPT-2 XL on 1,024 GPUs of mn5-acc (scenarios/gpt2-xl-strategies-1024.toml:
# cost-only, analytic fidelity, 100 steps of one 1,024-token sequence per GPU, AdamW), one run per
# strategy of the comparison (ddp, zero stages 1 and 3, local_sgd, diloco, epoch_sync; zero
# stage 2 as well; ddp and zero with compressed communication); then table.py writes analysis/strategies_at_scale/strategies_at_scale.md
# (seconds per step, memory per GPU with its parts, bytes, exposed and total communication).
#
#   analysis/strategies_at_scale/run.sh [--out DIR] [--bin PATH]
#
# Runs go to DIR (default runs/strategies_at_scale), one folder per strategy; a run already there
# is kept (remove DIR to start over). A run the GPU's memory refuses leaves its message in
# DIR/NAME.log, which the table quotes. Exit 0 when the table was written.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/bin/syncopate
out=$root/runs/strategies_at_scale
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
scenario=$root/scenarios/gpt2-xl-strategies-1024.toml
export SYNCOPATE_DATA_DIR=${SYNCOPATE_DATA_DIR:-$root}

# name, then the arguments of `syncopate run`.
points=(
  "ddp --strategy ddp"
  "zero1 --strategy zero --set strategy.stage=1"
  "zero2 --strategy zero --set strategy.stage=2"
  "zero3 --strategy zero --set strategy.stage=3"
  "zero3-200mb --strategy zero --set strategy.stage=3 --set strategy.bucket_mb=200"
  "local_sgd --strategy local_sgd --set strategy.every=8"
  "diloco --strategy diloco --set strategy.every=8"
  "epoch_sync --strategy epoch_sync"
  "ddp-bf16 --strategy ddp --set strategy.compression=bf16"
  "ddp-powersgd --strategy ddp --set strategy.compression=powersgd --set strategy.powersgd_rank=4"
  "zero1-bf16 --strategy zero --set strategy.stage=1 --set strategy.compression=bf16"
  "zero3-200mb-bf16 --strategy zero --set strategy.stage=3 --set strategy.bucket_mb=200 --set strategy.compression=bf16"
)
for point in "${points[@]}"; do
  read -r name args <<<"$point"
  [ -f "$out/$name/summary.json" ] && continue
  echo "run.sh: $name" >&2
  # shellcheck disable=SC2086 # the arguments are words
  if ! "$bin" run "$scenario" $args --quiet --out "$out/$name" >"$out/$name.log" 2>&1; then
    echo "run.sh: $name did not run (see $out/$name.log)" >&2
  fi
done
python3 "$here/table.py" "$out" >"$here/strategies_at_scale.md"
echo "run.sh: wrote $here/strategies_at_scale.md" >&2
