// Pooling, ReLU, Flatten, Dropout and the ResNet pieces against double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/base/check.hpp"
#include "core/nn/layer.hpp"
#include "core/nn/layers_extra.hpp"
#include "tests/core/nn/layers_testing.hpp"

namespace syncopate {
namespace {

using testing::check_layer;
using testing::conv_ref;
using testing::GradCheckOptions;
using testing::relu_ref;
using testing::Vec;

// Distinct values 0.01 apart in random order: no ties, no kinks within the finite-difference step.
std::vector<float> distinct_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.01f * (static_cast<float>(i) - static_cast<float>(n) / 2);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

// Max (or mean) over k x k windows; padding is -infinity for max and never in a mean window.
Vec pool_ref(const Vec& x, bool max, int64_t planes, int64_t h, int64_t w, int64_t k, int64_t s,
             int64_t pad) {
  const int64_t ho = (h + 2 * pad - k) / s + 1, wo = (w + 2 * pad - k) / s + 1;
  Vec y;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        double acc = max ? -1e300 : 0.0;
        for (int64_t ky = 0; ky < k; ++ky)
          for (int64_t kx = 0; kx < k; ++kx) {
            const int64_t iy = oy * s - pad + ky, ix = ox * s - pad + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const double v = x[static_cast<size_t>((p * h + iy) * w + ix)];
            acc = max ? std::max(acc, v) : acc + v;
          }
        y.push_back(max ? acc : acc / static_cast<double>(k * k));
      }
  return y;
}

TEST(MaxPool2D, ForwardAndGradientMatchDoubleReference) {
  struct Case {
    int64_t b, c, h, w, k, s, pad;
  };
  for (const Case& c : {Case{2, 3, 6, 6, 2, 2, 0}, Case{1, 2, 7, 5, 3, 2, 1},
                        Case{2, 1, 5, 5, 2, 1, 0}, Case{1, 2, 9, 9, 3, 3, 0}}) {
    auto layer = maxpool2d(c.k, c.s, c.pad);
    const Shape in{c.b, c.c, c.h, c.w};
    GradCheckOptions opt;
    opt.x = distinct_values(static_cast<size_t>(numel(in)), 7);
    check_layer(
        *layer, in,
        [&](const Vec& x, const Vec&) {
          return pool_ref(x, true, c.b * c.c, c.h, c.w, c.k, c.s, c.pad);
        },
        opt);
  }
}

TEST(MaxPool2D, TiesGiveTheWholeGradientToTheFirstMaximum) {
  auto layer = maxpool2d(2, 2);
  Tensor x({1, 1, 2, 2}, {3, 3, 3, 1});
  Tensor y({1, 1, 1, 1}), dy({1, 1, 1, 1}, {2.0f}), dx({1, 1, 2, 2});
  layer->forward(x, y, {});
  EXPECT_EQ(y[0], 3.0f);
  layer->backward(x, y, dy, &dx);
  EXPECT_EQ(dx[0], 2.0f);
  EXPECT_EQ(dx[1], 0.0f);
  EXPECT_EQ(dx[2], 0.0f);
  EXPECT_EQ(dx[3], 0.0f);
}

// The 2x2 kernels work in chunks of 16, 8 or 4 windows with an overlapping last chunk, and one
// window at a time below 4: every width from 1 to 20 windows, odd sizes, many ties (values from
// a set of five), negative-zero gradients, and with and without an absorbed ReLU, against the
// rule written out window by window. Equal bits, with -0 and +0 told apart.
TEST(MaxPool2D, TwoByTwoKernelsMatchTheRuleAtEveryWidth) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> pick(-2, 2);
  const auto same_bits = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (const bool relu : {false, true}) {
    for (int64_t h : {2, 3, 6}) {
      for (int64_t w = 2; w <= 41; ++w) {
        const int64_t ho = h / 2, wo = w / 2, planes = 3;
        auto layer = maxpool2d(2, 2);
        Tensor x({1, planes, h, w}), y({1, planes, ho, wo}), dy({1, planes, ho, wo});
        Tensor dx({1, planes, h, w});
        for (float& v : x.span()) v = 0.5f * static_cast<float>(pick(gen));
        for (float& v : dy.span()) v = pick(gen) == 0 ? -0.0f : static_cast<float>(pick(gen));
        if (relu) {
          layer->forward_after_relu(x, y, {});
          layer->backward_after_relu(x, y, dy, &dx);
        } else {
          layer->forward(x, y, {});
          layer->backward(x, y, dy, &dx);
        }
        std::vector<float> want_dx(static_cast<size_t>(planes * h * w), 0.0f);
        for (int64_t p = 0; p < planes; ++p) {
          for (int64_t oy = 0; oy < ho; ++oy) {
            for (int64_t ox = 0; ox < wo; ++ox) {
              int64_t best = (p * h + 2 * oy) * w + 2 * ox;  // the first maximum wins
              for (int64_t at : {best + 1, best + w, best + w + 1})
                if (x[at] > x[best]) best = at;
              const int64_t o = (p * ho + oy) * wo + ox;
              const float want_y = relu ? std::max(x[best], 0.0f) : x[best];
              ASSERT_TRUE(same_bits(y[o], want_y))
                  << "relu " << relu << ", " << h << "x" << w << ", window " << o;
              if (!relu || want_y > 0.0f) want_dx[static_cast<size_t>(best)] = dy[o] + 0.0f;
            }
          }
        }
        for (int64_t i = 0; i < dx.numel(); ++i)
          ASSERT_TRUE(same_bits(dx[i], want_dx[static_cast<size_t>(i)]))
              << "relu " << relu << ", " << h << "x" << w << ", input " << i << ": " << dx[i]
              << " against " << want_dx[static_cast<size_t>(i)];
      }
    }
  }
}

TEST(AvgPool2D, ForwardAndGradientMatchDoubleReference) {
  auto layer = avgpool2d(3, 2);
  const Shape in{2, 3, 7, 8};
  check_layer(*layer, in,
              [&](const Vec& x, const Vec&) { return pool_ref(x, false, 6, 7, 8, 3, 2, 0); });
  EXPECT_EQ(layer->output_shape(in), (Shape{2, 3, 3, 3}));
  EXPECT_EQ(layer->forward_cost(in).kind, OpKind::kPool);
}

TEST(GlobalAvgPool, ForwardAndGradientMatchDoubleReference) {
  auto layer = global_avgpool();
  const Shape in{3, 4, 5, 6};
  EXPECT_EQ(layer->output_shape(in), (Shape{3, 4}));
  check_layer(*layer, in, [](const Vec& x, const Vec&) {
    Vec y(12, 0.0);  // 12 planes of 5 x 6 = 30 values
    for (size_t i = 0; i < x.size(); ++i) y[i / 30] += x[i] / 30.0;
    return y;
  });
}

TEST(ReLU, ForwardAndGradientMatchDoubleReference) {
  auto layer = relu();
  const Shape in{4, 3, 5};
  GradCheckOptions opt;
  opt.x = distinct_values(static_cast<size_t>(numel(in)), 3);
  for (float& v : opt.x) v += v >= 0 ? 0.005f : 0.0f;  // keep away from the kink at 0
  check_layer(
      *layer, in, [](const Vec& x, const Vec&) { return relu_ref(x); }, opt);
  EXPECT_EQ(layer->forward_cost(in).kind, OpKind::kElementwise);
}

TEST(Flatten, IsIdentityOnValuesAndGradients) {
  auto layer = flatten();
  const Shape in{2, 3, 4, 5};
  EXPECT_EQ(layer->output_shape(in), (Shape{2, 60}));
  check_layer(*layer, in, [](const Vec& x, const Vec&) { return x; });
}

// The mask is read back from one forward pass; the reference is then x * mask, which the
// backward must differentiate exactly.
TEST(Dropout, MaskIsScaledKeepOrDropAndGradientMatches) {
  const float rate = 0.3f;
  auto layer = dropout(rate);
  const Shape in{8, 250};
  StepContext ctx{Mode::kTrain, 42, 1, 2, 3, 4};
  Tensor x(in, testing::random_floats(2000, 9));
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = x[i] >= 0 ? x[i] + 0.1f : x[i] - 0.1f;
  Tensor y(in);
  layer->forward(x, y, ctx);
  Vec mask(2000);
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    mask[static_cast<size_t>(i)] = static_cast<double>(y[i]) / x[i];
    const bool keep = std::abs(mask[static_cast<size_t>(i)] - 1.0 / (1.0 - rate)) < 1e-6;
    EXPECT_TRUE(keep || y[i] == 0.0f) << i;
    kept += keep;
  }
  // Binomial(2000, 0.7): mean 1400, sd 20.5.
  EXPECT_NEAR(static_cast<double>(kept), 1400.0, 100.0);
  GradCheckOptions opt;
  opt.x = std::vector<float>(x.span().begin(), x.span().end());
  opt.ctx = ctx;
  check_layer(
      *layer, in,
      [&](const Vec& xv, const Vec&) {
        Vec out(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) out[i] = xv[i] * mask[i];
        return out;
      },
      opt);
}

TEST(Dropout, MaskDependsOnlyOnTheKeyAndEvalIsIdentity) {
  auto a = dropout(0.5f), b = dropout(0.5f);
  const Shape in{4, 64};
  Tensor x(in);
  x.fill(1.0f);
  auto run = [&](Layer& layer, StepContext ctx) {
    Tensor y(in);
    layer.forward(x, y, ctx);
    return std::vector<float>(y.span().begin(), y.span().end());
  };
  const StepContext base{Mode::kTrain, 7, 0, 1, 5, 2};
  EXPECT_EQ(run(*a, base), run(*b, base));  // two layer objects, same key: same mask
  for (int field = 0; field < 5; ++field) {
    StepContext other = base;
    if (field == 0) other.seed = 8;
    if (field == 1) other.worker = 1;
    if (field == 2) other.epoch = 2;
    if (field == 3) other.step = 6;
    if (field == 4) other.layer = 3;
    EXPECT_NE(run(*a, base), run(*a, other)) << "field " << field;
  }
  StepContext eval = base;
  eval.mode = Mode::kEval;
  EXPECT_EQ(run(*a, eval), std::vector<float>(256, 1.0f));
  Tensor y(in), dy(in, testing::random_floats(256, 4)), dx(in);
  a->forward(x, y, eval);
  a->backward(x, y, dy, &dx);
  EXPECT_EQ(std::vector<float>(dx.span().begin(), dx.span().end()),
            std::vector<float>(dy.span().begin(), dy.span().end()));
  EXPECT_THROW(dropout(1.0f), UserError);
  EXPECT_THROW(dropout(-0.1f), UserError);
}

// relu(conv3x3 s2 -> relu -> conv3x3 + conv1x1 s2 shortcut), against composed references.
TEST(Residual, ForwardAndGradientsMatchComposedReference) {
  std::vector<std::unique_ptr<Layer>> main, shortcut;
  main.push_back(conv2d(3, 4, 3, 2, 1));
  main.push_back(relu());
  main.push_back(conv2d(4, 4, 3, 1, 1, Bias::kNo));
  shortcut.push_back(conv2d(3, 4, 1, 2, 0));
  auto layer = residual(std::move(main), std::move(shortcut));
  const Shape in{2, 3, 6, 5};
  EXPECT_EQ(layer->output_shape(in), (Shape{2, 4, 3, 3}));
  const int64_t w1 = 4 * 3 * 9, w2 = 4 * 4 * 9, w3 = 4 * 3;
  EXPECT_EQ(layer->num_params(), w1 + 4 + w2 + w3 + 4);
  check_layer(*layer, in, [&](const Vec& x, const Vec& p) {
    const Vec a = relu_ref(conv_ref(x, p, 0, w1, 2, 3, 6, 5, 4, 3, 2, 1));
    const Vec m = conv_ref(a, p, w1 + 4, -1, 2, 4, 3, 3, 4, 3, 1, 1);
    const Vec s = conv_ref(x, p, w1 + 4 + w2, w1 + 4 + w2 + w3, 2, 3, 6, 5, 4, 1, 2, 0);
    Vec y(m.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(m[i] + s[i], 0.0);
    return y;
  });
}

TEST(Residual, IdentityShortcutGradientMatches) {
  std::vector<std::unique_ptr<Layer>> main;
  main.push_back(conv2d(3, 3, 3, 1, 1));
  auto layer = residual(std::move(main), {});
  const Shape in{2, 3, 4, 4};
  check_layer(*layer, in, [&](const Vec& x, const Vec& p) {
    const Vec m = conv_ref(x, p, 0, 81, 2, 3, 4, 4, 3, 3, 1, 1);
    Vec y(m.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(m[i] + x[i], 0.0);
    return y;
  });
}

TEST(BatchNorm2D, CountsParametersButIsCostOnly) {
  auto layer = batchnorm2d(5);
  EXPECT_EQ(layer->num_params(), 10);
  std::vector<float> params(10, 7.0f), grads(10);
  layer->bind(params, grads);
  Rng rng({1});
  layer->init_params(rng, InitScheme::kHe);
  EXPECT_EQ(params, (std::vector<float>{1, 1, 1, 1, 1, 0, 0, 0, 0, 0}));
  Tensor x({2, 5, 3, 3}), y({2, 5, 3, 3});
  EXPECT_THROW(layer->forward(x, y, {}), InternalError);
  EXPECT_GT(layer->forward_cost(x.shape()).flops, 0);
  EXPECT_THROW(layer->output_shape({2, 4, 3, 3}), UserError);
}

TEST(UnusedConv2D, HoldsParametersThatTakeNoPartInCompute) {
  auto layer = unused_conv2d(4, 8, 1);
  EXPECT_EQ(layer->num_params(), 4 * 8 + 8);
  const Shape in{2, 3, 5, 5};
  check_layer(*layer, in, [](const Vec& x, const Vec&) { return x; });
  EXPECT_EQ(layer->forward_cost(in).flops, 0);
  EXPECT_EQ(layer->backward_cost(in, true).flops, 0);
}

}  // namespace
}  // namespace syncopate
