// GEMM, im2col/col2im, Dense and Conv2D against double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/base/check.hpp"
#include "core/nn/layer.hpp"
#include "core/tensor/gemm.hpp"
#include "tests/core/nn/layers_testing.hpp"

namespace syncopate {
namespace {

using testing::check_layer;
using testing::conv_ref;
using testing::GradCheckOptions;
using testing::normalised_error;
using testing::random_floats;
using testing::to_double;
using testing::Vec;

// C = alpha op(A) op(B) + beta C on sub-matrices (ld > cols), every transpose combination.
TEST(Gemm, MatchesNaiveDoubleForEveryTransposeAndStride) {
  const int64_t m = 37, n = 29, k = 53, pad = 3;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      for (float beta : {0.0f, 1.0f, -0.5f}) {
        const bool at = ta == Trans::kYes, bt = tb == Trans::kYes;
        const int64_t ar = at ? k : m, ac = at ? m : k, br = bt ? n : k, bc = bt ? k : n;
        const auto a = random_floats(static_cast<size_t>(ar * (ac + pad)), 1);
        const auto b = random_floats(static_cast<size_t>(br * (bc + pad)), 2);
        auto c = random_floats(static_cast<size_t>(m * (n + pad)), 3);
        if (beta == 0.0f) c[0] = std::numeric_limits<float>::quiet_NaN();
        const auto c0 = c;
        const float alpha = 0.75f;
        gemm(ta, tb, alpha, {a.data(), ar, ac, ac + pad}, {b.data(), br, bc, bc + pad}, beta,
             {c.data(), m, n, n + pad});
        Vec got, want;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t l = 0; l < k; ++l) {
              const double av = at ? a[static_cast<size_t>(l * (ac + pad) + i)]
                                   : a[static_cast<size_t>(i * (ac + pad) + l)];
              const double bv = bt ? b[static_cast<size_t>(j * (bc + pad) + l)]
                                   : b[static_cast<size_t>(l * (bc + pad) + j)];
              sum += av * bv;
            }
            const size_t at_c = static_cast<size_t>(i * (n + pad) + j);
            const double old = beta == 0.0f ? 0.0 : c0[at_c];
            want.push_back(alpha * sum + beta * old);
            got.push_back(c[at_c]);
          }
          // The padding columns of C are untouched.
          for (int64_t j = n; j < n + pad; ++j) {
            const size_t at_c = static_cast<size_t>(i * (n + pad) + j);
            EXPECT_EQ(c[at_c], c0[at_c]);
          }
        }
        EXPECT_LT(normalised_error(got, want), 1e-6)
            << "ta " << at << " tb " << bt << " beta " << beta;
      }
    }
  }
}

TEST(Gemm, RejectsMismatchedShapes) {
  std::vector<float> a(6), b(6), c(4);
  EXPECT_THROW(gemm(Trans::kNo, Trans::kNo, 1.0f, {a.data(), 2, 3, 3}, {b.data(), 2, 3, 3}, 0.0f,
                    {c.data(), 2, 2, 2}),
               InternalError);
}

// im2col against its definition, and col2im_add as its adjoint: <im2col(x), c> = <x, col2im(c)>.
TEST(Im2col, MatchesDefinitionAndCol2imIsItsAdjoint) {
  for (const ConvGeometry& g : {ConvGeometry{2, 7, 6, 3, 1, 1}, ConvGeometry{3, 7, 6, 3, 2, 1},
                                ConvGeometry{2, 6, 7, 5, 1, 2}, ConvGeometry{3, 4, 5, 1, 1, 0},
                                ConvGeometry{2, 8, 9, 5, 2, 2}, ConvGeometry{2, 5, 5, 1, 2, 0},
                                ConvGeometry{1, 4, 4, 3, 3, 2}}) {
    const int64_t rows = g.col_rows(), cols = g.col_cols(), ld = cols + 2;
    const auto x = random_floats(static_cast<size_t>(g.channels * g.height * g.width), 5);
    std::vector<float> col(static_cast<size_t>(rows * ld), 99.0f);
    im2col(x, g, col.data(), ld);
    const int64_t wo = g.out_width();
    for (int64_t c = 0; c < g.channels; ++c)
      for (int64_t ky = 0; ky < g.kernel; ++ky)
        for (int64_t kx = 0; kx < g.kernel; ++kx)
          for (int64_t p = 0; p < cols; ++p) {
            const int64_t iy = (p / wo) * g.stride - g.padding + ky;
            const int64_t ix = (p % wo) * g.stride - g.padding + kx;
            const bool inside = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
            const float want =
                inside ? x[static_cast<size_t>((c * g.height + iy) * g.width + ix)] : 0.0f;
            const int64_t row = (c * g.kernel + ky) * g.kernel + kx;
            ASSERT_EQ(col[static_cast<size_t>(row * ld + p)], want) << row << "," << p;
          }
    const auto r = random_floats(col.size(), 6);
    std::vector<float> back(x.size(), 0.0f), scratch = r;
    col2im_add(scratch.data(), ld, g, back);
    double lhs = 0, rhs = 0;
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t p = 0; p < cols; ++p) {
        const size_t i = static_cast<size_t>(row * ld + p);
        lhs += static_cast<double>(col[i]) * r[i];
      }
    for (size_t i = 0; i < x.size(); ++i) rhs += static_cast<double>(x[i]) * back[i];
    EXPECT_NEAR(lhs, rhs, 1e-4 * (std::abs(lhs) + 1));
  }
}

Vec dense_ref(const Vec& x, const Vec& p, int64_t batch, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(batch * out));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < out; ++o) {
      double sum = p[static_cast<size_t>(out * in + o)];
      for (int64_t i = 0; i < in; ++i)
        sum += p[static_cast<size_t>(o * in + i)] * x[static_cast<size_t>(b * in + i)];
      y[static_cast<size_t>(b * out + o)] = sum;
    }
  return y;
}

TEST(Dense, ForwardAndGradientsMatchDoubleReference) {
  for (const auto& [batch, in, out] :
       {std::tuple<int64_t, int64_t, int64_t>{3, 7, 5}, {1, 4, 9}, {16, 33, 17}}) {
    auto layer = dense(in, out);
    EXPECT_EQ(layer->num_params(), in * out + out);
    EXPECT_EQ(layer->output_shape({batch, in}), (Shape{batch, out}));
    check_layer(*layer, {batch, in},
                [&](const Vec& x, const Vec& p) { return dense_ref(x, p, batch, in, out); });
  }
  auto layer = dense(4, 3);
  GradCheckOptions no_input_grad;
  no_input_grad.input_grad = false;
  check_layer(
      *layer, {2, 4}, [](const Vec& x, const Vec& p) { return dense_ref(x, p, 2, 4, 3); },
      no_input_grad);
}

TEST(Dense, RejectsBadShapesAndArguments) {
  EXPECT_THROW(dense(0, 3), UserError);
  EXPECT_THROW(dense(4, 3)->output_shape({2, 5}), UserError);
  EXPECT_THROW(dense(4, 3)->output_shape({2, 2, 2}), UserError);
}

TEST(Dense, CostsCountMultiplyAddAsTwo) {
  auto layer = dense(10, 4);
  EXPECT_EQ(layer->forward_cost({8, 10}).flops, 2.0 * 8 * 10 * 4 + 8 * 4);
  EXPECT_EQ(layer->forward_cost({8, 10}).kind, OpKind::kGemm);
  EXPECT_EQ(layer->backward_cost({8, 10}, false).flops, 2.0 * 8 * 10 * 4 + 8 * 4);
  EXPECT_EQ(layer->backward_cost({8, 10}, true).flops, 4.0 * 8 * 10 * 4 + 8 * 4);
}

struct ConvCase {
  int64_t batch, cin, h, w, cout, k, stride, pad;
  Bias bias;
};

TEST(Conv2D, ForwardAndGradientsMatchDoubleReference) {
  for (const ConvCase& c :
       {ConvCase{2, 3, 7, 6, 4, 3, 1, 1, Bias::kYes}, ConvCase{2, 3, 7, 6, 4, 3, 2, 1, Bias::kYes},
        ConvCase{1, 2, 9, 8, 3, 5, 2, 2, Bias::kYes}, ConvCase{2, 3, 5, 5, 2, 1, 2, 0, Bias::kNo},
        ConvCase{3, 1, 6, 6, 5, 3, 1, 0, Bias::kNo}, ConvCase{2, 2, 6, 7, 3, 5, 1, 2, Bias::kYes},
        ConvCase{2, 3, 4, 5, 2, 1, 1, 0, Bias::kYes},
        ConvCase{1, 2, 4, 5, 3, 3, 3, 2, Bias::kYes}}) {
    auto layer = conv2d(c.cin, c.cout, c.k, c.stride, c.pad, c.bias);
    const int64_t nw = c.cout * c.cin * c.k * c.k;
    EXPECT_EQ(layer->num_params(), nw + (c.bias == Bias::kYes ? c.cout : 0));
    const Shape in{c.batch, c.cin, c.h, c.w};
    const Shape out = layer->output_shape(in);
    EXPECT_EQ(out[2], (c.h + 2 * c.pad - c.k) / c.stride + 1);
    EXPECT_EQ(out[3], (c.w + 2 * c.pad - c.k) / c.stride + 1);
    const auto ref = [&](const Vec& x, const Vec& p) {
      return conv_ref(x, p, 0, c.bias == Bias::kYes ? nw : -1, c.batch, c.cin, c.h, c.w, c.cout,
                      c.k, c.stride, c.pad);
    };
    SCOPED_TRACE(::testing::Message() << "k " << c.k << " s " << c.stride << " p " << c.pad);
    check_layer(*layer, in, ref);
    GradCheckOptions no_input_grad;
    no_input_grad.input_grad = false;
    check_layer(*layer, in, ref, no_input_grad);
  }
}

// 3x3, stride 1, padding 1, 8 input channels or more: Winograd's F(2x2, 3x3) over groups of
// images (core/tensor/winograd.hpp). Odd and one-pixel planes (tiles reaching past the plane),
// a batch that is not a multiple of the group (3x3 planes: 32 images a group), no bias.
TEST(Conv2D, WinogradPathMatchesDoubleReference) {
  for (const ConvCase& c :
       {ConvCase{1, 8, 14, 14, 3, 3, 1, 1, Bias::kYes},
        ConvCase{2, 9, 5, 7, 3, 3, 1, 1, Bias::kYes}, ConvCase{2, 8, 1, 1, 4, 3, 1, 1, Bias::kNo},
        ConvCase{65, 8, 3, 3, 1, 3, 1, 1, Bias::kYes},
        ConvCase{1, 16, 2, 6, 12, 3, 1, 1, Bias::kNo}}) {
    auto layer = conv2d(c.cin, c.cout, c.k, c.stride, c.pad, c.bias);
    const int64_t nw = c.cout * c.cin * c.k * c.k;
    const Shape in{c.batch, c.cin, c.h, c.w};
    EXPECT_EQ(layer->output_shape(in), (Shape{c.batch, c.cout, c.h, c.w}));
    const auto ref = [&](const Vec& x, const Vec& p) {
      return conv_ref(x, p, 0, c.bias == Bias::kYes ? nw : -1, c.batch, c.cin, c.h, c.w, c.cout,
                      c.k, c.stride, c.pad);
    };
    SCOPED_TRACE(::testing::Message() << "batch " << c.batch << " cin " << c.cin << " plane " << c.h
                                      << "x" << c.w << " cout " << c.cout);
    check_layer(*layer, in, ref);
    GradCheckOptions no_input_grad;
    no_input_grad.input_grad = false;
    check_layer(*layer, in, ref, no_input_grad);
  }
}

// 3x3, stride 1, padding 1 below 8 input channels, and any channels when asked for: the direct
// forward and weight gradient (core/tensor/conv_direct.hpp). Widths 1 to 37 (rows in chunks of
// 16, 8, 4 or 1 pixels, the last chunk overlapping), output channels that the block of 4 does
// not divide, with and without a bias.
TEST(Conv2D, DirectPathMatchesDoubleReference) {
  std::vector<ConvCase> cases;
  for (int64_t w : {1, 3, 4, 5, 8, 11, 16, 19, 28, 37})
    cases.push_back(
        ConvCase{2, 1 + w % 3, 3, w, 1 + w % 6, 3, 1, 1, w % 2 == 0 ? Bias::kYes : Bias::kNo});
  cases.push_back(ConvCase{1, 9, 4, 6, 5, 3, 1, 1, Bias::kYes});  // kDirect asked for
  for (const ConvCase& c : cases) {
    const ConvAlgorithm algorithm = c.cin >= 8 ? ConvAlgorithm::kDirect : ConvAlgorithm::kAuto;
    auto layer = conv2d(c.cin, c.cout, c.k, c.stride, c.pad, c.bias, algorithm);
    const int64_t nw = c.cout * c.cin * c.k * c.k;
    const Shape in{c.batch, c.cin, c.h, c.w};
    const auto ref = [&](const Vec& x, const Vec& p) {
      return conv_ref(x, p, 0, c.bias == Bias::kYes ? nw : -1, c.batch, c.cin, c.h, c.w, c.cout,
                      c.k, c.stride, c.pad);
    };
    SCOPED_TRACE(::testing::Message()
                 << "cin " << c.cin << " plane " << c.h << "x" << c.w << " cout " << c.cout);
    check_layer(*layer, in, ref);
    GradCheckOptions no_input_grad;
    no_input_grad.input_grad = false;
    check_layer(*layer, in, ref, no_input_grad);
  }
  EXPECT_THROW(conv2d(1, 8, 3, 2, 1, Bias::kYes, ConvAlgorithm::kDirect), UserError);
  EXPECT_THROW(conv2d(1, 8, 5, 1, 2, Bias::kYes, ConvAlgorithm::kDirect), UserError);
}

// The three algorithms on the same parameters and data: outputs and every gradient agree to
// float rounding (Winograd's transforms add and halve, and each sums in its own order, so not bit
// for bit).
TEST(Conv2D, WinogradAndDirectAgreeWithIm2col) {
  const int64_t batch = 6, cin = 8, cout = 16, hw = 7;
  std::unique_ptr<Layer> layers[3] = {
      conv2d(cin, cout, 3, 1, 1, Bias::kYes, ConvAlgorithm::kIm2col),
      conv2d(cin, cout, 3, 1, 1, Bias::kYes, ConvAlgorithm::kWinograd),
      conv2d(cin, cout, 3, 1, 1, Bias::kYes, ConvAlgorithm::kDirect)};
  const auto params = random_floats(static_cast<size_t>(layers[0]->num_params()), 4);
  const Shape in{batch, cin, hw, hw};
  const Tensor x(in, random_floats(static_cast<size_t>(numel(in)), 5));
  const Shape out = layers[0]->output_shape(in);
  const Tensor dy(out, random_floats(static_cast<size_t>(numel(out)), 6));
  Vec y[3], dx[3], grads[3];
  for (int a = 0; a < 3; ++a) {
    auto p = params;
    std::vector<float> g(params.size(), 0.0f);
    layers[a]->bind(p, g);
    Tensor ya(out), dxa(in);
    layers[a]->forward(x, ya, {});
    layers[a]->backward(x, ya, dy, &dxa);
    y[a] = to_double(ya.span());
    dx[a] = to_double(dxa.span());
    grads[a] = to_double(g);
  }
  for (int a : {1, 2}) {
    SCOPED_TRACE(a == 1 ? "Winograd" : "direct");
    EXPECT_LT(normalised_error(y[a], y[0]), 1e-6) << "forward";
    EXPECT_LT(normalised_error(dx[a], dx[0]), 1e-6) << "input gradient";
    EXPECT_LT(normalised_error(grads[a], grads[0]), 1e-6) << "parameter gradients";
    EXPECT_NE(y[a], y[0]) << "two algorithms ran the same code";
  }
  EXPECT_THROW(conv2d(8, 8, 3, 2, 1, Bias::kYes, ConvAlgorithm::kWinograd), UserError);
  EXPECT_THROW(conv2d(8, 8, 5, 1, 2, Bias::kYes, ConvAlgorithm::kWinograd), UserError);
}

TEST(Conv2D, CostAndShapeErrors) {
  auto layer = conv2d(3, 8, 3, 2, 1);
  const Shape in{4, 3, 9, 9};  // -> 5x5
  const double macs = 4.0 * 8 * 27 * 25;
  EXPECT_EQ(layer->forward_cost(in).flops, 2 * macs + 4.0 * 8 * 25);
  EXPECT_EQ(layer->forward_cost(in).kind, OpKind::kConv);
  EXPECT_EQ(layer->backward_cost(in, true).flops, 4 * macs + 4.0 * 8 * 25);
  EXPECT_EQ(layer->backward_cost(in, false).flops, 2 * macs + 4.0 * 8 * 25);
  EXPECT_THROW(layer->output_shape({4, 2, 9, 9}), UserError);
  EXPECT_THROW(conv2d(3, 8, 0), UserError);
}

}  // namespace
}  // namespace syncopate
