#pragma once
// A 3x3 convolution of stride 1 and padding 1, computed directly rather than as im2col and a
// GEMM, for images of few channels: the first layer of an image model (1 or 3 channels), where
// the GEMM's inner dimension (9 x channels) is too short to pay for packing its operands, and
// Winograd's transforms cost more than they save. One image at a time; single-threaded.
#include <cstdint>

namespace syncopate::conv_direct {

bool applies(int64_t kernel, int64_t stride, int64_t padding);

// y (cout, h, w) = weights (cout, cin, 3, 3) correlated with x (cin, h, w), plus bias[c] when
// bias is not null.
void forward(const float* x, int64_t cin, int64_t h, int64_t w, const float* weights, int64_t cout,
             const float* bias, float* y);

// dw (cout, cin, 3, 3) += the correlation of dy (cout, h, w) with x (cin, h, w): the weight
// gradient of forward for the output gradient dy.
void add_weight_grad(const float* x, int64_t cin, int64_t h, int64_t w, const float* dy,
                     int64_t cout, float* dw);

}  // namespace syncopate::conv_direct
