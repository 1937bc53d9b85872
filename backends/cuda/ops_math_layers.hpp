#pragma once
// The per-element math of the CUDA kernels for the smooth activations, the normalisations
// over the last axis and the embedding, as plain functions callable from host and device
// (as ops_math.hpp). Each mirrors its CPU layer's arithmetic expression by expression and in
// the same order (core/nn/layers_activation.cpp, layers_norm.cpp, layers_transformer.cpp), so
// on the host it gives the CPU layer's bits (tests/cuda/ops_math_layers_test.cpp). On the
// device, expf/tanhf differ from the host's by up to 2 ulp and nvcc may fuse a * b + c, so
// there the kernels agree with the CPU layers to fp32 rounding, not bit for bit.
//
// Every function is a gather (one output element from its inputs, in a fixed order): no
// atomics, the same bits run after run. The embedding's gradient, a scatter-add on the CPU,
// is turned into a gather by grouping the positions by token on the host (TokenRows).
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cuda/ops_math.hpp"

namespace syncopate::cuda::math {

// ---- smooth activations: y = f(x); dx = dy * f'(x) --------------------------------------
// GELU is GPT-2's tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as the CPU
// layer (not the erf form).
inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluA = 0.044715f;

SYNC_HD float sigmoid_at(const float* x, int64_t i) { return 1.0f / (1.0f + expf(-x[i])); }
// From the forward output y: y (1 - y).
SYNC_HD float sigmoid_backward_at(const float* y, const float* dy, int64_t i) {
  return dy[i] * (y[i] * (1.0f - y[i]));
}
SYNC_HD float tanh_at(const float* x, int64_t i) { return tanhf(x[i]); }
SYNC_HD float tanh_backward_at(const float* y, const float* dy, int64_t i) {
  return dy[i] * (1.0f - y[i] * y[i]);
}
SYNC_HD float gelu_at(const float* x, int64_t i) {
  const float v = x[i];
  return 0.5f * v * (1.0f + tanhf(kGeluC * (v + kGeluA * v * v * v)));
}
SYNC_HD float gelu_backward_at(const float* x, const float* dy, int64_t i) {
  const float v = x[i];
  const float t = tanhf(kGeluC * (v + kGeluA * v * v * v));
  const float slope =
      0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * v * v);
  return dy[i] * slope;
}

// ---- LayerNorm / RMSNorm over rows of `features` ----------------------------------------
// One call per row, in the CPU layer's order: the mean is the double sum of the row in index
// order over n, rounded to float (0 for RMSNorm); the variance the double sum of the float
// squares (x - mean)^2 in index order over n; inv = 1 / sqrt(float(var) + 1e-5).
// stats (rows, 2) receives (mean, inv).
inline constexpr float kNormEps = 1e-5f;

SYNC_HD void norm_stats_row(const float* x, int64_t features, bool centre, int64_t row,
                            float* stats) {
  const float* in = x + row * features;
  float mean = 0.0f;
  if (centre) {
    double sum = 0;
    for (int64_t i = 0; i < features; ++i) sum += in[i];
    mean = static_cast<float>(sum / static_cast<double>(features));
  }
  double square = 0;
  for (int64_t i = 0; i < features; ++i) square += (in[i] - mean) * (in[i] - mean);
  stats[2 * row] = mean;
  stats[2 * row + 1] =
      1.0f / sqrtf(static_cast<float>(square / static_cast<double>(features)) + kNormEps);
}

// y at element i = (x - mean) inv gamma (+ beta); params: gamma (features) then beta.
SYNC_HD float norm_at(const float* x, const float* stats, const float* params, int64_t features,
                      bool centre, int64_t i) {
  const int64_t row = i / features, c = i % features;
  const float mean = stats[2 * row], inv = stats[2 * row + 1];
  return (x[i] - mean) * inv * params[c] + (centre ? params[features + c] : 0.0f);
}

// One row of dx = inv (g gamma - mean(g gamma) - x_hat mean(g gamma x_hat)), x_hat =
// (x - mean) inv, the means over double sums in index order (RMSNorm: no mean(g gamma)).
SYNC_HD void norm_backward_row(const float* x, const float* stats, const float* params,
                               const float* dy, int64_t features, bool centre, int64_t row,
                               float* dx) {
  const float* in = x + row * features;
  const float* g = dy + row * features;
  const float mean = stats[2 * row], inv = stats[2 * row + 1];
  double g_sum = 0, gx_sum = 0;
  for (int64_t i = 0; i < features; ++i) {
    const float h = (in[i] - mean) * inv;
    g_sum += g[i] * params[i];
    gx_sum += g[i] * params[i] * h;
  }
  const auto n = static_cast<double>(features);
  const float g_mean = centre ? static_cast<float>(g_sum / n) : 0.0f;
  const float gx_mean = static_cast<float>(gx_sum / n);
  float* d = dx + row * features;
  for (int64_t i = 0; i < features; ++i) {
    const float h = (in[i] - mean) * inv;
    d[i] = inv * (g[i] * params[i] - g_mean - h * gx_mean);
  }
}

// Parameter gradient j (gamma: j < features, beta: j >= features): grads[j] plus, row by row
// in order, dy x_hat (gamma) or dy (beta), each added in float as the CPU layer adds them.
SYNC_HD float norm_param_grad_at(const float* x, const float* stats, const float* dy,
                                 const float* grads, int64_t rows, int64_t features, int64_t j) {
  const bool beta = j >= features;
  const int64_t c = beta ? j - features : j;
  float acc = grads[j];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = r * features + c;
    if (beta) {
      acc += dy[at];
    } else {
      const float h = (x[at] - stats[2 * r]) * stats[2 * r + 1];
      acc += dy[at] * h;
    }
  }
  return acc;
}

// ---- embedding: (B, T) token ids -> (B, T, width) ---------------------------------------
// params: the token table (vocabulary, width), then the position table (positions, width).
// Output element i: the token's row, plus the position's row when positions > 0.
struct EmbeddingGeometry {
  int64_t vocabulary = 0, width = 0, positions = 0;
  int64_t tokens = 0, steps = 0;  // tokens = B * T, steps = T
};

SYNC_HD float embedding_at(const float* ids, const float* params, const EmbeddingGeometry& g,
                           int64_t i) {
  const int64_t token = i / g.width, c = i % g.width;
  const auto id = static_cast<int64_t>(ids[token]);
  float out = params[id * g.width + c];
  if (g.positions > 0) out += params[(g.vocabulary + token % g.steps) * g.width + c];
  return out;
}

// The positions of each token id, in increasing order: token v's positions are
// rows[offsets[v]] ... rows[offsets[v + 1] - 1]. Built on the host from the input ids (which
// the caller has checked are integers in [0, vocabulary)).
struct TokenRows {
  std::vector<int32_t> offsets;  // vocabulary + 1
  std::vector<int32_t> rows;     // tokens
};

inline TokenRows token_rows(const float* ids, int64_t tokens, int64_t vocabulary) {
  TokenRows out;
  out.offsets.assign(static_cast<size_t>(vocabulary) + 1, 0);
  for (int64_t i = 0; i < tokens; ++i) ++out.offsets[static_cast<size_t>(ids[i]) + 1];
  for (int64_t v = 0; v < vocabulary; ++v) {
    out.offsets[static_cast<size_t>(v) + 1] += out.offsets[static_cast<size_t>(v)];
  }
  std::vector<int32_t> next(out.offsets.begin(), out.offsets.end() - 1);
  out.rows.resize(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) {
    out.rows[static_cast<size_t>(next[static_cast<size_t>(ids[i])]++)] = static_cast<int32_t>(i);
  }
  return out;
}

// Parameter gradient j of the embedding: grads[j] plus the output gradients of the positions
// that read it, in increasing position order, each added in float, as the CPU layer's
// scatter-add adds them. Token rows use (offsets, rows); position row p is read by b T + p.
SYNC_HD float embedding_grad_at(const float* dy, const int32_t* offsets, const int32_t* rows,
                                const float* grads, const EmbeddingGeometry& g, int64_t j) {
  const int64_t row = j / g.width, c = j % g.width;
  float acc = grads[j];
  if (row < g.vocabulary) {
    for (int32_t k = offsets[row]; k < offsets[row + 1]; ++k) acc += dy[rows[k] * g.width + c];
    return acc;
  }
  const int64_t p = row - g.vocabulary;
  if (p >= g.steps) return acc;  // a position past this input's length: never read
  for (int64_t token = p; token < g.tokens; token += g.steps) acc += dy[token * g.width + c];
  return acc;
}

}  // namespace syncopate::cuda::math
