#pragma once
// The per-element math of the CUDA kernels, as plain functions callable from host and device.
//
// Each kernel in kernels.cu is a grid-stride loop that calls one of these for every output
// index, so all index arithmetic lives here and is unit-tested on the CPU against independent
// reference loops (tests/cuda/ops_math_test.cpp), on machines without a GPU too.
//
// Every function is a gather: it computes one output element from its inputs, in a fixed
// order, so the kernels need no atomics and give the same bits run after run.
#include <cmath>
#include <cstdint>

#include "core/base/rng.hpp"

#if defined(__CUDACC__)
#define SYNC_HD __host__ __device__ inline
#else
#define SYNC_HD inline
#endif

namespace syncopate::cuda::math {

// ---- row-major GEMM on column-major cuBLAS ------------------------------------------------
// Row-major C (m,n) = op(A) (m,k) * op(B) (k,n) is column-major C^T (n,m) = op(B)^T op(A)^T.
// A row-major matrix with leading dimension ld is, read column-major, its own transpose with
// the same ld; so cuBLAS gets B first, then A, with the same transpose flags and n, m swapped.
struct ColumnMajorGemm {
  bool trans_first = false;   // applies to `first` (our B)
  bool trans_second = false;  // applies to `second` (our A)
  int64_t m = 0, n = 0, k = 0;
  int64_t ld_first = 0, ld_second = 0, ldc = 0;
};

inline ColumnMajorGemm row_major_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  ColumnMajorGemm g;
  g.trans_first = trans_b;
  g.trans_second = trans_a;
  g.m = n;
  g.n = m;
  g.k = k;
  g.ld_first = trans_b ? k : n;   // B is stored (n,k) when transposed, else (k,n)
  g.ld_second = trans_a ? m : k;  // A is stored (k,m) when transposed, else (m,k)
  g.ldc = n;
  return g;
}

// ---- elementwise ----------------------------------------------------------------------------
// y (outer, channels, inner) += bias (channels)
SYNC_HD float bias_add_at(const float* y, const float* bias, int64_t channels, int64_t inner,
                          int64_t i) {
  return y[i] + bias[(i / inner) % channels];
}

SYNC_HD float relu_at(const float* x, int64_t i) { return x[i] > 0.0f ? x[i] : 0.0f; }
// dx = dy where the forward input was positive.
SYNC_HD float relu_backward_at(const float* x, const float* dy, int64_t i) {
  return x[i] > 0.0f ? dy[i] : 0.0f;
}

// (a, b, inner) -> (b, a, inner): out index i reads in[(ia * b + ib) * inner + ip].
SYNC_HD float swap_axes01_at(const float* in, int64_t a, int64_t b, int64_t inner, int64_t i) {
  const int64_t ip = i % inner;
  const int64_t ia = (i / inner) % a;
  const int64_t ib = i / (inner * a);
  return in[(ia * b + ib) * inner + ip];
}

// ---- dropout: the CPU path's mask, bit for bit ---------------------------------------------
// core/rng's Philox4x32-10 stream for (seed, worker, epoch, kDropout, extra = step * 4096 +
// layer): the CPU Dropout layer takes the i-th 32-bit draw for element i, which is lane i % 4
// of the block at counter i / 4. Element i keeps its input iff (draw >> 8) >= threshold, with
// threshold = ceil(rate * 2^24), and is then scaled by 1 / (1 - rate).
struct PhiloxStream {
  uint32_t k0 = 0, k1 = 0;          // the key: the seed's low and high words
  uint32_t c1 = 0, c2 = 0, c3 = 0;  // the counter's upper words; c0 counts blocks
};

inline PhiloxStream dropout_stream(uint64_t seed, uint32_t worker, uint32_t epoch, uint32_t step,
                                   uint32_t layer) {
  const uint32_t extra = step * 4096u + layer;
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), worker, epoch,
          (static_cast<uint32_t>(RngPurpose::kDropout) << 24) ^ extra};
}

// The i-th 32-bit draw of the stream (same rounds and constants as core/base/rng.cpp).
SYNC_HD uint32_t philox_draw(const PhiloxStream& s, int64_t i) {
  uint32_t c0 = static_cast<uint32_t>(i >> 2), c1 = s.c1, c2 = s.c2, c3 = s.c3;
  uint32_t k0 = s.k0, k1 = s.k1;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  switch (i & 3) {
    case 0:
      return c0;
    case 1:
      return c1;
    case 2:
      return c2;
    default:
      return c3;
  }
}

// ceil(rate * 2^24), as the CPU layer computes it.
inline uint32_t dropout_threshold(float rate) {
  return static_cast<uint32_t>(std::ceil(static_cast<double>(rate) * 16777216.0));
}

// 0 (dropped) or scale = 1 / (1 - rate) (kept).
SYNC_HD float dropout_mask_at(const PhiloxStream& s, uint32_t threshold, float scale, int64_t i) {
  return (philox_draw(s, i) >> 8) >= threshold ? scale : 0.0f;
}

// ---- im2col / col2im ------------------------------------------------------------------------
// Input x is NCHW (n, c, h, w); square kernel k, stride, symmetric zero padding; output
// spatial (oh, ow). The column matrix is (c*k*k, n*oh*ow) row-major: row (ci, kh, kw),
// column (image, oy, ox), so one GEMM covers the whole batch.
struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 1, stride = 1, pad = 0;
  int64_t oh = 0, ow = 0;
};

SYNC_HD float im2col_at(const float* x, const ConvGeometry& g, int64_t i) {
  const int64_t plane = g.oh * g.ow;
  const int64_t cols = g.n * plane;
  const int64_t row = i / cols, col = i % cols;
  const int64_t kw = row % g.k, kh = (row / g.k) % g.k, ci = row / (g.k * g.k);
  const int64_t image = col / plane, q = col % plane;
  const int64_t oy = q / g.ow, ox = q % g.ow;
  const int64_t iy = oy * g.stride - g.pad + kh, ix = ox * g.stride - g.pad + kw;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return 0.0f;
  return x[((image * g.c + ci) * g.h + iy) * g.w + ix];
}

// dx at NCHW index i: the sum of every column entry that im2col copied from x[i].
SYNC_HD float col2im_at(const float* dcol, const ConvGeometry& g, int64_t i) {
  const int64_t ix = i % g.w, iy = (i / g.w) % g.h;
  const int64_t ci = (i / (g.w * g.h)) % g.c, image = i / (g.w * g.h * g.c);
  const int64_t plane = g.oh * g.ow, cols = g.n * plane;
  float sum = 0.0f;
  for (int64_t kh = 0; kh < g.k; ++kh) {
    const int64_t ty = iy + g.pad - kh;  // = oy * stride
    if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.oh) continue;
    const int64_t oy = ty / g.stride;
    for (int64_t kw = 0; kw < g.k; ++kw) {
      const int64_t tx = ix + g.pad - kw;
      if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.ow) continue;
      const int64_t ox = tx / g.stride;
      const int64_t row = (ci * g.k + kh) * g.k + kw;
      sum += dcol[row * cols + image * plane + oy * g.ow + ox];
    }
  }
  return sum;
}

// ---- pooling (no padding, floor mode) -------------------------------------------------------
// x is (n, c, h, w), y is (n, c, oh, ow) with oh = (h - k) / stride + 1.
struct PoolGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 1, stride = 1;
  int64_t oh = 0, ow = 0;
};

// Max over the window of output i; argmax receives the winner's index inside its (h, w)
// plane (iy * w + ix); ties go to the first in row-major window order.
SYNC_HD float maxpool_at(const float* x, const PoolGeometry& g, int64_t i, int32_t* argmax) {
  const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
  const float* xp = x + plane * g.h * g.w;
  int64_t best = (oy * g.stride) * g.w + ox * g.stride;
  float best_value = xp[best];
  for (int64_t ky = 0; ky < g.k; ++ky) {
    for (int64_t kx = 0; kx < g.k; ++kx) {
      const int64_t at = (oy * g.stride + ky) * g.w + ox * g.stride + kx;
      if (xp[at] > best_value) {
        best_value = xp[at];
        best = at;
      }
    }
  }
  argmax[i] = static_cast<int32_t>(best);
  return best_value;
}

// The output rows (or columns) whose windows cover input row y: [first, last] (may be empty).
SYNC_HD void covering_windows(int64_t y, int64_t k, int64_t stride, int64_t out, int64_t* first,
                              int64_t* last) {
  const int64_t low = y - k + 1;
  *first = low <= 0 ? 0 : (low + stride - 1) / stride;
  const int64_t high = y / stride;
  *last = high < out - 1 ? high : out - 1;
}

// dx at input index i: the sum of dy over the windows whose argmax is x[i].
SYNC_HD float maxpool_backward_at(const float* dy, const int32_t* argmax, const PoolGeometry& g,
                                  int64_t i) {
  const int64_t ix = i % g.w, iy = (i / g.w) % g.h, plane = i / (g.w * g.h);
  int64_t y0, y1, x0, x1;
  covering_windows(iy, g.k, g.stride, g.oh, &y0, &y1);
  covering_windows(ix, g.k, g.stride, g.ow, &x0, &x1);
  const int32_t self = static_cast<int32_t>(iy * g.w + ix);
  float sum = 0.0f;
  for (int64_t oy = y0; oy <= y1; ++oy) {
    for (int64_t ox = x0; ox <= x1; ++ox) {
      const int64_t o = (plane * g.oh + oy) * g.ow + ox;
      if (argmax[o] == self) sum += dy[o];
    }
  }
  return sum;
}

SYNC_HD float avgpool_at(const float* x, const PoolGeometry& g, int64_t i) {
  const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
  const float* xp = x + plane * g.h * g.w;
  float sum = 0.0f;
  for (int64_t ky = 0; ky < g.k; ++ky) {
    for (int64_t kx = 0; kx < g.k; ++kx) {
      sum += xp[(oy * g.stride + ky) * g.w + ox * g.stride + kx];
    }
  }
  return sum / static_cast<float>(g.k * g.k);
}

SYNC_HD float avgpool_backward_at(const float* dy, const PoolGeometry& g, int64_t i) {
  const int64_t ix = i % g.w, iy = (i / g.w) % g.h, plane = i / (g.w * g.h);
  int64_t y0, y1, x0, x1;
  covering_windows(iy, g.k, g.stride, g.oh, &y0, &y1);
  covering_windows(ix, g.k, g.stride, g.ow, &x0, &x1);
  float sum = 0.0f;
  for (int64_t oy = y0; oy <= y1; ++oy) {
    for (int64_t ox = x0; ox <= x1; ++ox) sum += dy[(plane * g.oh + oy) * g.ow + ox];
  }
  return sum / static_cast<float>(g.k * g.k);
}

// x is (planes, hw) -> y (planes): the mean of each plane.
SYNC_HD float global_avgpool_at(const float* x, int64_t hw, int64_t i) {
  float sum = 0.0f;
  for (int64_t j = 0; j < hw; ++j) sum += x[i * hw + j];
  return sum / static_cast<float>(hw);
}

SYNC_HD float global_avgpool_backward_at(const float* dy, int64_t hw, int64_t i) {
  return dy[i / hw] / static_cast<float>(hw);
}

// ---- losses ---------------------------------------------------------------------------------
// Softmax cross-entropy of one row of logits (batch, classes) against a class index stored as
// a float. Writes the row's loss, whether its argmax (first maximum) is the label, and the row
// of dlogits = (softmax - onehot) * grad_scale (grad_scale = 1 / batch for the mean loss).
SYNC_HD void softmax_xent_row(const float* logits, const float* labels, int64_t classes,
                              float grad_scale, int64_t row, float* dlogits, float* loss,
                              float* correct) {
  const float* z = logits + row * classes;
  const int64_t label = static_cast<int64_t>(labels[row]);
  float zmax = z[0];
  int64_t argmax = 0;
  for (int64_t j = 1; j < classes; ++j) {
    if (z[j] > zmax) {
      zmax = z[j];
      argmax = j;
    }
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < classes; ++j) sum += expf(z[j] - zmax);
  loss[row] = logf(sum) - (z[label] - zmax);
  correct[row] = argmax == label ? 1.0f : 0.0f;
  for (int64_t j = 0; j < classes; ++j) {
    const float p = expf(z[j] - zmax) / sum;
    dlogits[row * classes + j] = (p - (j == label ? 1.0f : 0.0f)) * grad_scale;
  }
}

// Squared error of element i; dy = 2 (y - t) * grad_scale (1 / numel for the mean).
SYNC_HD void mse_at(const float* y, const float* target, float grad_scale, int64_t i, float* dy,
                    float* loss) {
  const float diff = y[i] - target[i];
  loss[i] = diff * diff;
  dy[i] = 2.0f * diff * grad_scale;
}

// ---- collective reductions (core's apply_action / finish, element by element) ---------------
// dst (op) src for a schedule step: a plain float addition for sum and avg; for max, NaN if
// either is NaN, +0 over -0, else the larger, so the result is the same whichever operand
// arrives first (core's commutative max).
SYNC_HD float collective_add_at(const float* dst, const float* src, int64_t i) {
  return dst[i] + src[i];
}
SYNC_HD float collective_max(float a, float b) {
  if (a != a || b != b) return NAN;          // either is NaN
  if (a == b) return a == 0.0f ? a + b : a;  // +0 + -0 is +0: the max of the two zeros
  return a > b ? a : b;
}
SYNC_HD float collective_max_at(const float* dst, const float* src, int64_t i) {
  return collective_max(dst[i], src[i]);
}

// ---- optimizers (PyTorch semantics) ---------------------------------------------------------
// SGD with zero-initialised momentum buffer and no dampening (equal to PyTorch's first-step
// clone): d = g + wd p; buf = mu buf + d; d = nesterov ? d + mu buf : buf; p -= lr d.
SYNC_HD void sgd_at(float* p, const float* g, float* buf, float lr, float momentum,
                    float weight_decay, bool nesterov, int64_t i) {
  float d = g[i] + weight_decay * p[i];
  if (momentum != 0.0f) {
    const float b = momentum * buf[i] + d;
    buf[i] = b;
    d = nesterov ? d + momentum * b : b;
  }
  p[i] -= lr * d;
}

// Adam / AdamW with the scalars formed on the host as torch.optim (and core/optim/optim.cpp) form
// them, in double: c1 = 1 - beta1, c2 = 1 - beta2, step_size = lr / (1 - beta1^t),
// bc2_sqrt = sqrt(1 - beta2^t); Adam: coupled_wd = wd, shrink = 1; AdamW: coupled_wd = 0,
// shrink = 1 - lr wd.
struct AdamScalars {
  float beta1, beta2, c1, c2, eps, coupled_wd, shrink, step_size, bc2_sqrt;
};

SYNC_HD void adam_at(float* p, const float* g, float* m, float* v, const AdamScalars& a,
                     int64_t i) {
  p[i] *= a.shrink;
  const float grad = g[i] + a.coupled_wd * p[i];
  m[i] = a.beta1 * m[i] + a.c1 * grad;
  v[i] = a.beta2 * v[i] + a.c2 * (grad * grad);
  p[i] -= a.step_size * m[i] / (sqrtf(v[i]) / a.bc2_sqrt + a.eps);
}

}  // namespace syncopate::cuda::math
