#pragma once
// The launch shape shared by the .cu files: grid-stride loops of 256 threads, at most 2^20
// blocks, and a launch macro that checks the launch.
#include <algorithm>
#include <cstdint>

#include "backends/cuda/device.hpp"

namespace syncopate::cuda {

inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // the grid-stride loop covers the rest

inline int blocks_for(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

#define SYNC_GRID_LOOP(i, n)                                                             \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Launches kernel over n elements on stream, then checks the launch.
#define SYNC_LAUNCH(kernel, n, stream, ...)                                       \
  do {                                                                            \
    const int64_t sync_launch_n_ = (n);                                           \
    if (sync_launch_n_ > 0) {                                                     \
      kernel<<<blocks_for(sync_launch_n_), kThreads, 0, (stream)>>>(__VA_ARGS__); \
      SYNC_CUDA_CHECK(cudaGetLastError());                                        \
    }                                                                             \
  } while (false)

}  // namespace syncopate::cuda
