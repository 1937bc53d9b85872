#!/usr/bin/env bash
# The main job: set up, build, and run the embedded default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/bin/syncopate run "$@"
