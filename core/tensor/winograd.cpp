// Winograd F(2x2, 3x3): the transforms. The matrices (Lavin and Gray 2016):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   (input:  B^T d B, 4x4 -> 4x4)
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1] (filter: G g G^T, 3x3 -> 4x4)
//   A^T = [1 1 1 0; 0 1 -1 -1]                      (output: A^T m A, 4x4 -> 2x2)
// Each image is first turned channels-last (pixel-major, channels padded to a multiple of 4, a
// zero border around it), so that a tile's 16 values of 4 channels are 16 vector loads and
// every transform runs on 4 channels at once; on 16 at once while 16 remain, which the copies
// compiled for AVX-512 hold in one register each (core/tensor/lanes.hpp).
#include "core/tensor/winograd.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/base/check.hpp"
#include "core/tensor/lanes.hpp"
#include "core/tensor/vec4.hpp"

namespace syncopate::winograd {
namespace {

using vec4::load;
using vec4::store;
using vec4::V4;

// Per-thread scratch of n floats in one of two slots, kept across calls as the GEMM keeps its
// packing buffers: once the first step has sized them, a training step allocates nothing.
std::span<float> scratch(int slot, int64_t n) {
  thread_local std::array<std::vector<float>, 2> buffers;
  std::vector<float>& b = buffers[static_cast<size_t>(slot)];
  if (b.size() < static_cast<size_t>(n)) b.resize(static_cast<size_t>(n));
  return {b.data(), static_cast<size_t>(n)};
}

// (G g G^T) for one 3x3 filter g (row-major) into u[0..15], `step` floats between positions.
void filter_tile(const float* g, float* u, int64_t step) {
  float t[4][3];  // G g
  for (int c = 0; c < 3; ++c) {
    t[0][c] = g[c];
    t[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
    t[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
    t[3][c] = g[6 + c];
  }
  for (int r = 0; r < 4; ++r) {
    u[(4 * r + 0) * step] = t[r][0];
    u[(4 * r + 1) * step] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
    u[(4 * r + 2) * step] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
    u[(4 * r + 3) * step] = t[r][2];
  }
}

// Rows a, b, c, d of a 4x4 block become its columns.
void transpose(V4& a, V4& b, V4& c, V4& d) {
  const V4 ab_lo = __builtin_shufflevector(a, b, 0, 4, 1, 5);
  const V4 ab_hi = __builtin_shufflevector(a, b, 2, 6, 3, 7);
  const V4 cd_lo = __builtin_shufflevector(c, d, 0, 4, 1, 5);
  const V4 cd_hi = __builtin_shufflevector(c, d, 2, 6, 3, 7);
  a = __builtin_shufflevector(ab_lo, cd_lo, 0, 1, 4, 5);
  b = __builtin_shufflevector(ab_lo, cd_lo, 2, 3, 6, 7);
  c = __builtin_shufflevector(ab_hi, cd_hi, 0, 1, 4, 5);
  d = __builtin_shufflevector(ab_hi, cd_hi, 2, 3, 6, 7);
}

// Rows r[0..7] of an 8x8 block become its columns, in three rounds of two-source shuffles
// (pairs, then pairs of pairs, then halves).
using V8 = lanes::Lanes<8>::F;
[[gnu::always_inline]] inline void transpose8(V8 (&r)[8]) {
  V8 s[8], t[8];
  for (int i = 0; i < 8; i += 2) {
    s[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 2, 10, 4, 12, 6, 14);
    s[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {
    for (int j = 0; j < 2; ++j) {
      t[i + j] = __builtin_shufflevector(s[i + j], s[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      t[i + j + 2] = __builtin_shufflevector(s[i + j], s[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = __builtin_shufflevector(t[j], t[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[j + 4] = __builtin_shufflevector(t[j], t[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// Blocks of 8 channels by 8 pixels of a row through transpose8, the row's last block ending at
// its end (overlapping the one before where 8 does not divide the width: a copy writes the same
// values twice). The block at pixel x reads its 8 vectors at from + k * from_step + x * from_px
// (k = 0..7) and writes them, transposed, at to + k * to_step + x * to_px. Rows narrower than 8
// pixels are left to the 4x4 blocks.
[[gnu::always_inline]] inline void copy_blocks8(const float* from, int64_t from_step,
                                                int64_t from_px, float* to, int64_t to_step,
                                                int64_t to_px, int64_t w) {
  for (int64_t next = 0; next < w; next += 8) {
    const int64_t x = std::min(next, w - 8);
    V8 r[8];
    for (int k = 0; k < 8; ++k) lanes::load(r[k], from + k * from_step + x * from_px);
    transpose8(r);
    for (int k = 0; k < 8; ++k) lanes::store(to + k * to_step + x * to_px, r[k]);
  }
}

// One image (channels, h, w) into `pixels` (rows x cols x c4, channels-last) inside a border of
// one pixel: pixel (y, x) at ((y + 1) * cols + x + 1) * c4; blocks of 8 channels by 8 pixels
// (4 by 4 for what is left) are transposed in registers. Only the image's pixels and channels are
// written: the border and the padding lanes keep the zeros they were made with.
[[gnu::always_inline]] inline void to_channels_last(const float* image, int64_t channels, int64_t h,
                                                    int64_t w, int64_t cols, int64_t c4,
                                                    float* pixels) {
  int64_t c = 0;
  if (w >= 8) {
    for (; c + 8 <= channels; c += 8)
      for (int64_t y = 0; y < h; ++y)
        copy_blocks8(image + (c * h + y) * w, h * w, 1, pixels + ((y + 1) * cols + 1) * c4 + c, c4,
                     c4, w);
  }
  for (; c + 4 <= channels; c += 4) {
    for (int64_t y = 0; y < h; ++y) {
      const float* in = image + (c * h + y) * w;
      float* row = pixels + ((y + 1) * cols + 1) * c4 + c;
      int64_t x = 0;
      for (; x + 4 <= w; x += 4) {
        V4 a = load(in + x), b = load(in + h * w + x), d2 = load(in + 2 * h * w + x);
        V4 d3 = load(in + 3 * h * w + x);
        transpose(a, b, d2, d3);
        store(row + x * c4, a);
        store(row + (x + 1) * c4, b);
        store(row + (x + 2) * c4, d2);
        store(row + (x + 3) * c4, d3);
      }
      for (; x < w; ++x)
        for (int64_t k = 0; k < 4; ++k) row[x * c4 + k] = in[k * h * w + x];
    }
  }
  for (; c < channels; ++c) {
    const float* plane = image + c * h * w;
    for (int64_t y = 0; y < h; ++y) {
      float* row = pixels + ((y + 1) * cols + 1) * c4 + c;
      for (int64_t x = 0; x < w; ++x) row[x * c4] = plane[y * w + x];
    }
  }
}

// The inverse: pixels (h x cols x c4, channels-last, from offset 0) into image (channels, h, w).
[[gnu::always_inline]] inline void from_channels_last(const float* pixels, int64_t cols, int64_t c4,
                                                      int64_t channels, int64_t h, int64_t w,
                                                      float* image) {
  int64_t c = 0;
  if (w >= 8) {
    for (; c + 8 <= channels; c += 8)
      for (int64_t y = 0; y < h; ++y)
        copy_blocks8(pixels + y * cols * c4 + c, c4, c4, image + (c * h + y) * w, h * w, 1, w);
  }
  for (; c + 4 <= channels; c += 4) {
    for (int64_t y = 0; y < h; ++y) {
      const float* row = pixels + y * cols * c4 + c;
      float* out = image + (c * h + y) * w;
      int64_t x = 0;
      for (; x + 4 <= w; x += 4) {
        V4 a = load(row + x * c4), b = load(row + (x + 1) * c4), d2 = load(row + (x + 2) * c4);
        V4 d3 = load(row + (x + 3) * c4);
        transpose(a, b, d2, d3);
        store(out + x, a);
        store(out + h * w + x, b);
        store(out + 2 * h * w + x, d2);
        store(out + 3 * h * w + x, d3);
      }
      for (; x < w; ++x)
        for (int64_t k = 0; k < 4; ++k) out[k * h * w + x] = row[x * c4 + k];
    }
  }
  for (; c < channels; ++c) {
    float* plane = image + c * h * w;
    for (int64_t y = 0; y < h; ++y) {
      const float* row = pixels + y * cols * c4 + c;
      for (int64_t x = 0; x < w; ++x) plane[y * w + x] = row[x * c4];
    }
  }
}

// One image channels-last with a zero border: padded rows and columns -1 .. 2 * tiles (one
// pixel around the plane, two past an odd side), c4 floats per pixel.
struct BorderedImage {
  BorderedImage(const Tiling& tiling, int64_t padded)
      : rows(2 * tiling.tiles_y() + 2), cols(2 * tiling.tiles_x() + 2), c4(padded) {}
  // The image in this thread's scratch, zeroed.
  float* make() const {
    const std::span<float> pixels = scratch(0, rows * cols * c4);
    std::fill(pixels.begin(), pixels.end(), 0.0f);
    return pixels.data();
  }
  int64_t rows, cols, c4;
};

// B^T d B of one tile's channels [c, c + N): `patch` is its top-left pixel, bordered rows
// `cols` pixels long; position xi goes to tile[xi * xi_step + c].
template <int N>
[[gnu::always_inline]] inline void input_tile(const float* patch, int64_t cols, int64_t c4,
                                              int64_t c, float* tile, int64_t xi_step) {
  using F = typename lanes::Lanes<N>::F;
  F e[4][4];  // B^T d: the rows
  for (int s = 0; s < 4; ++s) {
    F d0, d1, d2, d3;
    lanes::load(d0, patch + s * c4 + c);
    lanes::load(d1, patch + (cols + s) * c4 + c);
    lanes::load(d2, patch + (2 * cols + s) * c4 + c);
    lanes::load(d3, patch + (3 * cols + s) * c4 + c);
    e[0][s] = d0 - d2;
    e[1][s] = d1 + d2;
    e[2][s] = d2 - d1;
    e[3][s] = d1 - d3;
  }
  for (int r = 0; r < 4; ++r) {  // (B^T d) B: the columns
    lanes::store(tile + (4 * r + 0) * xi_step + c, e[r][0] - e[r][2]);
    lanes::store(tile + (4 * r + 1) * xi_step + c, e[r][1] + e[r][2]);
    lanes::store(tile + (4 * r + 2) * xi_step + c, e[r][2] - e[r][1]);
    lanes::store(tile + (4 * r + 3) * xi_step + c, e[r][1] - e[r][3]);
  }
}

// B^T d B of every tile of one bordered image into out[xi * xi_step + t * ld + c].
[[gnu::always_inline]] inline void input_tiles(const float* pixels, const BorderedImage& image,
                                               const Tiling& tiling, float* out, int64_t ld,
                                               int64_t xi_step) {
  const int64_t cols = image.cols, c4 = image.c4, tx_n = tiling.tiles_x();
  for (int64_t ty = 0; ty < tiling.tiles_y(); ++ty) {
    for (int64_t tx = 0; tx < tx_n; ++tx) {
      const float* patch = pixels + (2 * ty * cols + 2 * tx) * c4;
      float* tile = out + (ty * tx_n + tx) * ld;
      int64_t c = 0;
      if (lanes::sixteen_lanes())
        for (; c + 16 <= c4; c += 16) input_tile<16>(patch, cols, c4, c, tile, xi_step);
      for (; c + 8 <= c4; c += 8) input_tile<8>(patch, cols, c4, c, tile, xi_step);
      for (; c < c4; c += 4) input_tile<4>(patch, cols, c4, c, tile, xi_step);
    }
  }
}

// A^T m A of one tile's channels [c, c + N), plus the bias, into its 2 x 2 output pixels (rows
// `cols` pixels of c4 floats apart).
template <int N>
[[gnu::always_inline]] inline void output_tile(const float* in, int64_t xi_step, const float* bias,
                                               int64_t cols, int64_t c4, int64_t c,
                                               float* top_left) {
  using F = typename lanes::Lanes<N>::F;
  F top[4], bottom[4];  // A^T m: the rows
  for (int j = 0; j < 4; ++j) {
    F m0, m1, m2, m3;
    lanes::load(m0, in + j * xi_step + c);
    lanes::load(m1, in + (4 + j) * xi_step + c);
    lanes::load(m2, in + (8 + j) * xi_step + c);
    lanes::load(m3, in + (12 + j) * xi_step + c);
    top[j] = m0 + m1 + m2;
    bottom[j] = m1 - m2 - m3;
  }
  F b;
  lanes::load(b, bias + c);  // (A^T m) A: the columns
  float* bottom_left = top_left + cols * c4;
  lanes::store(top_left + c, top[0] + top[1] + top[2] + b);
  lanes::store(top_left + c4 + c, top[1] - top[2] - top[3] + b);
  lanes::store(bottom_left + c, bottom[0] + bottom[1] + bottom[2] + b);
  lanes::store(bottom_left + c4 + c, bottom[1] - bottom[2] - bottom[3] + b);
}

// The output gradient's 2 x 2 pixels `top` (and `top` + cols * c4) of one tile's channels
// [c, c + N) times A, then A^T: A dy A^T, position xi into out[xi * xi_step + c].
template <int N>
[[gnu::always_inline]] inline void output_grad_tile(const float* top, int64_t cols, int64_t c4,
                                                    int64_t c, float* out, int64_t xi_step) {
  using F = typename lanes::Lanes<N>::F;
  const float* bottom = top + cols * c4;
  F a0, b0, a1, b1;
  lanes::load(a0, top + c);
  lanes::load(b0, top + c4 + c);
  lanes::load(a1, bottom + c);
  lanes::load(b1, bottom + c4 + c);
  // A dy: rows (a0 b0), (a0+a1 b0+b1), (a0-a1 b0-b1), (-a1 -b1); then (.) A^T.
  const F ra[4] = {a0, a0 + a1, a0 - a1, -a1};
  const F rb[4] = {b0, b0 + b1, b0 - b1, -b1};
  for (int r = 0; r < 4; ++r) {
    lanes::store(out + (4 * r + 0) * xi_step + c, ra[r]);
    lanes::store(out + (4 * r + 1) * xi_step + c, ra[r] + rb[r]);
    lanes::store(out + (4 * r + 2) * xi_step + c, ra[r] - rb[r]);
    lanes::store(out + (4 * r + 3) * xi_step + c, -rb[r]);
  }
}

}  // namespace

bool applies(int64_t kernel, int64_t stride, int64_t padding) {
  return kernel == 3 && stride == 1 && padding == 1;
}

void transform_filters(std::span<const float> w, int64_t outs, int64_t ins, bool flip,
                       std::span<float> u) {
  SYNC_CHECK(static_cast<int64_t>(w.size()) == outs * ins * 9, "filters of " << w.size());
  SYNC_CHECK(static_cast<int64_t>(u.size()) == kPositions * outs * ins, "u of " << u.size());
  const int64_t step = outs * ins;  // between positions xi
  float rotated[9];
  for (int64_t o = 0; o < outs; ++o) {
    for (int64_t i = 0; i < ins; ++i) {
      const float* g = w.data() + (o * ins + i) * 9;
      if (flip) {
        for (int k = 0; k < 9; ++k) rotated[k] = g[8 - k];
        filter_tile(rotated, u.data() + o * ins + i, step);
      } else {
        filter_tile(g, u.data() + i * outs + o, step);
      }
    }
  }
}

SYNCOPATE_VECTOR_CLONES
void transform_input(const float* x, int64_t images, int64_t channels, const Tiling& tiling,
                     float* v, int64_t ld) {
  const int64_t h = tiling.height, w = tiling.width, tiles = tiling.tiles();
  const int64_t c4 = padded_channels(channels);
  SYNC_CHECK(ld >= c4, "row length " << ld << " for " << channels << " channels");
  const BorderedImage image(tiling, c4);
  float* pixels = image.make();
  for (int64_t n = 0; n < images; ++n) {
    to_channels_last(x + n * channels * h * w, channels, h, w, image.cols, c4, pixels);
    input_tiles(pixels, image, tiling, v + n * tiles * ld, ld, images * tiles * ld);
  }
}

SYNCOPATE_VECTOR_CLONES
void transform_output(const float* m, int64_t ld, int64_t images, int64_t channels,
                      const Tiling& tiling, std::span<const float> bias, float* y) {
  const int64_t h = tiling.height, w = tiling.width, tx_n = tiling.tiles_x();
  const int64_t ty_n = tiling.tiles_y(), tiles = tiling.tiles();
  const int64_t c4 = padded_channels(channels);
  SYNC_CHECK(ld >= c4, "row length " << ld << " for " << channels << " channels");
  const int64_t xi_step = images * tiles * ld;
  const std::span<float> padded_bias = scratch(0, c4);
  std::fill(padded_bias.begin(), padded_bias.end(), 0.0f);
  if (!bias.empty()) std::memcpy(padded_bias.data(), bias.data(), bias.size_bytes());
  // One image's output channels-last, 2 ty_n x 2 tx_n pixels; then cropped into y.
  const int64_t cols = 2 * tx_n;
  float* pixels = scratch(1, 2 * ty_n * cols * c4).data();
  for (int64_t n = 0; n < images; ++n) {
    for (int64_t ty = 0; ty < ty_n; ++ty) {
      for (int64_t tx = 0; tx < tx_n; ++tx) {
        const float* in = m + (n * tiles + ty * tx_n + tx) * ld;
        float* top_left = pixels + (2 * ty * cols + 2 * tx) * c4;
        int64_t c = 0;
        if (lanes::sixteen_lanes())
          for (; c + 16 <= c4; c += 16)
            output_tile<16>(in, xi_step, padded_bias.data(), cols, c4, c, top_left);
        for (; c + 8 <= c4; c += 8)
          output_tile<8>(in, xi_step, padded_bias.data(), cols, c4, c, top_left);
        for (; c < c4; c += 4)
          output_tile<4>(in, xi_step, padded_bias.data(), cols, c4, c, top_left);
      }
    }
    from_channels_last(pixels, cols, c4, channels, h, w, y + n * channels * h * w);
  }
}

SYNCOPATE_VECTOR_CLONES
void transform_output_grad(const float* dy, int64_t images, int64_t channels, const Tiling& tiling,
                           float* p, int64_t ld, float* v) {
  const int64_t h = tiling.height, w = tiling.width, tx_n = tiling.tiles_x();
  const int64_t ty_n = tiling.tiles_y(), tiles = tiling.tiles();
  const int64_t c4 = padded_channels(channels);
  SYNC_CHECK(ld >= c4, "row length " << ld << " for " << channels << " channels");
  const int64_t xi_step = images * tiles * ld;
  const BorderedImage image(tiling, c4);
  const int64_t cols = image.cols;
  float* pixels = image.make();
  for (int64_t n = 0; n < images; ++n) {
    to_channels_last(dy + n * channels * h * w, channels, h, w, cols, c4, pixels);
    for (int64_t ty = 0; ty < ty_n; ++ty) {
      for (int64_t tx = 0; tx < tx_n; ++tx) {
        const float* top = pixels + ((2 * ty + 1) * cols + 2 * tx + 1) * c4;
        float* out = p + (n * tiles + ty * tx_n + tx) * ld;
        int64_t c = 0;
        if (lanes::sixteen_lanes())
          for (; c + 16 <= c4; c += 16) output_grad_tile<16>(top, cols, c4, c, out, xi_step);
        for (; c + 8 <= c4; c += 8) output_grad_tile<8>(top, cols, c4, c, out, xi_step);
        for (; c < c4; c += 4) output_grad_tile<4>(top, cols, c4, c, out, xi_step);
      }
    }
    if (v) input_tiles(pixels, image, tiling, v + n * tiles * ld, ld, xi_step);
  }
}

void add_filter_grads(std::span<const float> z, int64_t outs, int64_t ins, std::span<float> dw) {
  SYNC_CHECK(static_cast<int64_t>(z.size()) == kPositions * outs * ins, "z of " << z.size());
  SYNC_CHECK(static_cast<int64_t>(dw.size()) == outs * ins * 9, "dw of " << dw.size());
  const int64_t step = outs * ins;
  for (int64_t k = 0; k < step; ++k) {
    float s[4][4];
    for (int xi = 0; xi < 16; ++xi) s[xi / 4][xi % 4] = z[static_cast<size_t>(xi * step + k)];
    float t[3][4];  // G^T z: the rows
    for (int c = 0; c < 4; ++c) {
      t[0][c] = s[0][c] + 0.5f * (s[1][c] + s[2][c]);
      t[1][c] = 0.5f * (s[1][c] - s[2][c]);
      t[2][c] = 0.5f * (s[1][c] + s[2][c]) + s[3][c];
    }
    float* g = dw.data() + k * 9;
    for (int r = 0; r < 3; ++r) {  // (G^T z) G: the columns
      g[3 * r + 0] += t[r][0] + 0.5f * (t[r][1] + t[r][2]);
      g[3 * r + 1] += 0.5f * (t[r][1] - t[r][2]);
      g[3 * r + 2] += 0.5f * (t[r][1] + t[r][2]) + t[r][3];
    }
  }
}

}  // namespace syncopate::winograd
