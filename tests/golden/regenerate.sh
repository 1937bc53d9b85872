#!/bin/sh
# Rewrites tests/golden/sim_predictions.csv and sim_runs.csv from the current build of the
# release preset. Review the diff before committing: every changed line is a changed prediction.
set -e
cd "$(dirname "$0")/../.."
cmake --build build --target test_golden
SYNCOPATE_REGENERATE_GOLDEN=1 build/bin/test_golden --gtest_filter='GoldenFiles.*'
git diff --stat -- tests/golden
