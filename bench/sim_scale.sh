#!/usr/bin/env bash
# The simulator at scale: one cost-only ResNet-50 DDP epoch (scenarios/sim-resnet50-ddp-1024.toml,
# 4 GPUs per mn5-acc node) over a grid of GPU counts, fidelities, fast-forward on and off, and
# per-step noise off and on (lognormal, sigma 0.05). Per point it prints the wall seconds of the
# whole process (platform build included) and its CPU seconds (user + system: the wall time on a
# loaded machine overstates the cost), its peak RSS and RSS per simulated worker, the simulated
# activities per second of simulation (SimGrid activities: at analytic fidelity in cost-only
# runs the collectives run on the workers' own clocks and cost none, so also the modelled
# events per second: one per layer pass, optimizer step and collective of every worker), and
# the simulated epoch. The machine's load average is printed first.
#   bench/sim_scale.sh        the default grid: 1,024, 4,096, 16,384 and 65,536 GPUs, analytic,
#                             fast-forward on, noise off (about 2 minutes on 2 cores, most of
#                             it at 65,536 GPUs: 1.5 minutes, 5.7 GB)
#   GPUS="1024 4096" bench/sim_scale.sh                 the small points only (a minute)
#   STEPS=one GPUS="16384 65536" bench/sim_scale.sh     one step per point (the samples of one
#                                                       global batch) instead of the epoch
#   GPUS="1024 4096 16384 65536" FIDELITIES="analytic flow" FAST_FORWARD="true false" \
#     NOISE="none lognormal" bench/sim_scale.sh          the whole grid (hours, and memory)
# Without fast-forward (or with noise, which leaves nothing to fast-forward) every step of the
# epoch is simulated: 1,281,167 / GPUs steps.
# A point that fails (out of memory, a limit of the machine) prints its exit status and the grid
# goes on. Build first (scripts/setup.sh). Needs GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  echo "sim_scale.sh: takes no arguments (got '$*'); set GPUS, STEPS, FIDELITIES, FAST_FORWARD or NOISE instead (see the header)" >&2
  exit 2
fi
GPUS=${GPUS:-"1024 4096 16384 65536"}
STEPS=${STEPS:-"epoch"}
FIDELITIES=${FIDELITIES:-"analytic"}
FAST_FORWARD=${FAST_FORWARD:-"true"}
NOISE=${NOISE:-"none"}
case $STEPS in
  epoch | one) ;;
  *) echo "sim_scale.sh: STEPS='$STEPS'; allowed: epoch, one" >&2; exit 2 ;;
esac
for gpus in $GPUS; do  # 4 GPUs per node: a count that is not a multiple would lose GPUs
  case $gpus in
    '' | *[!0-9]* | 0*) bad=1 ;;
    *) bad=$((gpus % 4)) ;;
  esac
  if [ "$bad" != 0 ]; then
    echo "sim_scale.sh: GPUS='$GPUS': '$gpus'; allowed: positive multiples of 4 (4 GPUs per node)" >&2
    exit 2
  fi
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%7s %9s %5s %9s %9s %8s %9s %10s %12s %12s %12s\n' GPUs fidelity ff noise wall_s cpu_s \
  rss_GB KB/worker activities/s events/s epoch_s
for gpus in $GPUS; do
  for fidelity in $FIDELITIES; do
    for ff in $FAST_FORWARD; do
      for noise in $NOISE; do
        dir="$out/g$gpus-$fidelity-$ff-$noise"
        status=0
        samples=()
        if [ "$STEPS" = one ]; then samples=(--set sim.cost_only_train_samples="$gpus"); fi
        /usr/bin/time -f '%e %M %U %S' -o "$dir.time" build/bin/syncopate run \
          scenarios/sim-resnet50-ddp-1024.toml --workers "$gpus" \
          --set sim.platform_params.nodes=$((gpus / 4)) --fidelity "$fidelity" \
          --set sim.fast_forward="$ff" --set sim.noise.kind=\""$noise"\" "${samples[@]}" --quiet \
          --out "$dir" > "$dir.log" 2>&1 || status=$?
        if [ "$status" -ne 0 ]; then
          printf '%7s %9s %5s %9s  failed (exit %s): %s\n' "$gpus" "$fidelity" "$ff" "$noise" \
            "$status" "$(tail -n 1 "$dir.log")"
          continue
        fi
        python3 - "$dir/summary.json" "$dir.time" "$gpus" "$fidelity" "$ff" "$noise" <<'PY'
import json, sys
summary, timing, gpus, fidelity, ff, noise = sys.argv[1:]
s = json.load(open(summary))
b = s["backend_stats"]
wall, rss_kb, user, system = (float(v) for v in open(timing).read().split()[-4:])
seconds = max(b["simulation_wall_seconds"], 1e-9)
rate = b["simulated_activities"] / seconds
events = b.get("modelled_events", 0) / seconds
print(f"{gpus:>7} {fidelity:>9} {ff:>5} {noise:>9} {wall:9.2f} {user + system:8.2f}"
      f" {rss_kb / 1e6:9.2f} {rss_kb / int(gpus):10.0f} {rate:12.3g} {events:12.3g}"
      f" {b['simulated_seconds']:12.6f}")
PY
      done
    done
  done
done
