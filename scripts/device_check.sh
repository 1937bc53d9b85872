#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: configure a release build, build only test_cuda and
# bench_cuda, run the CUDA tests and a short benchmark, and record nvidia-smi. Meant to finish
# well under 8 minutes. Outputs go to $OUT (default: build-device/out).
#
#   OUT=/some/dir scripts/device_check.sh
set -uo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-device}
OUT=${OUT:-$BUILD/out}
mkdir -p "$OUT"
JOBS=$(nproc 2>/dev/null || echo 4)
status=0

step() { echo; echo "=== $* ($(date +%T))"; }

step "nvidia-smi"
nvidia-smi 2>&1 | tee "$OUT/nvidia-smi.txt" || status=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
  2>&1 | tee -a "$OUT/nvidia-smi.txt"

step "configure"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
timeout 120 cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DSYNCOPATE_NATIVE=OFF 2>&1 | tee "$OUT/configure.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "configure failed"; exit 1; }

step "build test_cuda bench_cuda"
timeout 300 cmake --build "$BUILD" --target test_cuda bench_cuda -j"$JOBS" 2>&1 \
  | tail -n 40 | tee "$OUT/build.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "build failed"; exit 1; }

step "test_cuda"
timeout 120 "$BUILD/bin/test_cuda" --gtest_filter='-CudaNccl.*' \
  --gtest_output="xml:$OUT/test_cuda.xml" 2>&1 | tee "$OUT/test_cuda.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# NCCL separately: its bootstrap may need a network interface; a hang must not cost the rest.
step "test_cuda (NCCL)"
timeout 60 "$BUILD/bin/test_cuda" --gtest_filter='CudaNccl.*' 2>&1 | tee "$OUT/test_nccl.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "bench_cuda"
timeout 150 "$BUILD/bin/bench_cuda" --benchmark_min_time=0.2 \
  --benchmark_out="$OUT/bench_cuda.json" --benchmark_out_format=json 2>&1 \
  | tee "$OUT/bench_cuda.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "done: status $status"
exit "$status"
