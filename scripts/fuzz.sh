#!/usr/bin/env bash
# Fuzzing: builds the fuzz preset (clang, libFuzzer, ASan + UBSan) and runs each target for a
# bounded time, from its checked-in corpus (tests/fuzz/corpus/<target>/).
#   scripts/fuzz.sh [seconds-per-target]     (default 60)
# A crash, leak, hang (10 s per input), or error other than a UserError stops the script with
# exit 1; the reproducer is left in build-fuzz/crashes/<target>/. Copy it into the target's
# corpus folder: the ordinary build's test_fuzz_replay then replays it (ctest -R Replay).
# New inputs that reach new code go to build-fuzz/corpus/<target>/ (not the checked-in one).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
# libFuzzer reads -max_total_time as a number and takes text or 0 as "no limit": refuse them here.
case $# in 0 | 1) ;; *) echo "fuzz: at most one argument, the seconds per target (got '$*')" >&2; exit 2 ;; esac
case $seconds in
  '' | *[!0-9]* | 0*) echo "fuzz: seconds per target '$seconds'; allowed: a whole number >= 1" >&2; exit 2 ;;
esac
targets=(scenario platform_recipe simgrid_xml idx csv checkpoint)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ is needed (Debian: apt-get install clang)" >&2
  exit 2
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake --preset fuzz "${launcher[@]}" >/dev/null
cmake --build --preset fuzz -j "$(nproc)"

export SYNCOPATE_DATA_DIR="$PWD/build-fuzz/share/syncopate"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
status=0
for target in "${targets[@]}"; do
  work="build-fuzz/corpus/$target" crashes="build-fuzz/crashes/$target"
  mkdir -p "$work" "$crashes"
  log="build-fuzz/fuzz-$target.log"
  echo "fuzz: $target for ${seconds} s"
  if ! "build-fuzz/bin/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$crashes/" \
      "$work" "tests/fuzz/corpus/$target" >"$log" 2>&1; then
    echo "fuzz: $target FAILED; its log: $log, the input: $(ls "$crashes" | head -1)" >&2
    tail -40 "$log" >&2
    status=1
  fi
  grep -E "^Done [0-9]+ runs|stat::number_of_executed_units" "$log" | tail -1 | sed "s/^/  /"
done
exit $status
