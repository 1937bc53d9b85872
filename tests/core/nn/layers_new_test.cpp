// The smooth activations, the normalisations, the plain skip, dense without bias or over
// sequences, the embedding and causal self-attention against double-precision references
// (forward, and input and parameter gradients by finite differences).
#include <gtest/gtest.h>

#include <cmath>

#include "core/base/check.hpp"
#include "core/nn/layer.hpp"
#include "core/nn/layers_extra.hpp"
#include "tests/core/nn/layers_testing.hpp"

namespace syncopate {
namespace {

using testing::check_layer;
using testing::GradCheckOptions;
using testing::Vec;

GradCheckOptions loose() {
  GradCheckOptions options;
  options.tolerance = 2e-3;
  return options;
}

Vec map(Vec v, double (*f)(double)) {
  for (double& d : v) d = f(d);
  return v;
}

double gelu_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Activations, SigmoidTanhAndGeluMatchTheirDefinitions) {
  const Shape in{3, 5, 4};
  auto s = sigmoid();
  check_layer(*s, in, [](const Vec& x, const Vec&) {
    return map(x, [](double v) { return 1 / (1 + std::exp(-v)); });
  });
  auto t = tanh_layer();
  check_layer(*t, in, [](const Vec& x, const Vec&) {
    return map(x, [](double v) { return std::tanh(v); });
  });
  auto g = gelu();
  check_layer(*g, in, [](const Vec& x, const Vec&) { return map(x, gelu_ref); });
  EXPECT_EQ(g->kind(), "gelu");
  EXPECT_EQ(g->output_shape(in), in);
  EXPECT_GT(g->forward_cost(in).flops, s->forward_cost(in).flops);
}

// (x - mean) / sqrt(var + eps) * gamma + beta per row of n (rms: no mean, no beta).
Vec norm_ref(const Vec& x, const Vec& p, int64_t n, bool centre) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(n); ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += centre ? x[r * n + i] / n : 0.0;
    for (int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean) / n;
    for (int64_t i = 0; i < n; ++i) {
      y[r * n + i] =
          (x[r * n + i] - mean) / std::sqrt(var + 1e-5) * p[i] + (centre ? p[n + i] : 0.0);
    }
  }
  return y;
}

TEST(Norms, LayerNormAndRmsNormMatchTheirDefinitions) {
  const Shape in{2, 3, 6};
  auto ln = layernorm(6);
  EXPECT_EQ(ln->num_params(), 12);
  check_layer(
      *ln, in, [](const Vec& x, const Vec& p) { return norm_ref(x, p, 6, true); }, loose());
  auto rms = rmsnorm(6);
  EXPECT_EQ(rms->num_params(), 6);
  check_layer(
      *rms, in, [](const Vec& x, const Vec& p) { return norm_ref(x, p, 6, false); }, loose());
  EXPECT_THROW(ln->output_shape({2, 5}), UserError);
}

TEST(Dense, WithoutBiasAndOverASequence) {
  auto layer = dense(4, 3, Bias::kNo);
  EXPECT_EQ(layer->num_params(), 12);
  const Shape in{2, 5, 4};
  EXPECT_EQ(layer->output_shape(in), (Shape{2, 5, 3}));
  check_layer(*layer, in, [](const Vec& x, const Vec& p) {
    Vec y;
    for (size_t r = 0; r < x.size() / 4; ++r)
      for (size_t o = 0; o < 3; ++o) {
        double sum = 0;
        for (size_t i = 0; i < 4; ++i) sum += p[o * 4 + i] * x[r * 4 + i];
        y.push_back(sum);
      }
    return y;
  });
  // Over (B, T, in) it costs what (B * T, in) does.
  EXPECT_EQ(dense(4, 3)->forward_cost(in).flops, dense(4, 3)->forward_cost({10, 4}).flops);
}

TEST(Skip, IsXPlusItsLayers) {
  std::vector<std::unique_ptr<Layer>> inner;
  inner.push_back(dense(4, 4));
  inner.push_back(tanh_layer());
  auto layer = skip(std::move(inner));
  EXPECT_EQ(layer->kind(), "residual");
  EXPECT_EQ(layer->num_params(), 20);
  const Shape in{3, 4};
  check_layer(*layer, in, [](const Vec& x, const Vec& p) {
    Vec y(x.size());
    for (size_t r = 0; r < 3; ++r)
      for (size_t o = 0; o < 4; ++o) {
        double sum = p[16 + o];
        for (size_t i = 0; i < 4; ++i) sum += p[o * 4 + i] * x[r * 4 + i];
        y[r * 4 + o] = x[r * 4 + o] + std::tanh(sum);
      }
    return y;
  });
  EXPECT_EQ(layer->forward_cost(in).kind, OpKind::kGemm);  // its costliest layer's
}

TEST(Skip, DropoutsInsideOneBlockDrawDifferentMasks) {
  std::vector<std::unique_ptr<Layer>> inner;
  inner.push_back(dropout(0.5f));
  inner.push_back(dropout(0.5f));
  auto layer = skip(std::move(inner));
  const Shape in{4, 1000};
  Tensor x(in), y(in);
  x.fill(1.0f);
  layer->forward(x, y, {.mode = Mode::kTrain, .seed = 3, .layer = 2});
  // y = x + m2 * m1 * x with masks of 0 or 2: 4 is kept by both, a quarter of the time if the
  // masks are independent (half of it if they were the same).
  int both = 0;
  for (int64_t i = 0; i < y.numel(); ++i) both += y[i] - x[i] > 3.0f;
  EXPECT_GT(both, 800);
  EXPECT_LT(both, 1200);
}

TEST(Embedding, GathersTokenAndPositionRowsAndScattersTheirGradients) {
  auto layer = embedding(7, 3, 4);
  EXPECT_EQ(layer->num_params(), (7 + 4) * 3);
  const Shape in{2, 4};
  GradCheckOptions options;
  options.x = {0, 6, 2, 2, 5, 1, 0, 3};
  options.input_grad = false;
  check_layer(
      *layer, in,
      [](const Vec& x, const Vec& p) {
        Vec y;
        for (size_t i = 0; i < x.size(); ++i)
          for (size_t c = 0; c < 3; ++c)
            y.push_back(p[static_cast<size_t>(x[i]) * 3 + c] + p[(7 + i % 4) * 3 + c]);
        return y;
      },
      options);
  EXPECT_EQ(layer->output_shape(in), (Shape{2, 4, 3}));
  EXPECT_THROW(layer->output_shape({2, 5}), UserError);  // more tokens than positions
  std::vector<float> params(33), grads(33);
  layer->bind(params, grads);
  Tensor bad({1, 1}, {7.0f}), y({1, 1, 3});
  EXPECT_THROW(layer->forward(bad, y, {}), UserError);  // not a token id
}

// Causal multi-head self-attention in double, from its definition.
Vec attention_ref(const Vec& x, const Vec& p, int64_t batch, int64_t steps, int64_t c,
                  int64_t heads, bool bias) {
  const int64_t d = c / heads, rows = batch * steps;
  const size_t bqkv = static_cast<size_t>(3 * c * c), wo = bqkv + (bias ? 3 * c : 0);
  const size_t bo = wo + static_cast<size_t>(c * c);
  Vec qkv(static_cast<size_t>(rows * 3 * c)), ctx(static_cast<size_t>(rows * c)), y(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < 3 * c; ++o) {
      double sum = bias ? p[bqkv + o] : 0.0;
      for (int64_t i = 0; i < c; ++i) sum += p[o * c + i] * x[r * c + i];
      qkv[r * 3 * c + o] = sum;
    }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < steps; ++t) {
        Vec score(static_cast<size_t>(t + 1));
        double top = -1e300, total = 0;
        for (int64_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i)
            dot += qkv[(b * steps + t) * 3 * c + h * d + i] *
                   qkv[(b * steps + s) * 3 * c + c + h * d + i];
          score[s] = dot / std::sqrt(static_cast<double>(d));
          top = std::max(top, score[s]);
        }
        for (double& v : score) total += (v = std::exp(v - top));
        for (int64_t i = 0; i < d; ++i) {
          double sum = 0;
          for (int64_t s = 0; s <= t; ++s)
            sum += score[s] / total * qkv[(b * steps + s) * 3 * c + 2 * c + h * d + i];
          ctx[(b * steps + t) * c + h * d + i] = sum;
        }
      }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < c; ++o) {
      double sum = bias ? p[bo + o] : 0.0;
      for (int64_t i = 0; i < c; ++i) sum += p[wo + o * c + i] * ctx[r * c + i];
      y[r * c + o] = sum;
    }
  return y;
}

TEST(Attention, CausalMultiHeadMatchesTheDefinition) {
  for (const Bias bias : {Bias::kYes, Bias::kNo}) {
    auto layer = attention(6, 2, bias);
    const bool with = bias == Bias::kYes;
    EXPECT_EQ(layer->num_params(), 4 * 36 + (with ? 24 : 0));
    const Shape in{2, 4, 6};
    check_layer(
        *layer, in,
        [&](const Vec& x, const Vec& p) { return attention_ref(x, p, 2, 4, 6, 2, with); }, loose());
  }
  // The future does not leak: changing the last token leaves earlier outputs unchanged.
  auto layer = attention(4, 2, Bias::kYes);
  std::vector<float> params = testing::random_floats(80, 3), grads(80);
  layer->bind(params, grads);
  Tensor x({1, 3, 4}, testing::random_floats(12, 4)), y1({1, 3, 4}), y2({1, 3, 4});
  layer->forward(x, y1, {});
  for (int i = 8; i < 12; ++i) x[i] += 1.0f;
  layer->forward(x, y2, {});
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y1[i], y2[i]) << i;
  EXPECT_NE(y1[8], y2[8]);
  EXPECT_THROW(attention(6, 4, Bias::kYes), UserError);
}

TEST(Attention, FlopsFollowTheClosedForm) {
  auto layer = attention(64, 4, Bias::kYes);
  const double b = 2, t = 16, c = 64, h = 4;
  const double forward = b * t * (8 * c * c + 4 * c) + 4 * b * t * t * c + 5 * b * h * t * t;
  EXPECT_DOUBLE_EQ(layer->forward_cost({2, 16, 64}).flops, forward);
  EXPECT_DOUBLE_EQ(layer->backward_cost({2, 16, 64}, true).flops, 2 * forward);
}

TEST(CostOnlyLayers, SwigluAndTiedDenseCountButDoNotCompute) {
  auto mlp = swiglu(8, 20, Bias::kNo);
  EXPECT_EQ(mlp->num_params(), 3 * 8 * 20);
  EXPECT_EQ(mlp->output_shape({2, 3, 8}), (Shape{2, 3, 8}));
  auto head = tied_dense(8, 50);
  EXPECT_EQ(head->num_params(), 0);
  EXPECT_EQ(head->output_shape({2, 3, 8}), (Shape{2, 3, 50}));
  EXPECT_DOUBLE_EQ(head->forward_cost({2, 3, 8}).flops, 2.0 * 6 * 8 * 50);
  Tensor x({2, 3, 8}), y({2, 3, 50});
  EXPECT_THROW(head->forward(x, y, {}), InternalError);
}

}  // namespace
}  // namespace syncopate
