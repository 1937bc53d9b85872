#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU: nvidia-smi, a release build of
# test_cuda, bench_cuda and the CLI only, the CUDA tests, a short benchmark and two-epoch
# training runs on the GPU and the CPU; well under 8 minutes.
# Logs and results go to $OUT (default: build-device/out).
#
#   scripts/device_check.sh vendor   # HERE, once, before: copies the third-party code the GPU
#                                    # machine lacks, and Fashion-MNIST, into build-vendor/
#                                    # (about 46 MB)
#   OUT=... scripts/device_check.sh  # THERE (carry build-vendor along)
#
# The GPU machine's image has CUDA, CMake and ninja but not the Debian packages the full
# project needs (SimGrid, MPI, GoogleTest, Benchmark, Eigen, toml++, nlohmann-json, zlib, CLI11).
# So the script
# configures the full project first and, when that fails, the same top-level CMakeLists.txt
# without the simulator and MPI (-DSYNCOPATE_WITH_SIM=OFF -DSYNCOPATE_WITH_MPI=OFF), taking the
# third-party code from the vendored copy (-DSYNCOPATE_VENDOR_DIR). CUDA_ARCHS (default 90)
# sets CMAKE_CUDA_ARCHITECTURES.
set -uo pipefail
cd "$(dirname "$0")/.."
VENDOR=build-vendor

if [ "${1:-}" = vendor ]; then
  set -e
  rm -rf "$VENDOR"
  mkdir -p "$VENDOR/include" "$VENDOR/lib" "$VENDOR/fallback"
  cp -r /usr/src/googletest "$VENDOR/googletest"
  cp -r /usr/include/eigen3 "$VENDOR/eigen3"
  rm -rf "$VENDOR/eigen3/unsupported"
  cp -r /usr/include/benchmark /usr/include/toml++ /usr/include/CLI /usr/include/nlohmann "$VENDOR/include/"
  cp /usr/include/zlib.h /usr/include/zconf.h "$VENDOR/include/"
  lib=/usr/lib/x86_64-linux-gnu
  cp -L "$lib/libbenchmark.so.1debian" "$VENDOR/lib/libbenchmark.so.1debian"
  cp -L "$lib/libbenchmark.so.1debian" "$VENDOR/lib/libbenchmark.so"
  cp -L "$lib/libz.so.1" "$VENDOR/lib/libz.so.1"
  # This machine's C++ runtime, used there only if libbenchmark needs a newer one than it has.
  cp -L "$lib/libstdc++.so.6" "$lib/libgcc_s.so.1" "$VENDOR/fallback/"
  # Fashion-MNIST (Debian's dataset-fashion-mnist, 30 MB) for the training runs on the GPU.
  [ -d /usr/share/datasets/fashion-mnist ] && cp -r /usr/share/datasets/fashion-mnist "$VENDOR/"
  du -sh "$VENDOR"
  exit 0
fi

BUILD=${BUILD:-build-device}
OUT=${OUT:-$BUILD/out}
mkdir -p "$OUT"
JOBS=$(nproc 2>/dev/null || echo 4)
status=0
step() { echo; echo "=== $* ($(date +%T))"; }

step "machine"
{
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version | tail -n 2
  cmake --version | head -n 1
  c++ --version | head -n 1
  ldd --version | head -n 1
} 2>&1 | tee "$OUT/machine.txt"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
common=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}"
        -DSYNCOPATE_WITH_CUDA=ON)
# NCCL: the toolkit's, else the one in Python's nvidia-nccl wheel (which ships libnccl.so.2 only,
# so find_library would not see it).
if [ ! -e /usr/local/cuda/include/nccl.h ]; then
  wheel=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
  library=$(ls "$wheel"/lib/libnccl.so* 2>/dev/null | head -n 1)
  if [ -f "$wheel/include/nccl.h" ] && [ -n "$library" ]; then
    common+=(-DSYNCOPATE_NCCL_INCLUDE="$wheel/include" -DSYNCOPATE_NCCL_LIBRARY="$library")
  fi
fi
configured=$OUT/configure.txt
step "configure the full project"
if timeout 120 cmake -S . -B "$BUILD" "${generator[@]}" "${common[@]}" \
     >"$OUT/configure.txt" 2>&1; then
  # The NCCL communicator over MPI and the NCCL allreduce benchmark need the full project.
  targets=(test_cuda bench_cuda syncopate test_mpi bench_allreduce_mpi)
else
  tail -n 5 "$OUT/configure.txt"
  step "configure without the simulator and MPI, with the vendored third-party code"
  [ -d "$VENDOR/googletest" ] || { echo "missing $VENDOR: run '$0 vendor' first, carry it"; exit 1; }
  BUILD=$BUILD-vendored
  configured=$OUT/configure-vendored.txt
  timeout 120 cmake -S . -B "$BUILD" "${generator[@]}" "${common[@]}" \
    -DSYNCOPATE_WITH_SIM=OFF -DSYNCOPATE_WITH_MPI=OFF -DSYNCOPATE_VENDOR_DIR="$PWD/$VENDOR" \
    >"$configured" 2>&1 || { tail -n 30 "$configured"; exit 1; }
  targets=(test_cuda bench_cuda syncopate)
fi
grep -q "syncopate: CUDA backend ON" "$configured" ||
  { echo "the CUDA backend is not configured (see $configured)"; exit 1; }

step "build ${targets[*]}"
timeout 360 cmake --build "$BUILD" --target "${targets[@]}" -j"$JOBS" >"$OUT/build.txt" 2>&1
build_status=$?
tail -n 15 "$OUT/build.txt"
if [ "$build_status" -ne 0 ] && [ ! -x "$BUILD/bin/test_cuda" ]; then
  echo "build failed"
  exit 1
fi

step "test_cuda"
timeout 150 "$BUILD/bin/test_cuda" --gtest_filter='-CudaNccl.*' \
  2>&1 | tee "$OUT/test_cuda.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# NCCL on its own timeout: its bootstrap needs a network interface; a hang must not cost more.
step "test_cuda (NCCL)"
timeout 60 "$BUILD/bin/test_cuda" --gtest_filter='CudaNccl.*' 2>&1 | tee "$OUT/test_nccl.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

if [ -x "$BUILD/bin/test_mpi" ]; then
  root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  step "test_mpi (NCCL over MPI, one rank per GPU)"
  gpus=$(nvidia-smi -L | wc -l)
  SYNCOPATE_MPI_WATCHDOG_S=60 timeout 90 mpirun -np "$gpus" --oversubscribe "${root[@]}" \
    "$BUILD/bin/test_mpi" --gtest_filter='NcclOverMpi.*' 2>&1 | tee "$OUT/test_mpi_nccl.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  step "bench_allreduce_mpi (with the NCCL variants)"
  timeout 120 mpirun -np "$gpus" --oversubscribe "${root[@]}" "$BUILD/bin/bench_allreduce_mpi" \
    --max-mib 256 --reps 11 --overlap-mib 16 2>&1 | tee "$OUT/bench_allreduce.txt"
fi

step "bench_cuda"
if [ -x "$BUILD/bin/bench_cuda" ]; then
  bench=("$BUILD/bin/bench_cuda" --benchmark_min_time=0.2
         --benchmark_out="$OUT/bench_cuda.json" --benchmark_out_format=json)
  if ! "$BUILD/bin/bench_cuda" --benchmark_list_tests >/dev/null 2>&1 && [ -d "$VENDOR/fallback" ]; then
    echo "bench_cuda does not load; retrying with $VENDOR/fallback's C++ runtime"
    export LD_LIBRARY_PATH="$PWD/$VENDOR/fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  timeout 200 "${bench[@]}" 2>&1 | tee "$OUT/bench_cuda.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "bench_cuda was not built (see $OUT/build.txt)"
  status=1
fi

# Training on the GPU against this machine's CPU: the local backend, one worker, two epochs.
step "training: fmnist-mlp and fmnist-cnn, cuda and cpu"
if [ -x "$BUILD/bin/syncopate" ]; then
  data=()
  [ -d /usr/share/datasets/fashion-mnist ] || data=(--set "data.dir=$PWD/$VENDOR/fashion-mnist")
  for model in mlp cnn; do
    for device in cuda cpu; do
      echo "--- fmnist-$model on $device"
      rm -rf "$BUILD/runs/$model-$device"
      timeout 150 "$BUILD/bin/syncopate" run "scenarios/fmnist-$model.toml" --epochs 2 --quiet \
        --set "model.device=$device" "${data[@]}" --out "$BUILD/runs/$model-$device" 2>&1 |
        tee -a "$OUT/training.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
  done
else
  echo "syncopate was not built (see $OUT/build.txt)"
  status=1
fi

step "done: status $status"
exit "$status"
