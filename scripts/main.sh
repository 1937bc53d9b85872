#!/usr/bin/env bash
# The main job: set up, build, then compare ddp, epoch_sync and epoch_async on the embedded
# default scenario (the Fashion-MNIST MLP trained by 4 simulated GPUs of mn5-acc, 3 epochs) and
# write the report. With arguments, runs `syncopate run ARGS...` instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ $# -gt 0 ]; then
  exec build/bin/syncopate run "$@"
fi
out=runs/compare
n=1
while [ -e "$out" ]; do n=$((n + 1)); out=runs/compare-$n; done  # never overwrite a run
build/bin/syncopate sweep --strategy ddp,epoch_sync,epoch_async --out "$out"
build/bin/syncopate report "$out"
echo
echo "The comparison: $out/report.md (plots beside it), one run directory per strategy in $out/runs/"
