#!/usr/bin/env bash
# Installs the build into a fresh prefix and runs the installed binary from another folder: it
# must find the shipped scenarios and platforms in <prefix>/share/syncopate, not in the source
# tree, whose lookup paths must not be compiled in.
#   install_test.sh BUILD_DIR SOURCE_DIR WITH_SIM(ON|OFF)
set -euo pipefail
build=$1 source=$2 with_sim=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" || {
  cat "$work/install.log"; fail "cmake --install failed"; }
bin=$work/prefix/bin/syncopate
data=$work/prefix/share/syncopate
[ -x "$bin" ] || fail "no $bin"
for f in platforms/mn5-acc.toml platforms/profiles scenarios/fmnist-mlp.toml; do
  [ -e "$data/$f" ] || fail "not installed: $data/$f"
done
for folder in platforms scenarios; do
  if grep -qF "$source/$folder" "$bin"; then fail "$bin contains the path $source/$folder"; fi
done

cd "$work"
unset SYNCOPATE_DATA_DIR SYNCOPATE_PLATFORMS
# A shipped scenario by name.
"$bin" run fmnist-mlp --print-scenario >"$work/scenario.txt" || fail "fmnist-mlp not found"
grep -Eq "^name = ['\"]fmnist-mlp['\"]" "$work/scenario.txt" || fail "fmnist-mlp: wrong scenario printed"
if [ "$with_sim" = ON ]; then
  # A shipped scenario on a shipped platform (and its host profile), cost-only: a second.
  "$bin" run sim-resnet50-ddp-1024 --workers 8 --out "$work/run" >"$work/run.txt" ||
    { cat "$work/run.txt"; fail "sim-resnet50-ddp-1024 failed"; }
  grep -q '"platform": "mn5-acc"' "$work/run/summary.json" || fail "summary.json: no mn5-acc"
  # The platforms it looks in are the installed ones.
  if "$bin" run sim-resnet50-ddp-1024 --workers 8 --platform no-such-platform \
       --out "$work/run2" 2>"$work/error.txt"; then
    fail "an unknown platform was accepted"
  fi
  grep -qF "$data/platforms" "$work/error.txt" ||
    { cat "$work/error.txt"; fail "the error does not name $data/platforms"; }
fi
echo "install_test: ok ($work/prefix)"
