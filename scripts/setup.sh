#!/usr/bin/env bash
# Installs the Debian packages Syncopate needs (only those missing: no apt call when all are
# present), then configures and builds the release preset into build/.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ pkg-config zlib1g-dev libeigen3-dev libsimgrid-dev
          libopenmpi-dev openmpi-bin libgtest-dev libgmock-dev libbenchmark-dev
          libtomlplusplus-dev libcli11-dev nlohmann-json3-dev dataset-fashion-mnist
          python3-matplotlib python3-pytest python3-sklearn)
packages+=("$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
