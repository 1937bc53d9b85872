#pragma once
// The max pool's common case, 2x2 windows of stride 2 without padding, on one plane: the kernels
// behind MaxPool2D (core/nn/layers_pool.cpp), with a copy for AVX-512 on x86-64 that the loader
// picks where the CPU has it (core/tensor/lanes.hpp), so that the generic build gets 16 lanes.
#include <cstdint>

namespace syncopate::maxpool_2x2 {

// Pools an h x w plane (h, w >= 2) into its floor(h / 2) x floor(w / 2) maxima `out` and the
// winners' indices in the plane `best_at`. Ties go to the first of the window's four inputs in
// row-major order. With `relu`, the maxima are clamped at 0 afterwards.
void forward(const float* in, int64_t h, int64_t w, bool relu, float* out, int32_t* best_at);

// The input gradient `d` of an even h x w plane, whole: each window's winner gets its output
// gradient (negative zero made positive), the other three inputs 0. With `out` (the clamped
// maxima of forward with relu), a window whose output is not positive passes nothing.
void backward(const float* grad, const int32_t* best_at, const float* out, int64_t h, int64_t w,
              float* d);

}  // namespace syncopate::maxpool_2x2
