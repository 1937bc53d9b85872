#!/usr/bin/env bash
# The peer's set-up for bench/peer/compare.py: Debian's PyTorch with OpenBLAS as the BLAS it
# loads (libblas.so.3 through the alternatives system). With only the reference BLAS, torch's
# Linear layers run about 10x slower, which would flatter our ratios; compare.py refuses that.
# TCMalloc is the allocator PyTorch's CPU performance guide recommends preloading: with glibc's
# malloc, torch maps and unmaps its large activations step after step (the cnn: about 5 M page
# faults and 30 s of kernel time per epoch, and epochs from 19 s to 73 s); compare.py preloads it.
set -euo pipefail
packages=(python3-torch libopenblas0-pthread libtcmalloc-minimal4)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
openblas=$(update-alternatives --list "libblas.so.3-$arch" | grep -m1 openblas-pthread)
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd update-alternatives --set "libblas.so.3-$arch" "$openblas"
update-alternatives --display "libblas.so.3-$arch" | head -n 2
