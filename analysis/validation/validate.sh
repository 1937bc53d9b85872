#!/usr/bin/env bash
# The simulator against this machine: fmnist-mlp at 1, 2 and 4 workers with every strategy (serial
# at 1 worker only), simulated (sim backend) and measured (mpi backend under mpirun), each pair
# compared with `syncopate compare`; writes analysis/validation/validation.md.
#
#   analysis/validation/validate.sh [--epochs N] [--workers "1 2 4"] [--strategies "ddp ..."]
#                                   [--measured-runs 3] [--platform NAME|FILE] [--out DIR]
#                                   [--md FILE] [--bin PATH] [--set key=value]...
#                                   [--target-median PCT] [--target-worst PCT] [--check]
#
# The simulated runs use a platform that `syncopate calibrate` measures first, under the same
# settings (DIR/platform/loopback.toml; this machine's speed changes from minute to minute: see
# collectives.sh); --platform uses a committed one instead (e.g. loopback).
# Each pair's measured side runs --measured-runs times (one run on this machine varies by more
# than the target: 0.41-0.53 s for the same 1-worker epoch), each compared with the simulated
# run; validation.md takes the comparison whose measured run is the median (summarize.py).
# Runs go to DIR (default runs/validation): DIR/sim/<strategy>-w<W>, DIR/mpi/<strategy>-w<W>-m<k>,
# DIR/compare/<strategy>-w<W>-m<k>;
# a run already there is kept, and so is the calibrated platform (re-running finishes an
# interrupted validation; remove DIR to start over). --set overrides apply to both runs of every
# pair. The table goes to --md (default: validation.md beside this script), with the per-pair
# errors against the targets (default: median <= 5%, worst <= 15%). Exit 0 when every pair was
# compared (whatever the errors: validation.md says them), 1 when a run or a comparison failed;
# with --check, 3 when every pair was compared but the per-pair median or worst error exceeds
# its target or a pair's bytes differ.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/bin/syncopate
out=$root/runs/validation
md=$here/validation.md
epochs=""
workers="1 2 4"
strategies="serial ddp epoch_sync epoch_async local_sgd hierarchical"
sets=()
platform=
measured_runs=3
check=()
args="$*"
# An option's value, or exit 2 naming the option when it has none.
value() { [ $# -ge 2 ] || { echo "validate.sh: $1 needs a value" >&2; exit 2; }; printf '%s' "$2"; }
while [ $# -gt 0 ]; do
  case $1 in
    --epochs) epochs=$(value "$@"); shift 2 ;;
    --workers) workers=$(value "$@"); shift 2 ;;
    --strategies) strategies=$(value "$@"); shift 2 ;;
    --out) out=$(value "$@"); shift 2 ;;
    --md) md=$(value "$@"); shift 2 ;;
    --platform) platform=$(value "$@"); shift 2 ;;
    --measured-runs) measured_runs=$(value "$@"); shift 2 ;;
    --bin) bin=$(value "$@"); shift 2 ;;
    --set) sets+=(--set "$(value "$@")"); shift 2 ;;
    --target-median | --target-worst)  # checked here, not by summarize.py after every run
      value "$@" >/dev/null
      case ${2%\%} in
        '' | . | *[!0-9.]* | *.*.*) echo "validate.sh: $1 '$2'; allowed: a percentage >= 0, e.g. 5 or 5%" >&2; exit 2 ;;
      esac
      check+=("$1" "$2"); shift 2 ;;
    --check) check+=(--check); shift ;;
    *) echo "validate.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $measured_runs in
  '' | *[!0-9]* | 0) echo "validate.sh: --measured-runs '$measured_runs'; allowed: an integer >= 1" >&2; exit 2 ;;
esac
[ -n "$epochs" ] && sets+=(--epochs "$epochs")
[ -z "${strategies// /}" ] && { echo "validate.sh: --strategies is empty; allowed: strategies, e.g. \"ddp epoch_sync\"" >&2; exit 2; }
[ -z "${workers// /}" ] && { echo "validate.sh: --workers is empty; allowed: worker counts, e.g. \"1 2 4\"" >&2; exit 2; }

# A strategy's settings beyond the scenario's: local_sgd averages every 8 steps (its default, 1,
# would average after every step).
knobs() { [ "$1" = local_sgd ] && echo "--set strategy.every=8" || true; }

# Every pair's settings are resolved before any calibration or run (--print-scenario), so that a
# strategy, worker count, --epochs or --set that the binary refuses stops here with its message.
for strategy in $strategies; do
  for w in $workers; do
    [ "$strategy" = serial ] && [ "$w" != 1 ] && continue
    read -r -a extra <<<"$(knobs "$strategy")"
    if ! refusal=$("$bin" run fmnist-mlp --strategy "$strategy" --workers "$w" "${sets[@]}" \
        "${extra[@]}" --backend sim --print-scenario 2>&1 >/dev/null); then
      echo "validate.sh: $strategy at $w workers: $refusal" >&2
      exit 2
    fi
  done
done

mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
export OMP_NUM_THREADS=1
mkdir -p "$out/sim" "$out/mpi" "$out/compare"
if [ -z "$platform" ]; then
  platform=$out/platform/loopback.toml
  if [ ! -f "$platform" ]; then
    echo "== calibrating this machine (mpirun -np 2): $platform"
    mkdir -p "$out/platform"
    "${mpirun[@]}" -np 2 "$bin" calibrate fmnist-mlp --repeats 30 --out "$platform" >/dev/null
  fi
fi

failed=0
for strategy in $strategies; do
  for w in $workers; do
    [ "$strategy" = serial ] && [ "$w" != 1 ] && continue
    name=$strategy-w$w
    common=(fmnist-mlp --strategy "$strategy" --workers "$w" --quiet "${sets[@]}")
    read -r -a extra <<<"$(knobs "$strategy")"
    common+=("${extra[@]}")
    if [ ! -f "$out/sim/$name/summary.json" ]; then
      echo "== $name: simulated"
      # The platform models this machine's two workers; more workers are more GPUs on its node.
      "$bin" run "${common[@]}" --backend sim --platform "$platform" \
        --set "sim.platform_params.gpus_per_node=$((w > 2 ? w : 2))" --out "$out/sim/$name" \
        >"$out/sim/$name.log" 2>&1 || { echo "   failed: $out/sim/$name.log"; failed=1; continue; }
    fi
    for k in $(seq "$measured_runs"); do
      run=$name-m$k
      if [ ! -f "$out/mpi/$run/summary.json" ]; then
        echo "== $name: measured (mpirun -np $w), run $k of $measured_runs"
        "${mpirun[@]}" -np "$w" "$bin" run "${common[@]}" --backend mpi --out "$out/mpi/$run" \
          >"$out/mpi/$run.log" 2>&1 || { echo "   failed: $out/mpi/$run.log"; failed=1; continue; }
      fi
      rc=0
      "$bin" compare "$out/sim/$name" "$out/mpi/$run" --tolerance 15% --out "$out/compare/$run" \
        >"$out/compare/$run.txt" 2>&1 || rc=$?
      if [ "$rc" -gt 1 ]; then
        echo "   compare failed: $out/compare/$run.txt"
        failed=1
      fi
      tail -n 2 "$out/compare/$run.txt" | head -n 1
    done
  done
done

when=$(date -u '+%Y-%m-%d %H:%M UTC')
platform_note=${platform#"$root"/}
[ -f "$platform" ] && platform_note+=" (calibrated $(sed -n 's/^# date: //p' "$platform" | head -n 1))"
load=$(cut -d ' ' -f 1-3 /proc/loadavg)
notes=(--note "command: analysis/validation/validate.sh ${args:-} (runs in ${out#"$root"/})"
       --note "date: $when; machine: $(nproc --all) cores, load average $load at the end"
       --note "simulated: sim backend, platform $platform_note; measured: mpi backend, mpirun -np W --oversubscribe --bind-to none, OMP_NUM_THREADS=1; each pair measured $measured_runs times, the median run compared (the runs' range in brackets)"
       --note "settings: ${sets[*]:-none}; local_sgd strategy.every=8")
rc=0
/usr/bin/python3 "$here/summarize.py" "$out/compare" --out "$md" "${notes[@]}" "${check[@]}" || rc=$?
[ "$failed" = 1 ] && exit 1
exit $rc
