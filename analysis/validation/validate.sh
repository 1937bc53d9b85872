#!/usr/bin/env bash
# The simulator against this machine: fmnist-mlp and fmnist-cnn at 1, 2 and 4 workers with every
# strategy (serial at 1 worker only), simulated (sim backend) and measured (mpi backend under
# mpirun), each pair compared with `syncopate compare`; writes analysis/validation/validation.md.
#
#   analysis/validation/validate.sh [--scenarios "fmnist-mlp fmnist-cnn"] [--epochs N]
#                                   [--workers "1 2 4"] [--strategies "ddp ..."]
#                                   [--measured-runs 3] [--calibrate scenario|pair|run]
#                                   [--recalibrate 2] [--steady-spread 1.5] [--calibrate-repeats 30]
#                                   [--platform NAME|FILE] [--out DIR]
#                                   [--md FILE] [--bin PATH] [--set key=value]...
#                                   [--target-median PCT] [--target-worst PCT] [--check]
#                                   [--mpirun 'LAUNCHER OPTIONS']
#
# The simulated runs of each scenario use a platform that `syncopate calibrate SCENARIO` measures
# first, under the same settings, at that scenario's layer shapes
# (DIR/SCENARIO/platform/loopback.toml; this machine's speed changes from minute to minute: see
# collectives.sh); --calibrate pair calibrates again before every pair, into
# DIR/SCENARIO/platform/<strategy>-w<W>/ (about 12 s a pair), so that the measured runs follow
# their calibration within seconds; --calibrate run calibrates before every measured run, into
# DIR/SCENARIO/platform/<strategy>-w<W>-m<k>/, and simulates the pair on each of them, so that
# every measured run is compared with a simulation on the calibration just before it (a
# calibration caught in a slow phase then spoils one comparison of three, not the pair);
# --platform uses a committed one instead (e.g. loopback) for every scenario.
# When calibrate warns that a step's timed parts spread wider than --steady-spread (its own
# default, 1.5x, from p10 to p90: the machine changed speed while they were timed), the script
# calibrates again, up to --recalibrate times (default 2; 0: never), and keeps the last; each
# calibration's stderr goes to calibrate.log beside its platform. Of 132 calibrations before
# measured runs, the 19 that warned predicted their run within 16.7% at the median, the others
# within 8.5%, though in fmnist-cnn's alone no worse (README, "Calibrate"). The calibrations
# warned of are set aside (warned-N/ beside the one kept), each pair is simulated on them too
# (DIR/SCENARIO/sim/<name>.warned-N) and compared with the same measured runs
# (DIR/SCENARIO/recalibrated/<run>.warned-N): validation.md sets each such run's error on the
# kept calibration beside its errors on the ones set aside, a paired test of recalibrating (at
# --steady-spread 1.25 it did not help: analysis/validation/recalibrated.md, README).
# --calibrate-repeats N (default 30) is each calibration's `calibrate --repeats`: samples per figure
# and rank; fewer make a quicker, noisier calibration.
# Each pair's measured side runs --measured-runs times (one run on this machine varies by more
# than the target: 0.41-0.53 s for the same 1-worker epoch), each compared with its simulated
# run; validation.md takes the comparison of median error (summarize.py: with one simulated run,
# the one whose measured run is the median), and states the measurement's own spread: the
# measured runs' and, with two calibrations or more of a scenario (--calibrate pair or run), the
# calibrations' step compute.
# Runs go to DIR (default runs/validation): DIR/SCENARIO/sim/<strategy>-w<W> (with --calibrate
# run, <strategy>-w<W>-m<k>), DIR/SCENARIO/mpi/<strategy>-w<W>-m<k>,
# DIR/SCENARIO/compare/<strategy>-w<W>-m<k>;
# a run already there is kept, and so is the calibrated platform (re-running finishes an
# interrupted validation; remove DIR to start over). A scenario's own settings come first
# (fmnist-cnn: 16,384 training samples), then --set and --epochs, which apply to both runs of
# every pair and override them. The table goes to --md (default: validation.md beside this
# script), with the per-pair errors against the targets (default: median <= 5%, worst <= 15%).
# Exit 0 when every pair was compared (whatever the errors: validation.md says them), 1 when a
# run or a comparison failed; with --check, 3 when every pair was compared but the per-pair
# median or worst error exceeds its target or a pair's bytes differ.
# The measured runs and the calibrations start with --mpirun's launcher and options, the rank
# count where they say {ranks} (srun -n {ranks}) or else -np W after them, then the program
# (default `mpirun --oversubscribe --bind-to none`, --allow-run-as-root added as root: ranks that
# outnumber this machine's cores, wherever the kernel puts them; launcher.sh); on a node with a
# core for every rank, e.g. --mpirun 'mpirun --bind-to core'. Waiting ranks yield their
# core (OMPI_MCA_mpi_yield_when_idle=1) unless the environment sets that variable; calibrate
# and the runs share whatever it is, and validation.md names the launcher and the setting.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/bin/syncopate
out=$root/runs/validation
md=$here/validation.md
epochs=""
workers="1 2 4"
strategies="serial ddp epoch_sync epoch_async local_sgd hierarchical diloco zero"
scenarios="fmnist-mlp fmnist-cnn"
sets=()
platform=
measured_runs=3
calibrate_each=scenario
recalibrate=2
calibrate_repeats=30
steady_spread=1.5
check=()
launcher='' launcher_given=0
args="$*"
# An option's value, or exit 2 naming the option when it has none.
value() { [ $# -ge 2 ] || { echo "validate.sh: $1 needs a value" >&2; exit 2; }; printf '%s' "$2"; }
while [ $# -gt 0 ]; do
  case $1 in
    --scenarios) scenarios=$(value "$@"); shift 2 ;;
    --epochs) epochs=$(value "$@"); shift 2 ;;
    --workers) workers=$(value "$@"); shift 2 ;;
    --strategies) strategies=$(value "$@"); shift 2 ;;
    --out) out=$(value "$@"); shift 2 ;;
    --md) md=$(value "$@"); shift 2 ;;
    --platform) platform=$(value "$@"); shift 2 ;;
    --measured-runs) measured_runs=$(value "$@"); shift 2 ;;
    --calibrate) calibrate_each=$(value "$@"); shift 2 ;;
    --recalibrate) recalibrate=$(value "$@"); shift 2 ;;
    --calibrate-repeats) calibrate_repeats=$(value "$@"); shift 2 ;;
    --steady-spread) steady_spread=$(value "$@"); shift 2 ;;
    --bin) bin=$(value "$@"); shift 2 ;;
    --mpirun) launcher=$(value "$@") launcher_given=1; shift 2 ;;
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
case $recalibrate in
  '' | *[!0-9]*) echo "validate.sh: --recalibrate '$recalibrate'; allowed: an integer >= 0" >&2; exit 2 ;;
esac
case $calibrate_repeats in
  '' | *[!0-9]* | 0* | [0-2]) echo "validate.sh: --calibrate-repeats '$calibrate_repeats'; allowed: an integer >= 3" >&2; exit 2 ;;
esac
case $steady_spread in
  '' | . | *[!0-9.]* | *.*.*) steady_spread_ok=0 ;;
  *) steady_spread_ok=$(awk -v x="$steady_spread" 'BEGIN { print (x >= 1) ? 1 : 0 }') ;;
esac
[ "$steady_spread_ok" = 1 ] ||
  { echo "validate.sh: --steady-spread '$steady_spread'; allowed: a number >= 1 (p90 / p10), e.g. 1.5" >&2; exit 2; }
case $calibrate_each in
  scenario | pair | run) ;;
  *) echo "validate.sh: --calibrate '$calibrate_each'; allowed: scenario, pair, run" >&2; exit 2 ;;
esac
[ "$calibrate_each" != scenario ] && [ -n "$platform" ] &&
  { echo "validate.sh: --calibrate $calibrate_each and --platform: a committed platform is not calibrated; give one of them" >&2; exit 2; }
[ -n "$epochs" ] && sets+=(--epochs "$epochs")
[ -z "${strategies// /}" ] && { echo "validate.sh: --strategies is empty; allowed: strategies, e.g. \"ddp epoch_sync\"" >&2; exit 2; }
for scenario in $scenarios; do
  case $scenario in */* | *.toml) echo "validate.sh: --scenarios '$scenario'; allowed: names of the scenarios/ folder's files, e.g. fmnist-cnn" >&2; exit 2 ;; esac
done
[ -z "${scenarios// /}" ] && { echo "validate.sh: --scenarios is empty; allowed: scenarios, e.g. \"fmnist-mlp fmnist-cnn\"" >&2; exit 2; }
[ -z "${workers// /}" ] && { echo "validate.sh: --workers is empty; allowed: worker counts, e.g. \"1 2 4\"" >&2; exit 2; }
# shellcheck source=analysis/validation/launcher.sh
. "$here/launcher.sh"
launcher_setup validate.sh "$launcher_given" "$launcher"

# A pair's settings beyond its scenario file, before --set and --epochs (which override them):
# local_sgd and diloco average every 8 steps (their default, 1, would average after every step);
# fmnist-cnn trains on 16,384 samples (a 1-worker epoch of the whole set takes about 9 s here).
strategy_knobs() { case $1 in local_sgd | diloco) echo "--set strategy.every=8" ;; esac; }
scenario_knobs() { case $1 in fmnist-cnn) echo "--set data.train_samples=16384" ;; esac; }
# Every pair: "scenario strategy workers" (serial at 1 worker only).
pairs=()
for scenario in $scenarios; do
  for strategy in $strategies; do
    for w in $workers; do
      [ "$strategy" = serial ] && [ "$w" != 1 ] && continue
      pairs+=("$scenario $strategy $w")
    done
  done
done
# A pair's arguments to `syncopate run`, the backend's left out.
pair_args() {
  local extra
  read -r -a extra <<<"$(scenario_knobs "$1") $(strategy_knobs "$2")"
  args_of_pair=("$1" --strategy "$2" --workers "$3" --quiet "${extra[@]}" "${sets[@]}")
}

# Every pair's settings are resolved before any calibration or run (--print-scenario), so that a
# scenario, strategy, worker count, --epochs or --set that the binary refuses stops here with
# its message.
for pair in "${pairs[@]}"; do
  read -r scenario strategy w <<<"$pair"
  pair_args "$scenario" "$strategy" "$w"
  if ! refusal=$("$bin" run "${args_of_pair[@]}" --backend sim --print-scenario 2>&1 >/dev/null); then
    echo "validate.sh: $scenario, $strategy at $w workers: $refusal" >&2
    exit 2
  fi
done

platforms_note=
scenario_notes=
# The platform of a simulated run (scenario, the run's name: <strategy>-w<W>, with --calibrate
# run <strategy>-w<W>-m<k>): --platform, or one calibrated at the scenario's shapes (with
# --calibrate pair or run, one per pair or per measured run).
platform_of() {
  if [ -n "$platform" ]; then
    echo "$platform"
  elif [ "$calibrate_each" != scenario ]; then
    echo "$out/$1/platform/$2/loopback.toml"
  else
    echo "$out/$1/platform/loopback.toml"
  fi
}
# A scenario's platform is calibrated just before its first pair runs, not all at the start: the
# machine's speed drifts over the minutes that another scenario's pairs take. With --calibrate
# pair or run, before each of its pairs or measured runs (the second argument names it).
# Calibrates again while calibrate warns of an unsteady step, up to --recalibrate times.
calibrated=
calibrate() {
  local name=${2-} file knob note log tries=0
  file=$(platform_of "$1" "$name")
  if [ -z "$platform" ] && [ ! -f "$file" ]; then
    echo "== $1${name:+ $name}: calibrating this machine (2 ranks): $file"
    mkdir -p "$(dirname "$file")"
    log=$(dirname "$file")/calibrate.log
    : >"$log"
    rm -rf "$(dirname "$file")"/warned-*  # an interrupted calibration's, set aside before it
    while :; do
      launch 2 "$bin" calibrate "$1" --repeats "$calibrate_repeats" --steady-spread "$steady_spread" \
        --out "$file" 2>>"$log" >/dev/null || { cat "$log" >&2; exit 1; }
      [ "$(grep -c "^syncopate: calibrate: warning: a step's timed parts" "$log")" -gt "$tries" ] || break
      if [ "$tries" -ge "$recalibrate" ]; then
        echo "   calibrate warned of an unsteady step $((tries + 1)) times; the last calibration is kept: $log"
        break
      fi
      tries=$((tries + 1))
      # Set aside, not overwritten: the pairs are simulated on it too and compared with the same
      # measured runs (DIR/SCENARIO/recalibrated), the recalibration's worth measured run by run.
      mkdir -p "$(dirname "$file")/warned-$tries"
      mv "$file" "$(dirname "$file")/profiles" "$(dirname "$file")/warned-$tries/"
      echo "== $1${name:+ $name}: calibrate warned of an unsteady step; calibrating again ($tries of at most $recalibrate)"
    done
  fi
  [[ $calibrated == *" $1 "* ]] && return
  if [ "$calibrate_each" = pair ] && [ -z "$platform" ]; then
    note="$1: ${out#"$root"/}/$1/platform/<strategy>-w<W>/loopback.toml, calibrated before each pair"
  elif [ "$calibrate_each" = run ] && [ -z "$platform" ]; then
    note="$1: ${out#"$root"/}/$1/platform/<strategy>-w<W>-m<k>/loopback.toml, calibrated before each measured run"
  else
    note="$1: ${file#"$root"/}"
    [ -f "$file" ] && note+=" (calibrated $(sed -n 's/^# date: //p' "$file" | head -n 1))"
  fi
  platforms_note+="${platforms_note:+; }$note"
  knob=$(scenario_knobs "$1")
  if [ -n "$knob" ]; then scenario_notes+="; $1 $knob"; fi
  calibrated+=" $1 "
}

# Simulates the pair (args_of_pair, at $scenario and $w) into $dir/sim/NAME on NAME's platform
# (or the platform file given second), unless it is there already; 1 when the run fails.
simulate() {
  [ -f "$dir/sim/$1/summary.json" ] && return 0
  echo "== $scenario $1: simulated"
  # The platform models this machine's two workers; more workers are more GPUs on its node.
  "$bin" run "${args_of_pair[@]}" --backend sim --platform "${2:-$(platform_of "$scenario" "$1")}" \
    --set "sim.platform_params.gpus_per_node=$((w > 2 ? w : 2))" --out "$dir/sim/$1" \
    >"$dir/sim/$1.log" 2>&1 || { echo "   failed: $dir/sim/$1.log"; return 1; }
}

# Compares the simulated run $dir/sim/$1 with the measured $dir/mpi/$2 into $3 (a folder) and
# $3.txt; 1 when compare fails (not when it finds the runs apart: validation.md says that).
compare_runs() {
  local rc=0
  "$bin" compare "$dir/sim/$1" "$dir/mpi/$2" --tolerance 15% --out "$3" >"$3.txt" 2>&1 || rc=$?
  [ "$rc" -le 1 ] || { echo "   compare failed: $3.txt"; return 1; }
}

failed=0
for pair in "${pairs[@]}"; do
  read -r scenario strategy w <<<"$pair"
  dir=$out/$scenario
  name=$strategy-w$w
  if [ "$calibrate_each" = pair ]; then
    calibrate "$scenario" "$name"
  elif [ "$calibrate_each" = scenario ] && [[ $calibrated != *" $scenario "* ]]; then
    calibrate "$scenario"
  fi
  mkdir -p "$dir/sim" "$dir/mpi" "$dir/compare"
  pair_args "$scenario" "$strategy" "$w"
  if [ "$calibrate_each" != run ]; then
    simulate "$name" || { failed=1; continue; }
  fi
  for k in $(seq "$measured_runs"); do
    run=$name-m$k
    simulated=$name
    # With --calibrate run: calibrate, measure at once, then simulate on that calibration.
    [ "$calibrate_each" = run ] && { calibrate "$scenario" "$run"; simulated=$run; }
    if [ ! -f "$dir/mpi/$run/summary.json" ]; then
      echo "== $scenario $name: measured ($w rank(s)), run $k of $measured_runs"
      launch "$w" "$bin" run "${args_of_pair[@]}" --backend mpi --out "$dir/mpi/$run" \
        >"$dir/mpi/$run.log" 2>&1 || { echo "   failed: $dir/mpi/$run.log"; failed=1; continue; }
    fi
    simulate "$simulated" || { failed=1; continue; }
    compare_runs "$simulated" "$run" "$dir/compare/$run" || { failed=1; continue; }
    tail -n 2 "$dir/compare/$run.txt" | head -n 1
    # The calibrations that calibrate warned of before the one kept (set aside by calibrate()):
    # the same pair simulated on each, compared with the same measured run.
    [ -n "$platform" ] && continue
    for warned in "$(dirname "$(platform_of "$scenario" "$simulated")")"/warned-*/loopback.toml; do
      [ -f "$warned" ] || continue
      aside=$(basename "$(dirname "$warned")")
      mkdir -p "$dir/recalibrated"
      simulate "$simulated.$aside" "$warned" &&
        compare_runs "$simulated.$aside" "$run" "$dir/recalibrated/$run.$aside" || failed=1
    done
  done
done

# The pairs' own settings, before --set: those of the strategies and scenarios that ran.
strategy_notes=
for strategy in $strategies; do
  knob=$(strategy_knobs "$strategy")
  if [ -n "$knob" ]; then strategy_notes+="; $strategy $knob"; fi
done
compared="the median run compared"
[ "$calibrate_each" = run ] && compared="each run compared with a simulation on its own calibration, the comparison of median error shown"
when=$(date -u '+%Y-%m-%d %H:%M UTC')
load=$(cut -d ' ' -f 1-3 /proc/loadavg)
repeats_note=
[ -z "$platform" ] && repeats_note="; each calibration: calibrate --repeats $calibrate_repeats"
notes=(--note "command: analysis/validation/validate.sh ${args:-} (runs in ${out#"$root"/})"
       --note "date: $when; machine: $(nproc --all) cores, load average $load at the end"
       --note "simulated: sim backend, platforms: $platforms_note$repeats_note; measured: mpi backend, $(launcher_note), OMP_NUM_THREADS=1, OMPI_MCA_mpi_yield_when_idle=$OMPI_MCA_mpi_yield_when_idle; each pair measured $measured_runs times, $compared (the runs' range in brackets)"
       --note "settings: ${sets[*]:-none}${strategy_notes}${scenario_notes}")
compare_dirs=()
calibrations=()  # the simulated side's spread: each scenario's calibrations, where calibrated here
platform_dirs=()
for scenario in $scenarios; do
  compare_dirs+=("$out/$scenario/compare")
  if [ -z "$platform" ]; then
    calibrations+=(--calibrations "$scenario=$out/$scenario/platform")
    [ -d "$out/$scenario/recalibrated" ] && calibrations+=(--recalibrated "$out/$scenario/recalibrated")
    platform_dirs+=("$out/$scenario/platform")
  fi
done
if [ -z "$platform" ]; then
  # Every warning that the scenarios' calibrations gave, kept or calibrated again.
  warned=$(find "${platform_dirs[@]}" -name calibrate.log -exec cat {} + 2>/dev/null |
    grep -c "^syncopate: calibrate: warning: a step's timed parts" || true)
  notes+=(--note "calibrations: calibrated again while calibrate warned of an unsteady step (over ${steady_spread}x from p10 to p90), up to $recalibrate times: $warned warning(s) (calibrate.log beside each platform)")
fi
rc=0
/usr/bin/python3 "$here/summarize.py" "${compare_dirs[@]}" --out "$md" "${notes[@]}" \
  "${calibrations[@]}" --steady-spread "$steady_spread" "${check[@]}" || rc=$?
[ "$failed" = 1 ] && exit 1
exit $rc
