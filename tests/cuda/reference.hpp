#pragma once
// Plain CPU reference loops in double precision for the CUDA tests, written in the direct
// (scatter) form of each op's definition, independently of backends/cuda/ops_math.hpp.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/cuda/ops_math.hpp"
#include "core/base/rng.hpp"

namespace syncopate::cuda::reference {

using Vec = std::vector<double>;

// ||got - want|| / ||want|| (||got|| when want is all zeros).
inline double rel_error(std::span<const float> got, std::span<const double> want) {
  double diff = 0, norm = 0, got_norm = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
    got_norm += static_cast<double>(got[i]) * got[i];
  }
  if (got.size() != want.size()) return INFINITY;
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(got_norm);
}

inline std::vector<float> random_floats(size_t n, uint32_t extra, float lo = -1.0f,
                                        float hi = 1.0f) {
  Rng rng({.seed = 1234, .purpose = RngPurpose::kSynthetic, .extra = extra});
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

inline Vec to_double(std::span<const float> v) { return Vec(v.begin(), v.end()); }

// y (b, out) = x (b, in) w^T (w is (out, in)) + bias
inline Vec dense_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> bias, int64_t b, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(b * out));
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias[o];
      for (int64_t i = 0; i < in; ++i) sum += double{x[r * in + i]} * w[o * in + i];
      y[r * out + o] = sum;
    }
  }
  return y;
}

struct Grads {
  Vec dw, db, dx;
};

inline Grads dense_backward(std::span<const float> x, std::span<const float> w,
                            std::span<const float> dy, int64_t b, int64_t in, int64_t out) {
  Grads g{Vec(static_cast<size_t>(out * in)), Vec(static_cast<size_t>(out)),
          Vec(static_cast<size_t>(b * in))};
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      const double d = dy[r * out + o];
      g.db[o] += d;
      for (int64_t i = 0; i < in; ++i) {
        g.dw[o * in + i] += d * x[r * in + i];
        g.dx[r * in + i] += d * w[o * in + i];
      }
    }
  }
  return g;
}

struct Conv {
  int64_t n, c, h, w, oc, k, stride, pad;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
  cuda::math::ConvGeometry geometry() const {
    return {.n = n,
            .c = c,
            .h = h,
            .w = w,
            .k = k,
            .stride = stride,
            .pad = pad,
            .oh = oh(),
            .ow = ow()};
  }
};

// Direct convolution (cross-correlation, as PyTorch): y (n, oc, oh, ow).
inline Vec conv_forward(std::span<const float> x, std::span<const float> w,
                        std::span<const float> bias, const Conv& s) {
  const int64_t oh = s.oh(), ow = s.ow();
  Vec y(static_cast<size_t>(s.n * s.oc * oh * ow));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.oc; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = bias[o];
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t ky = 0; ky < s.k; ++ky)
              for (int64_t kx = 0; kx < s.k; ++kx) {
                const int64_t iy = oy * s.stride + ky - s.pad, ix = ox * s.stride + kx - s.pad;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                sum += double{x[((n * s.c + c) * s.h + iy) * s.w + ix]} *
                       w[((o * s.c + c) * s.k + ky) * s.k + kx];
              }
          y[((n * s.oc + o) * oh + oy) * ow + ox] = sum;
        }
  return y;
}

inline Grads conv_backward(std::span<const float> x, std::span<const float> w,
                           std::span<const float> dy, const Conv& s) {
  const int64_t oh = s.oh(), ow = s.ow();
  Grads g{Vec(w.size()), Vec(static_cast<size_t>(s.oc)), Vec(x.size())};
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.oc; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const double d = dy[((n * s.oc + o) * oh + oy) * ow + ox];
          g.db[o] += d;
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t ky = 0; ky < s.k; ++ky)
              for (int64_t kx = 0; kx < s.k; ++kx) {
                const int64_t iy = oy * s.stride + ky - s.pad, ix = ox * s.stride + kx - s.pad;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                const int64_t xi = ((n * s.c + c) * s.h + iy) * s.w + ix;
                const int64_t wi = ((o * s.c + c) * s.k + ky) * s.k + kx;
                g.dw[wi] += d * x[xi];
                g.dx[xi] += d * w[wi];
              }
        }
  return g;
}

struct Pool {
  int64_t n, c, h, w, k, stride;
  int64_t oh() const { return (h - k) / stride + 1; }
  int64_t ow() const { return (w - k) / stride + 1; }
  cuda::math::PoolGeometry geometry() const {
    return {.n = n, .c = c, .h = h, .w = w, .k = k, .stride = stride, .oh = oh(), .ow = ow()};
  }
};

// Max pooling forward and backward (dx scattered to each window's first maximum).
inline void maxpool(std::span<const float> x, std::span<const float> dy, const Pool& s, Vec& y,
                    Vec& dx) {
  const int64_t oh = s.oh(), ow = s.ow();
  y.assign(static_cast<size_t>(s.n * s.c * oh * ow), 0.0);
  dx.assign(x.size(), 0.0);
  for (int64_t p = 0; p < s.n * s.c; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t best = -1;
        for (int64_t ky = 0; ky < s.k; ++ky)
          for (int64_t kx = 0; kx < s.k; ++kx) {
            const int64_t xi = (p * s.h + oy * s.stride + ky) * s.w + ox * s.stride + kx;
            if (best < 0 || x[xi] > x[best]) best = xi;
          }
        const int64_t yi = (p * oh + oy) * ow + ox;
        y[yi] = x[best];
        if (!dy.empty()) dx[best] += dy[yi];
      }
}

inline void avgpool(std::span<const float> x, std::span<const float> dy, const Pool& s, Vec& y,
                    Vec& dx) {
  const int64_t oh = s.oh(), ow = s.ow();
  const double area = static_cast<double>(s.k * s.k);
  y.assign(static_cast<size_t>(s.n * s.c * oh * ow), 0.0);
  dx.assign(x.size(), 0.0);
  for (int64_t p = 0; p < s.n * s.c; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const int64_t yi = (p * oh + oy) * ow + ox;
        for (int64_t ky = 0; ky < s.k; ++ky)
          for (int64_t kx = 0; kx < s.k; ++kx) {
            const int64_t xi = (p * s.h + oy * s.stride + ky) * s.w + ox * s.stride + kx;
            y[yi] += x[xi] / area;
            if (!dy.empty()) dx[xi] += dy[yi] / area;
          }
      }
}

// Mean softmax cross-entropy over the batch; dlogits is its gradient.
struct Xent {
  double loss = 0;
  int64_t correct = 0;
  Vec dlogits;
};

inline Xent softmax_xent(std::span<const float> logits, std::span<const float> labels,
                         int64_t batch, int64_t classes) {
  Xent r;
  r.dlogits.assign(logits.size(), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const auto label = static_cast<int64_t>(labels[b]);
    double zmax = logits[b * classes];
    int64_t argmax = 0;
    for (int64_t j = 0; j < classes; ++j) {
      if (logits[b * classes + j] > zmax) {
        zmax = logits[b * classes + j];
        argmax = j;
      }
    }
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(logits[b * classes + j] - zmax);
    r.loss += (std::log(sum) + zmax - logits[b * classes + label]) / static_cast<double>(batch);
    r.correct += argmax == label ? 1 : 0;
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(logits[b * classes + j] - zmax) / sum;
      r.dlogits[b * classes + j] = (p - (j == label ? 1.0 : 0.0)) / static_cast<double>(batch);
    }
  }
  return r;
}

// torch.optim.SGD as documented (dampening 0): buf = d on the first step, then
// buf = momentum buf + d; nesterov uses d + momentum buf.
struct Sgd {
  double lr, momentum, weight_decay;
  bool nesterov;
  Vec buf = {};
  void step(Vec& p, std::span<const float> g) {
    const bool first = buf.empty();
    buf.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + weight_decay * p[i];
      if (momentum != 0) {
        buf[i] = first ? d : momentum * buf[i] + d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
  }
};

// Adam / AdamW in the textbook form (Kingma & Ba; Loshchilov & Hutter): bias-corrected
// moments mhat = m / (1 - beta1^t), vhat = v / (1 - beta2^t); p -= lr mhat / (sqrt(vhat) + eps).
struct Adam {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  Vec m = {}, v = {};
  int t = 0;
  void step(Vec& p, std::span<const float> g) {
    m.resize(p.size());
    v.resize(p.size());
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      double grad = g[i];
      if (decoupled) {
        p[i] -= lr * weight_decay * p[i];
      } else {
        grad += weight_decay * p[i];
      }
      m[i] = beta1 * m[i] + (1 - beta1) * grad;
      v[i] = beta2 * v[i] + (1 - beta2) * grad * grad;
      const double mhat = m[i] / (1 - std::pow(beta1, t));
      const double vhat = v[i] / (1 - std::pow(beta2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

}  // namespace syncopate::cuda::reference
