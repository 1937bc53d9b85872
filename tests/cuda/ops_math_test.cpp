// The per-element math of the CUDA kernels (ops_math.hpp), run on the host exactly as the
// kernels call it (one call per output index) and compared with the reference loops.
//
// These tests need no GPU and run everywhere: they are the only check of the kernels' index
// arithmetic on a machine without a device. (The device tests in kernels_test.cpp skip there.)
#include "backends/cuda/ops_math.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "core/comm/collective_schedule.hpp"
#include "core/nn/layer.hpp"
#include "core/base/rng.hpp"
#include "core/tensor/tensor.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

namespace ref = reference;
using ref::random_floats;
using ref::rel_error;

// BLAS semantics, column-major: c (m,n) = alpha op(a) op(b) + beta c.
void column_major_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                       float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (int64_t l = 0; l < k; ++l) {
        const double av = ta ? a[l + i * lda] : a[i + l * lda];
        const double bv = tb ? b[j + l * ldb] : b[l + j * ldb];
        sum += av * bv;
      }
      c[i + j * ldc] = static_cast<float>(alpha * sum + beta * c[i + j * ldc]);
    }
  }
}

// What kernels.cu's gemm() asks cuBLAS to do, done on the host.
void gemm_host(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c) {
  const math::ColumnMajorGemm g = math::row_major_gemm(ta, tb, m, n, k);
  column_major_gemm(g.trans_first, g.trans_second, g.m, g.n, g.k, alpha, b, g.ld_first, a,
                    g.ld_second, beta, c, g.ldc);
}

TEST(CudaHostMath, RowMajorGemmMappingMatchesDefinition) {
  const int64_t m = 5, n = 3, k = 4;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const auto a = random_floats(m * k, 1), b = random_floats(k * n, 2);
      auto c = random_floats(m * n, 3);
      ref::Vec want(c.size());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < k; ++l) {
            sum += double{ta ? a[l * m + i] : a[i * k + l]} * (tb ? b[j * k + l] : b[l * n + j]);
          }
          want[i * n + j] = 2.0 * sum + 0.5 * c[i * n + j];
        }
      }
      gemm_host(ta, tb, m, n, k, 2.0f, a.data(), b.data(), 0.5f, c.data());
      EXPECT_LT(rel_error(c, want), 1e-6) << "ta " << ta << " tb " << tb;
    }
  }
}

std::vector<float> im2col_host(std::span<const float> x, const math::ConvGeometry& g) {
  std::vector<float> col(static_cast<size_t>(g.c * g.k * g.k * g.n * g.oh * g.ow));
  for (size_t i = 0; i < col.size(); ++i) col[i] = math::im2col_at(x.data(), g, int64_t(i));
  return col;
}

std::vector<float> col2im_host(std::span<const float> dcol, const math::ConvGeometry& g) {
  std::vector<float> dx(static_cast<size_t>(g.n * g.c * g.h * g.w));
  for (size_t i = 0; i < dx.size(); ++i) dx[i] = math::col2im_at(dcol.data(), g, int64_t(i));
  return dx;
}

std::vector<float> swap_host(std::span<const float> in, int64_t a, int64_t b, int64_t inner) {
  std::vector<float> out(in.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = math::swap_axes01_at(in.data(), a, b, inner, int64_t(i));
  }
  return out;
}

const ref::Conv kConvs[] = {
    {2, 3, 7, 6, 4, 3, 1, 1}, {2, 2, 8, 9, 3, 3, 2, 0}, {1, 1, 28, 28, 6, 5, 1, 2},
    {3, 2, 6, 6, 2, 1, 1, 0}, {2, 3, 9, 7, 2, 4, 3, 2},
};

TEST(CudaHostMath, Col2imIsTheAdjointOfIm2col) {
  for (const ref::Conv& s : kConvs) {
    const math::ConvGeometry g = s.geometry();
    const auto x = random_floats(size_t(s.n * s.c * s.h * s.w), 4);
    const auto col = im2col_host(x, g);
    const auto dcol = random_floats(col.size(), 5);
    const auto dx = col2im_host(dcol, g);
    double lhs = 0, rhs = 0;  // <im2col(x), dcol> == <x, col2im(dcol)>
    for (size_t i = 0; i < col.size(); ++i) lhs += double{col[i]} * dcol[i];
    for (size_t i = 0; i < x.size(); ++i) rhs += double{x[i]} * dx[i];
    EXPECT_NEAR(lhs, rhs, 1e-5 * (std::abs(lhs) + 1)) << "k " << s.k << " stride " << s.stride;
  }
}

TEST(CudaHostMath, ConvolutionRecipeMatchesDirectConvolution) {
  for (const ref::Conv& s : kConvs) {
    const math::ConvGeometry g = s.geometry();
    const int64_t ckk = s.c * s.k * s.k, plane = g.oh * g.ow, cols = s.n * plane;
    const auto x = random_floats(size_t(s.n * s.c * s.h * s.w), 6);
    const auto w = random_floats(size_t(s.oc * ckk), 7);
    const auto b = random_floats(size_t(s.oc), 8);
    // Forward, as kernels.cu conv2d_forward: im2col, GEMM, (oc,n,p) -> (n,oc,p), bias.
    auto col = im2col_host(x, g);
    std::vector<float> scratch(size_t(s.oc * cols));
    gemm_host(false, false, s.oc, cols, ckk, 1.0f, w.data(), col.data(), 0.0f, scratch.data());
    auto y = swap_host(scratch, s.oc, s.n, plane);
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = math::bias_add_at(y.data(), b.data(), s.oc, plane, int64_t(i));
    EXPECT_LT(rel_error(y, ref::conv_forward(x, w, b, s)), 1e-5);

    // Backward, as conv2d_backward.
    const auto dy = random_floats(y.size(), 9);
    std::vector<float> dw(w.size()), db(b.size()), ones(size_t(cols), 1.0f);
    scratch = swap_host(dy, s.n, s.oc, plane);
    gemm_host(false, true, s.oc, ckk, cols, 1.0f, scratch.data(), col.data(), 1.0f, dw.data());
    gemm_host(false, false, s.oc, 1, cols, 1.0f, scratch.data(), ones.data(), 1.0f, db.data());
    gemm_host(true, false, ckk, cols, s.oc, 1.0f, w.data(), scratch.data(), 0.0f, col.data());
    const auto dx = col2im_host(col, g);
    const ref::Grads want = ref::conv_backward(x, w, dy, s);
    EXPECT_LT(rel_error(dw, want.dw), 1e-5);
    EXPECT_LT(rel_error(db, want.db), 1e-5);
    EXPECT_LT(rel_error(dx, want.dx), 1e-5);
  }
}

TEST(CudaHostMath, DenseRecipeMatchesReference) {
  const int64_t batch = 7, in = 5, out = 4;
  const auto x = random_floats(batch * in, 10), w = random_floats(out * in, 11);
  const auto b = random_floats(out, 12), dy = random_floats(batch * out, 13);
  std::vector<float> y(batch * out), dw(w.size()), db(b.size()), dx(x.size());
  std::vector<float> ones(batch, 1.0f);
  // As kernels.cu dense_forward / dense_backward.
  gemm_host(false, true, batch, out, in, 1.0f, x.data(), w.data(), 0.0f, y.data());
  for (size_t i = 0; i < y.size(); ++i) y[i] = math::bias_add_at(y.data(), b.data(), out, 1, i);
  gemm_host(true, false, out, in, batch, 1.0f, dy.data(), x.data(), 1.0f, dw.data());
  gemm_host(false, false, 1, out, batch, 1.0f, ones.data(), dy.data(), 1.0f, db.data());
  gemm_host(false, false, batch, in, out, 1.0f, dy.data(), w.data(), 0.0f, dx.data());
  EXPECT_LT(rel_error(y, ref::dense_forward(x, w, b, batch, in, out)), 1e-6);
  const ref::Grads want = ref::dense_backward(x, w, dy, batch, in, out);
  EXPECT_LT(rel_error(dw, want.dw), 1e-6);
  EXPECT_LT(rel_error(db, want.db), 1e-6);
  EXPECT_LT(rel_error(dx, want.dx), 1e-6);
}

const ref::Pool kPools[] = {{2, 3, 8, 8, 2, 2},
                            {1, 2, 7, 9, 3, 2},
                            {2, 1, 6, 5, 3, 1},
                            {1, 2, 28, 28, 2, 2},
                            {1, 1, 9, 9, 2, 3}};

TEST(CudaHostMath, MaxPoolMatchesReference) {
  for (const ref::Pool& s : kPools) {
    const math::PoolGeometry g = s.geometry();
    const auto x = random_floats(size_t(s.n * s.c * s.h * s.w), 14);
    const auto dy = random_floats(size_t(s.n * s.c * g.oh * g.ow), 15);
    std::vector<float> y(dy.size()), dx(x.size());
    std::vector<int32_t> argmax(dy.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = math::maxpool_at(x.data(), g, i, argmax.data());
    for (size_t i = 0; i < dx.size(); ++i) {
      dx[i] = math::maxpool_backward_at(dy.data(), argmax.data(), g, int64_t(i));
    }
    ref::Vec want_y, want_dx;
    ref::maxpool(x, dy, s, want_y, want_dx);
    EXPECT_LT(rel_error(y, want_y), 1e-7) << "k " << s.k << " stride " << s.stride;
    EXPECT_LT(rel_error(dx, want_dx), 1e-6) << "k " << s.k << " stride " << s.stride;
  }
}

TEST(CudaHostMath, AvgPoolMatchesReference) {
  for (const ref::Pool& s : kPools) {
    const math::PoolGeometry g = s.geometry();
    const auto x = random_floats(size_t(s.n * s.c * s.h * s.w), 16);
    const auto dy = random_floats(size_t(s.n * s.c * g.oh * g.ow), 17);
    std::vector<float> y(dy.size()), dx(x.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = math::avgpool_at(x.data(), g, int64_t(i));
    for (size_t i = 0; i < dx.size(); ++i) dx[i] = math::avgpool_backward_at(dy.data(), g, i);
    ref::Vec want_y, want_dx;
    ref::avgpool(x, dy, s, want_y, want_dx);
    EXPECT_LT(rel_error(y, want_y), 1e-6) << "k " << s.k << " stride " << s.stride;
    EXPECT_LT(rel_error(dx, want_dx), 1e-6) << "k " << s.k << " stride " << s.stride;
  }
}

TEST(CudaHostMath, GlobalAvgPoolIsAnAvgPoolOverTheWholePlane) {
  const ref::Pool s{2, 3, 5, 5, 5, 1};
  const auto x = random_floats(size_t(s.n * s.c * s.h * s.w), 18);
  const auto dy = random_floats(size_t(s.n * s.c), 19);
  std::vector<float> y(dy.size()), dx(x.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = math::global_avgpool_at(x.data(), 25, i);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] = math::global_avgpool_backward_at(dy.data(), 25, i);
  ref::Vec want_y, want_dx;
  ref::avgpool(x, dy, s, want_y, want_dx);
  EXPECT_LT(rel_error(y, want_y), 1e-6);
  EXPECT_LT(rel_error(dx, want_dx), 1e-6);
}

TEST(CudaHostMath, ReluAndItsGradient) {
  const std::vector<float> x = {-2.0f, -0.0f, 0.0f, 1e-8f, 3.0f};
  const std::vector<float> dy = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  const std::vector<float> y = {0, 0, 0, 1e-8f, 3.0f}, dx = {0, 0, 0, 4.0f, 5.0f};
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(math::relu_at(x.data(), i), y[i]);
    EXPECT_EQ(math::relu_backward_at(x.data(), dy.data(), i), dx[i]);
  }
}

TEST(CudaHostMath, SwapAxesMovesEveryElement) {
  const int64_t a = 3, b = 4, inner = 5;
  const auto in = random_floats(a * b * inner, 20);
  const auto out = swap_host(in, a, b, inner);
  for (int64_t ia = 0; ia < a; ++ia)
    for (int64_t ib = 0; ib < b; ++ib)
      for (int64_t p = 0; p < inner; ++p)
        ASSERT_EQ(out[(ib * a + ia) * inner + p], in[(ia * b + ib) * inner + p]);
}

TEST(CudaHostMath, SoftmaxCrossEntropyMatchesReference) {
  const int64_t batch = 6, classes = 10;
  const auto logits = random_floats(batch * classes, 21, -5.0f, 5.0f);
  const std::vector<float> labels = {0, 9, 3, 3, 7, 1};
  std::vector<float> dlogits(logits.size()), loss(batch), correct(batch);
  for (int64_t r = 0; r < batch; ++r) {
    math::softmax_xent_row(logits.data(), labels.data(), classes, 1.0f / batch, r, dlogits.data(),
                           loss.data(), correct.data());
  }
  const ref::Xent want = ref::softmax_xent(logits, labels, batch, classes);
  double mean = 0, hits = 0;
  for (int64_t r = 0; r < batch; ++r) mean += loss[r] / double(batch), hits += correct[r];
  EXPECT_NEAR(mean, want.loss, 1e-5 * want.loss);
  EXPECT_EQ(hits, double(want.correct));
  EXPECT_LT(rel_error(dlogits, want.dlogits), 1e-5);
}

TEST(CudaHostMath, MseIsTheMeanSquaredError) {
  const std::vector<float> y = {1, 2, 3, 4}, t = {0, 2, 5, 4.5f};
  std::vector<float> dy(4), loss(4);
  for (int64_t i = 0; i < 4; ++i)
    math::mse_at(y.data(), t.data(), 0.25f, i, dy.data(), loss.data());
  // By hand: squared errors 1, 0, 4, 0.25; gradient 2 (y - t) / 4.
  EXPECT_EQ(loss, (std::vector<float>{1, 0, 4, 0.25f}));
  EXPECT_EQ(dy, (std::vector<float>{0.5f, 0, -1.0f, -0.25f}));
}

TEST(CudaHostMath, PhiloxDrawsAreCoreRngDraws) {
  const RngKey key{.seed = 0x123456789abcdefull,
                   .worker = 3,
                   .epoch = 5,
                   .purpose = RngPurpose::kDropout,
                   .extra = 7 * 4096 + 2};
  Rng rng(key);
  const math::PhiloxStream stream = math::dropout_stream(key.seed, 3, 5, 7, 2);
  for (int64_t i = 0; i < 103; ++i) ASSERT_EQ(math::philox_draw(stream, i), rng.next_u32()) << i;
}

TEST(CudaHostMath, DropoutMaskIsTheCpuLayersMask) {
  for (const float rate : {0.1f, 0.5f, 0.75f}) {
    const int64_t n = 4099;
    auto layer = dropout(rate);
    const Tensor x(Shape{1, n}, std::vector<float>(size_t(n), 1.0f));
    Tensor y(Shape{1, n});
    const StepContext ctx{
        .mode = Mode::kTrain, .seed = 42, .worker = 1, .epoch = 2, .step = 9, .layer = 4};
    layer->forward(x, y, ctx);  // y = mask
    const math::PhiloxStream stream = math::dropout_stream(42, 1, 2, 9, 4);
    const uint32_t threshold = math::dropout_threshold(rate);
    const float scale = 1.0f / (1.0f - rate);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(math::dropout_mask_at(stream, threshold, scale, i), y[i]) << "rate " << rate;
      kept += y[i] > 0;
    }
    EXPECT_NEAR(double(kept) / n, 1.0 - rate, 0.03);  // binomial sd < 0.008
  }
}

TEST(CudaHostMath, CollectiveReductionsMatchCoreApplyActionBitForBit) {
  // The device kernels of the NCCL schedules must round and order exactly like the host's
  // apply_action: every pair of special and ordinary values, in both argument orders.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values{0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, nan, 1e-45f, 3.4e38f, 0.1f, 0.2f};
  for (float& v : reference::random_floats(40, 77)) values.push_back(v);
  std::vector<float> dst, src;
  for (const float a : values)
    for (const float b : values) {
      dst.push_back(a);
      src.push_back(b);
    }
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    std::vector<float> want = dst;
    apply_action(RecvAction::kReduce, op, want, src);
    for (size_t i = 0; i < dst.size(); ++i) {
      const float got = op == ReduceOp::kMax ? math::collective_max_at(dst.data(), src.data(), i)
                                             : math::collective_add_at(dst.data(), src.data(), i);
      ASSERT_EQ(std::memcmp(&got, &want[i], sizeof(float)), 0)
          << to_string(op) << "(" << dst[i] << ", " << src[i] << ") = " << got << ", core "
          << want[i];
    }
  }
}

}  // namespace
}  // namespace syncopate::cuda
