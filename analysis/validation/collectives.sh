#!/usr/bin/env bash
# The simulator's collectives against this machine's: allreduce, broadcast and allgather from
# 4 KiB to 64 MiB at 2 and 4 ranks, simulated (`syncopate collectives --backend sim`) and
# measured (the same command under mpirun), the same timing loop on both sides; writes
# analysis/validation/collectives.md and collectives.png.
#
#   analysis/validation/collectives.sh [--ranks "2 4"] [--sizes 4KiB:64MiB] [--repeats N]
#                                      [--ops allreduce,broadcast,allgather] [--wire fp32]
#                                      [--platform NAME|FILE] [--out DIR] [--md FILE]
#                                      [--bin PATH] [--check] [--target-median PCT]
#                                      [--trials N] [--mpirun 'LAUNCHER OPTIONS']
#
# The simulated side runs on a platform that `syncopate calibrate` measures just before each
# rank count's measured side, under the same MPI settings (DIR/platform-W[.TRIAL]/loopback.toml,
# W the rank count, TRIAL with --trials over 1, as the CSV files' names): this
# machine's transport changes speed from one minute to the next (a 1 MiB ping-pong took 49 us
# and, a minute later, 137 us), so a platform measured earlier predicts another machine.
# --platform runs it on a committed platform instead (e.g. loopback). CSV files go to DIR
# (default runs/validation/collectives). --ops and --wire go to both sides (--wire fp16 or bf16:
# allreduce and allgather only). --check: exit 1 when the median error exceeds the target
# (--target-median, default the issue's 10%; checked before anything runs). --trials N (default
# 1): each rank count N times over, each time calibrated, simulated and measured anew; a row's
# times are the median over the trials (this machine's speed drifts by up to twice from one
# minute to the next, and one trial may catch the two sides at different speeds).
# The measured side and calibrate start with --mpirun's launcher and options, the rank count
# where they say {ranks} or else -np W after them, then the program (default `mpirun
# --oversubscribe --bind-to none`, --allow-run-as-root added as root; launcher.sh);
# waiting ranks yield their core (OMPI_MCA_mpi_yield_when_idle=1) unless the environment sets
# that variable. collectives.md names both.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/bin/syncopate
out=$root/runs/validation/collectives
md=$here/collectives.md
ranks="2 4"
sizes=4KiB:64MiB
repeats=15
trials=1
ops=allreduce,broadcast,allgather
wire=fp32
check=()
platform=
launcher='' launcher_given=0
args="$*"
# An option's value, or exit 2 naming the option when it has none.
value() { [ $# -ge 2 ] || { echo "collectives.sh: $1 needs a value" >&2; exit 2; }; printf '%s' "$2"; }
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$(value "$@"); shift 2 ;;
    --sizes) sizes=$(value "$@"); shift 2 ;;
    --repeats) repeats=$(value "$@"); shift 2 ;;
    --trials) trials=$(value "$@"); shift 2 ;;
    --ops) ops=$(value "$@"); shift 2 ;;
    --wire) wire=$(value "$@"); shift 2 ;;
    --out) out=$(value "$@"); shift 2 ;;
    --platform) platform=$(value "$@"); shift 2 ;;
    --md) md=$(value "$@"); shift 2 ;;
    --bin) bin=$(value "$@"); shift 2 ;;
    --mpirun) launcher=$(value "$@") launcher_given=1; shift 2 ;;
    --check) check+=(--check); shift ;;
    --target-median)
      value "$@" >/dev/null
      case ${2%\%} in
        '' | . | *[!0-9.]* | *.*.*) echo "collectives.sh: $1 '$2'; allowed: a percentage >= 0, e.g. 10 or 10%" >&2; exit 2 ;;
      esac
      check+=("$1" "$2"); shift 2 ;;
    *) echo "collectives.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for w in $ranks; do
  case $w in
    '' | *[!0-9]* | 0* | 1) echo "collectives.sh: --ranks '$ranks': '$w'; allowed: rank counts >= 2" >&2; exit 2 ;;
  esac
done
case $trials in
  '' | *[!0-9]* | 0*) echo "collectives.sh: --trials '$trials'; allowed: an integer >= 1" >&2; exit 2 ;;
esac
[ -z "${ranks// /}" ] && { echo "collectives.sh: --ranks is empty; allowed: rank counts >= 2, e.g. \"2 4\"" >&2; exit 2; }
# shellcheck source=analysis/validation/launcher.sh
. "$here/launcher.sh"
launcher_setup collectives.sh "$launcher_given" "$launcher"
mkdir -p "$out"
load_start=$(cut -d ' ' -f 1-3 /proc/loadavg)
trials_note=
each=calibrated
[ -n "$platform" ] && each="on the same platform"
[ "$trials" -gt 1 ] && trials_note="; $trials trials, each $each, simulated and measured anew, a row's times the median over them (measured p10 – p90: the lowest and highest of the trials')"
for w in $ranks; do
  common=(collectives fmnist-mlp --sizes "$sizes" --repeats "$repeats" --ops "$ops" --wire "$wire")
  rm -f "$out/sim-$w.csv" "$out/mpi-$w.csv" "$out/sim-$w".*.csv "$out/mpi-$w".*.csv
  rm -rf "$out/platform-$w" "$out/platform-$w".*
  for trial in $(seq "$trials"); do
    suffix=
    [ "$trials" -gt 1 ] && suffix=.$trial
    sim_platform=$platform
    if [ -z "$platform" ]; then
      # Each trial's calibration is kept beside its CSV files: the same measurements can be
      # simulated again on it (after a change of the model, say).
      sim_platform=$out/platform-$w$suffix/loopback.toml
      mkdir -p "$out/platform-$w$suffix"
      launch 2 "$bin" calibrate fmnist-mlp --repeats 30 --out "$sim_platform" >/dev/null
    fi
    # The platform models this machine; more ranks are more GPUs on its one node.
    "$bin" "${common[@]}" --backend sim --workers "$w" --set "sim.platform=\"$sim_platform\"" \
      --set "sim.platform_params.gpus_per_node=$((w > 2 ? w : 2))" --out "$out/sim-$w$suffix.csv" >/dev/null
    launch "$w" "$bin" "${common[@]}" --backend mpi --out "$out/mpi-$w$suffix.csv" >/dev/null
  done
done
/usr/bin/python3 "$here/collectives.py" "$out" --out "$md" "${check[@]}" \
  --note "command: analysis/validation/collectives.sh ${args:-} (CSV files in ${out#"$root"/})" \
  --note "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc --all) cores; load average $load_start at the start, $(cut -d ' ' -f 1-3 /proc/loadavg) at the end" \
  --note "simulated: sim backend, platform ${platform:-loopback calibrated (calibrate --repeats 30, 2 ranks, the same MPI settings) just before the measured side of each rank count, kept in platform-W[.TRIAL]} (its fidelity: the scenario's sim.fidelity); measured: $(launcher_note), OMPI_MCA_mpi_yield_when_idle=$OMPI_MCA_mpi_yield_when_idle; both: the training communicator (our schedules), seconds per call of the slowest rank, median of $repeats$trials_note"
