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

// ---- dropout --------------------------------------------------------------------------------
// splitmix64's finaliser: a bijective 64-bit mix.
SYNC_HD uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One key per (seed, worker, epoch, step, layer): a counter-based stream, so the mask of any
// step can be recomputed anywhere. It is NOT the CPU path's Philox mask.
inline uint64_t dropout_key(uint64_t seed, uint32_t worker, uint32_t epoch, uint32_t step,
                            uint32_t layer) {
  uint64_t key = mix64(seed);
  key = mix64(key ^ ((static_cast<uint64_t>(worker) << 32) | epoch));
  key = mix64(key ^ ((static_cast<uint64_t>(step) << 32) | layer));
  return key;
}

// Uniform in [0, 1) with 24 random bits.
SYNC_HD float dropout_uniform(uint64_t key, int64_t i) {
  const uint64_t bits = mix64(key ^ mix64(static_cast<uint64_t>(i)));
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// Inverted dropout: kept elements are scaled by 1 / (1 - rate), so eval is the identity.
SYNC_HD float dropout_mask_at(uint64_t key, float rate, int64_t i) {
  return dropout_uniform(key, i) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
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

// Adam (decoupled = false: L2 added to the gradient) or AdamW (decoupled = true: p *= 1 - lr
// wd). step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t), as torch.optim.Adam.
SYNC_HD void adam_at(float* p, const float* g, float* m, float* v, float lr, float beta1,
                     float beta2, float eps, float weight_decay, bool decoupled, float step_size,
                     float bc2_sqrt, int64_t i) {
  float grad = g[i];
  if (decoupled) {
    p[i] *= 1.0f - lr * weight_decay;
  } else {
    grad += weight_decay * p[i];
  }
  m[i] = beta1 * m[i] + (1.0f - beta1) * grad;
  v[i] = beta2 * v[i] + (1.0f - beta2) * grad * grad;
  const float denom = sqrtf(v[i]) / bc2_sqrt + eps;
  p[i] -= step_size * m[i] / denom;
}

}  // namespace syncopate::cuda::math
