#!/bin/sh
# A test process removes its scratch folders when it exits (tests/common/scratch.hpp), and keeps
# them, naming them on stderr, where SYNCOPATE_KEEP_SCRATCH is set. Runs test_core's checkpoint
# tests, which write runs into a scratch folder, with a temporary directory of their own.
#   scratch_cleanup.sh TEST_CORE
set -eu
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/tmp"
# The checkpoint tests, with the environment's extra settings ($@); exit 1 if they fail.
run_tests() {
  env TMPDIR="$dir/tmp" "$@" "$bin" --gtest_filter='Checkpoint.*:CheckpointSet.*' \
    >"$dir/log" 2>&1 || { cat "$dir/log"; echo "the checkpoint tests failed"; exit 1; }
  grep -q '^\[  PASSED  \] [1-9]' "$dir/log" || { cat "$dir/log"; echo "no test ran"; exit 1; }
}
run_tests
left=$(ls -A "$dir/tmp")
[ -z "$left" ] || { echo "left in the temporary directory: $left"; exit 1; }
run_tests SYNCOPATE_KEEP_SCRATCH=1
kept=$(ls -A "$dir/tmp")
case $kept in
  syncopate-ckpt-*) ;;
  *) echo "SYNCOPATE_KEEP_SCRATCH=1: expected syncopate-ckpt-<pid> kept, found '$kept'"; exit 1 ;;
esac
grep -q "^scratch folder kept: $dir/tmp/$kept\$" "$dir/log" ||
  { cat "$dir/log"; echo "the kept folder is not named on stderr"; exit 1; }
[ -n "$(ls -A "$dir/tmp/$kept")" ] || { echo "$kept is empty"; exit 1; }
echo "scratch removed at exit; kept and named with SYNCOPATE_KEEP_SCRATCH=1: $kept"
