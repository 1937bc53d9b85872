#pragma once
// Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray 2016, "Fast Algorithms for
// Convolutional Neural Networks", arXiv 1509.09308) for 3x3 convolutions of stride 1 and
// padding 1: each 2x2 block ("tile") of an output plane is A^T [(G g G^T) . (B^T d B)] A, where
// d is the 4x4 input patch under the tile and g the 3x3 filter. Summed over input channels, the
// element-wise products become 16 matrix products (one per position xi of the 4x4 transformed
// tile) of (tiles x in channels) by (in channels x out channels): 16 multiplications per tile and
// channel pair instead of im2col's 36, 2.25x fewer FLOPs in the products.
//
// Transformed data of a group of images is laid out [xi][tile][channel], tile = image * tiles +
// ty * tiles_x + tx, so each xi is one row-major (tiles x channels) matrix whose row length ld is
// at least padded_channels(channels): the transforms run on 4 channels at once.
//
// The results equal im2col's up to rounding (the transforms add and halve), not bit for bit.
#include <cstdint>
#include <span>

namespace syncopate::winograd {

constexpr int64_t kPositions = 16;  // the transformed tile: 4 x 4

// Whether F(2x2, 3x3) computes this convolution: a 3x3 kernel, stride 1, padding 1.
bool applies(int64_t kernel, int64_t stride, int64_t padding);

// Channels rounded up to the transforms' vector of 4; the lanes past `channels` hold zeros or
// values that are never read back.
constexpr int64_t padded_channels(int64_t channels) { return (channels + 3) / 4 * 4; }

// Tiles of one (H, W) plane: ceil(H/2) x ceil(W/2); the last row and column of tiles reach past
// an odd plane, into zeros.
struct Tiling {
  int64_t height = 0, width = 0;
  int64_t tiles_y() const { return (height + 1) / 2; }
  int64_t tiles_x() const { return (width + 1) / 2; }
  int64_t tiles() const { return tiles_y() * tiles_x(); }
};

// For w laid out (outs, ins, 3, 3), as a convolution's weights are: u[xi][i][o] =
// (G w[o][i] G^T)[xi], each xi an (ins x outs) matrix; with `flip`, u[xi][o][i] =
// (G rot180(w[o][i]) G^T)[xi], each an (outs x ins) matrix: the filters of the input gradient
// (a stride-1, padding-1 convolution of dy with the rotated, transposed filters).
void transform_filters(std::span<const float> w, int64_t outs, int64_t ins, bool flip,
                       std::span<float> u);

// v[xi][n * tiles + t][c] = (B^T d B)[xi] for every channel c of `images` images of
// (channels, H, W) at x: d is the 4x4 patch under tile t, zero outside the plane.
void transform_input(const float* x, int64_t images, int64_t channels, const Tiling& tiling,
                     float* v, int64_t ld);

// y[n][c] (H, W) = A^T m[.][n * tiles + t][c] A for every tile t of `images` images, plus
// bias[c] when bias is not empty; the tile's part past an odd plane is dropped.
void transform_output(const float* m, int64_t ld, int64_t images, int64_t channels,
                      const Tiling& tiling, std::span<const float> bias, float* y);

// p[xi][n * tiles + t][c] = (A dy_t A^T)[xi], dy_t the 2x2 block of dy (images, channels, H, W)
// under tile t (zero past an odd plane): the adjoint of transform_output, for the weight
// gradient, which is G^T (sum over tiles of p . v) G. When v is not null, also
// transform_input(dy, ...) into v (the input gradient's input), from the same channels-last copy.
void transform_output_grad(const float* dy, int64_t images, int64_t channels, const Tiling& tiling,
                           float* p, int64_t ld, float* v);

// dw[o][i] (3x3) += G^T z[xi][o][i] G: the weight gradient from the summed products.
void add_filter_grads(std::span<const float> z, int64_t outs, int64_t ins, std::span<float> dw);

}  // namespace syncopate::winograd
