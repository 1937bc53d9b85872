#!/usr/bin/env bash
# Simulation speed and fidelity agreement: the ResNet-50 DDP epoch (cost-only) at each fidelity,
# at a size where message fidelity still runs (256 GPUs), then the full 1,024-GPU benchmark at
# analytic fidelity. Prints: workers, fidelity, simulated seconds, wall seconds, simulated comms.
#   bench/sim_fidelity.sh            (build first: scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  echo "sim_fidelity.sh: takes no arguments (got '$*')" >&2
  exit 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # workers nodes fidelity
  local dir="$out/w$1-$3"
  build/bin/syncopate run scenarios/sim-resnet50-ddp-1024.toml --workers "$1" \
    --set sim.platform_params.nodes="$2" --fidelity "$3" --out "$dir" > /dev/null
  python3 - "$dir/summary.json" "$1" "$3" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
b = s["backend_stats"]
print(f"{sys.argv[2]:>5} {sys.argv[3]:>9} simulated {b['simulated_seconds']:.6f} s"
      f"  wall {b['simulation_wall_seconds']:.3f} s  comms {int(b['simulated_comms'])}")
PY
}
for fidelity in message flow analytic; do run 256 64 "$fidelity"; done
run 1024 256 analytic
