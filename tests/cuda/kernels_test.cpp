// Each CUDA kernel against the double-precision CPU reference loops, by normalised error:
// < 1e-5 for GEMM-free ops, < 1e-4 for GEMM-based ones (fp32 cuBLAS, no TF32).
#include "backends/cuda/kernels.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/comm/collective_schedule.hpp"
#include "core/comm/compression.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

namespace ref = reference;
using ref::random_floats;
using ref::rel_error;

using CudaKernels = CudaTest;

TEST_F(CudaKernels, GemmAllTransposesMatchReference) {
  struct Size {
    int64_t m, n, k;
  };
  for (const Size s : {Size{64, 48, 33}, Size{256, 128, 784}, Size{1, 10, 300}}) {
    for (const Trans ta : {Trans::kNo, Trans::kYes}) {
      for (const Trans tb : {Trans::kNo, Trans::kYes}) {
        const auto a = random_floats(s.m * s.k, 1), b = random_floats(s.k * s.n, 2);
        const auto c0 = random_floats(s.m * s.n, 3);
        ref::Vec want(c0.size());
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) {
            double sum = 0;
            for (int64_t l = 0; l < s.k; ++l) {
              const double av = ta == Trans::kYes ? a[l * s.m + i] : a[i * s.k + l];
              const double bv = tb == Trans::kYes ? b[j * s.k + l] : b[l * s.n + j];
              sum += av * bv;
            }
            want[i * s.n + j] = 1.5 * sum + 0.5 * c0[i * s.n + j];
          }
        auto da = upload(a), db = upload(b), dc = upload(c0);
        gemm(cublas(), ta, tb, s.m, s.n, s.k, 1.5f, da.data(), db.data(), 0.5f, dc.data());
        EXPECT_LT(rel_error(download(dc), want), 1e-4)
            << s.m << "x" << s.n << "x" << s.k << " ta " << int(ta) << " tb " << int(tb);
      }
    }
  }
}

TEST_F(CudaKernels, DenseForwardBackwardMatchReference) {
  const int64_t batch = 33, in = 70, out = 20;
  const auto x = random_floats(batch * in, 4), w = random_floats(out * in, 5);
  const auto b = random_floats(out, 6), dy = random_floats(batch * out, 7);
  const auto dw0 = random_floats(w.size(), 8), db0 = random_floats(b.size(), 9);
  auto dx_ = upload(x), dw_ = upload(w), db_ = upload(b), ddy = upload(dy);
  auto dy_out = upload(std::vector<float>(batch * out));
  auto gw = upload(dw0), gb = upload(db0), gx = upload(std::vector<float>(x.size()));
  auto ones = upload(std::vector<float>(batch, 1.0f));
  dense_forward(cublas(), dx_.data(), dw_.data(), db_.data(), dy_out.data(), batch, in, out,
                stream());
  dense_backward(cublas(), dx_.data(), dw_.data(), ddy.data(), gw.data(), gb.data(), gx.data(),
                 ones.data(), batch, in, out);
  EXPECT_LT(rel_error(download(dy_out), ref::dense_forward(x, w, b, batch, in, out)), 1e-4);
  ref::Grads want = ref::dense_backward(x, w, dy, batch, in, out);
  for (size_t i = 0; i < want.dw.size(); ++i) want.dw[i] += dw0[i];  // gradients accumulate
  for (size_t i = 0; i < want.db.size(); ++i) want.db[i] += db0[i];
  EXPECT_LT(rel_error(download(gw), want.dw), 1e-4);
  EXPECT_LT(rel_error(download(gb), want.db), 1e-4);
  EXPECT_LT(rel_error(download(gx), want.dx), 1e-4);
}

TEST_F(CudaKernels, Conv2dForwardBackwardMatchReference) {
  const ref::Conv convs[] = {{4, 3, 9, 8, 5, 3, 1, 1},
                             {2, 2, 11, 11, 3, 3, 2, 0},
                             {8, 1, 28, 28, 6, 5, 1, 2},
                             {8, 6, 14, 14, 16, 5, 1, 0}};
  for (const ref::Conv& s : convs) {
    const ConvGeometry g = s.geometry();
    const int64_t ckk = s.c * s.k * s.k, cols = s.n * g.oh * g.ow;
    const auto x = random_floats(s.n * s.c * s.h * s.w, 10), w = random_floats(s.oc * ckk, 11);
    const auto b = random_floats(s.oc, 12), dy = random_floats(s.oc * cols, 13);
    auto dxin = upload(x), dw_ = upload(w), db_ = upload(b), ddy = upload(dy);
    auto y = upload(std::vector<float>(dy.size())), gx = upload(std::vector<float>(x.size()));
    auto gw = upload(std::vector<float>(w.size())), gb = upload(std::vector<float>(b.size()));
    auto col = upload(std::vector<float>(ckk * cols)),
         scratch = upload(std::vector<float>(s.oc * cols));
    auto ones = upload(std::vector<float>(cols, 1.0f));
    conv2d_forward(cublas(), dxin.data(), dw_.data(), db_.data(), y.data(), col.data(),
                   scratch.data(), g, s.oc, stream());
    conv2d_backward(cublas(), dxin.data(), dw_.data(), ddy.data(), gw.data(), gb.data(), gx.data(),
                    col.data(), scratch.data(), ones.data(), g, s.oc, stream());
    const ref::Grads want = ref::conv_backward(x, w, dy, s);
    EXPECT_LT(rel_error(download(y), ref::conv_forward(x, w, b, s)), 1e-4) << "k " << s.k;
    EXPECT_LT(rel_error(download(gw), want.dw), 1e-4) << "k " << s.k;
    EXPECT_LT(rel_error(download(gb), want.db), 1e-4) << "k " << s.k;
    EXPECT_LT(rel_error(download(gx), want.dx), 1e-4) << "k " << s.k;
  }
}

TEST_F(CudaKernels, PoolingMatchesReference) {
  const ref::Pool pools[] = {{4, 6, 28, 28, 2, 2}, {2, 3, 9, 7, 3, 2}, {3, 2, 6, 6, 3, 1}};
  for (const ref::Pool& s : pools) {
    const PoolGeometry g = s.geometry();
    const auto x = random_floats(s.n * s.c * s.h * s.w, 14);
    const auto dy = random_floats(s.n * s.c * g.oh * g.ow, 15);
    auto dxin = upload(x), ddy = upload(dy);
    auto y = upload(std::vector<float>(dy.size())), dx = upload(std::vector<float>(x.size()));
    DeviceBuffer<int32_t> argmax(dy.size());
    ref::Vec want_y, want_dx;

    maxpool_forward(dxin.data(), y.data(), argmax.data(), g, stream());
    maxpool_backward(ddy.data(), argmax.data(), dx.data(), g, stream());
    ref::maxpool(x, dy, s, want_y, want_dx);
    EXPECT_LT(rel_error(download(y), want_y), 1e-5) << "max k " << s.k;
    EXPECT_LT(rel_error(download(dx), want_dx), 1e-5) << "max k " << s.k;

    avgpool_forward(dxin.data(), y.data(), g, stream());
    avgpool_backward(ddy.data(), dx.data(), g, stream());
    ref::avgpool(x, dy, s, want_y, want_dx);
    EXPECT_LT(rel_error(download(y), want_y), 1e-5) << "avg k " << s.k;
    EXPECT_LT(rel_error(download(dx), want_dx), 1e-5) << "avg k " << s.k;
  }
  // Global average pooling: an average pool whose window is the whole plane.
  const ref::Pool s{3, 4, 7, 7, 7, 1};
  const auto x = random_floats(s.n * s.c * 49, 16), dy = random_floats(s.n * s.c, 17);
  auto dxin = upload(x), ddy = upload(dy);
  auto y = upload(std::vector<float>(dy.size())), dx = upload(std::vector<float>(x.size()));
  global_avgpool_forward(dxin.data(), y.data(), s.n * s.c, 49, stream());
  global_avgpool_backward(ddy.data(), dx.data(), s.n * s.c, 49, stream());
  ref::Vec want_y, want_dx;
  ref::avgpool(x, dy, s, want_y, want_dx);
  EXPECT_LT(rel_error(download(y), want_y), 1e-5);
  EXPECT_LT(rel_error(download(dx), want_dx), 1e-5);
}

TEST_F(CudaKernels, ElementwiseOps) {
  const int64_t n = 100003;  // not a multiple of the block size
  const auto x = random_floats(n, 18), dy = random_floats(n, 19);
  auto dxin = upload(x), ddy = upload(dy), y = upload(std::vector<float>(n));
  auto dx = upload(std::vector<float>(n));
  relu_forward(dxin.data(), y.data(), n, stream());
  relu_backward(dxin.data(), ddy.data(), dx.data(), n, stream());
  ref::Vec want_y(n), want_dx(n);
  for (int64_t i = 0; i < n; ++i) {
    want_y[i] = x[i] > 0 ? x[i] : 0.0;
    want_dx[i] = x[i] > 0 ? dy[i] : 0.0;
  }
  EXPECT_LT(rel_error(download(y), want_y), 1e-7);
  EXPECT_LT(rel_error(download(dx), want_dx), 1e-7);

  // y = x; y += 0.5 dy; y *= -2  =>  -2 x - dy
  copy_device_to_device(dxin.data(), y.data(), n, stream());
  axpy(0.5f, ddy.data(), y.data(), n, stream());
  scale(-2.0f, y.data(), n, stream());
  for (int64_t i = 0; i < n; ++i) want_y[i] = -2.0 * x[i] - dy[i];
  EXPECT_LT(rel_error(download(y), want_y), 1e-6);

  fill(y.data(), 0.25f, n, stream());
  bias_add(y.data(), ddy.data(), 1, n, 1, stream());  // one "row" of n channels
  for (int64_t i = 0; i < n; ++i) want_y[i] = 0.25 + dy[i];
  EXPECT_LT(rel_error(download(y), want_y), 1e-6);
}

// The 16-bit collectives' kernels round with core's converters: the host's bits for every
// pattern of either format and values between them (ties, subnormals, overflow). Conversions
// keep NaN payloads as the host's do; after arithmetic (a division, a sum) a NaN is only NaN,
// since the GPU returns its canonical NaN.
TEST_F(CudaKernels, WireFormatKernelsGiveTheHostsBits) {
  std::vector<float> x;
  for (uint32_t h = 0; h < 65536; ++h) {
    x.push_back(half_to_float(static_cast<uint16_t>(h)));
    x.push_back(bf16_to_float(static_cast<uint16_t>(h)));
  }
  for (const float f : random_floats(50000, 40)) {
    x.push_back(f);
    x.push_back(f * 70000.0f);  // past fp16's largest finite
    x.push_back(f * 1e-6f);     // fp16's subnormals
  }
  for (const uint32_t bits : {0x3f801000u, 0x3f803000u, 0x477fefffu, 0x477ff000u, 0x7fa00001u,
                              0xff812345u, 0x33000000u, 0x33000001u})
    x.push_back(std::bit_cast<float>(bits));  // ties, fp16's overflow edge, NaNs, 2^-25
  const auto n = static_cast<int64_t>(x.size());
  const auto bytes_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  // Bit for bit, except that any NaN equals any NaN; the first difference, or -1.
  const auto first_difference = [](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return int64_t{0};
    for (size_t i = 0; i < a.size(); ++i)
      if (!(std::isnan(a[i]) && std::isnan(b[i])) &&
          std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]))
        return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  for (const WireFormat wire : {WireFormat::kFp16, WireFormat::kBf16}) {
    SCOPED_TRACE(std::string(to_string(wire)));
    const bool bf16 = wire == WireFormat::kBf16;
    // prepare(): divided (kAvg over 3) and rounded, or rounded only.
    std::vector<float> rounded = x, averaged = x;
    prepare(ReduceOp::kSum, 2, rounded, wire);
    prepare(ReduceOp::kAvg, 3, averaged, wire);
    auto d_rounded = upload(x), d_averaged = upload(x);
    wire_prepare(d_rounded.data(), 1.0f, n, bf16, stream());
    wire_prepare(d_averaged.data(), 3.0f, n, bf16, stream());
    EXPECT_TRUE(bytes_equal(download(d_rounded), rounded));
    EXPECT_EQ(first_difference(download(d_averaged), averaged), -1);
    // Encoded for a send.
    std::vector<uint16_t> codes(x.size());
    encode_wire(rounded, wire, codes);
    DeviceBuffer<uint16_t> d_codes(x.size());
    wire_encode(d_rounded.data(), d_codes.data(), n, bf16, stream());
    EXPECT_EQ(download(d_codes), codes);
    // A received segment applied: decoded, reduced in the format, or the max.
    std::vector<float> partner(averaged.rbegin(), averaged.rend());
    for (const auto& [action, op, device_action] :
         {std::tuple{RecvAction::kCopy, ReduceOp::kSum, WireAction::kCopy},
          std::tuple{RecvAction::kReduce, ReduceOp::kSum, WireAction::kAdd},
          std::tuple{RecvAction::kReduce, ReduceOp::kMax, WireAction::kMax}}) {
      std::vector<float> want = partner;
      std::vector<float> received(x.size());
      decode_wire(codes, wire, received);
      apply_action(action, op, want, received, wire);
      auto dst = upload(partner);
      wire_apply(dst.data(), d_codes.data(), n, device_action, bf16, stream());
      EXPECT_EQ(first_difference(download(dst), want), -1) << static_cast<int>(device_action);
    }
  }
}

TEST_F(CudaKernels, SwapAxes) {
  const int64_t a = 7, b = 13, inner = 31;
  const auto in = random_floats(a * b * inner, 20);
  auto din = upload(in), out = upload(std::vector<float>(in.size()));
  swap_axes01(din.data(), out.data(), a, b, inner, stream());
  const auto got = download(out);
  for (int64_t ia = 0; ia < a; ++ia)
    for (int64_t ib = 0; ib < b; ++ib)
      for (int64_t p = 0; p < inner; ++p)
        ASSERT_EQ(got[(ib * a + ia) * inner + p], in[(ia * b + ib) * inner + p]);
}

TEST_F(CudaKernels, DropoutMatchesItsMaskAndHostMath) {
  const int64_t n = 65537;
  const float rate = 0.25f;
  const math::PhiloxStream key = math::dropout_stream(1, 0, 2, 3, 4);
  const uint32_t threshold = math::dropout_threshold(rate);
  const auto x = random_floats(n, 21), dy = random_floats(n, 22);
  auto dxin = upload(x), ddy = upload(dy), y = upload(std::vector<float>(n));
  auto mask = upload(std::vector<float>(n)), dx = upload(std::vector<float>(n));
  dropout_forward(dxin.data(), y.data(), mask.data(), key, rate, n, stream());
  multiply(ddy.data(), mask.data(), dx.data(), n, stream());
  const auto got_mask = download(mask), got_y = download(y), got_dx = download(dx);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    // The same integer draw as on the host (and so as the CPU Dropout layer).
    ASSERT_EQ(got_mask[i], math::dropout_mask_at(key, threshold, 1.0f / (1.0f - rate), i)) << i;
    ASSERT_EQ(got_y[i], x[i] * got_mask[i]);
    ASSERT_EQ(got_dx[i], dy[i] * got_mask[i]);
    kept += got_mask[i] > 0;
  }
  EXPECT_NEAR(double(kept) / n, 1.0 - rate, 0.01);
}

TEST_F(CudaKernels, LossesMatchReference) {
  const int64_t batch = 37, classes = 10;
  const auto logits = random_floats(batch * classes, 23, -4.0f, 4.0f);
  std::vector<float> labels(batch);
  for (int64_t b = 0; b < batch; ++b) labels[b] = float((b * 7) % classes);
  auto dl = upload(logits), dlab = upload(labels), grad = upload(std::vector<float>(logits.size()));
  auto loss = upload(std::vector<float>(batch)), correct = upload(std::vector<float>(batch));
  softmax_xent(dl.data(), dlab.data(), grad.data(), loss.data(), correct.data(), batch, classes,
               stream());
  const ref::Xent want = ref::softmax_xent(logits, labels, batch, classes);
  double mean = 0, hits = 0;
  for (const float l : download(loss)) mean += l / double(batch);
  for (const float c : download(correct)) hits += c;
  EXPECT_NEAR(mean, want.loss, 1e-5 * want.loss);
  EXPECT_EQ(hits, double(want.correct));
  EXPECT_LT(rel_error(download(grad), want.dlogits), 1e-5);

  const auto y = random_floats(200, 24), t = random_floats(200, 25);
  auto dy_ = upload(y), dt = upload(t), dgrad = upload(std::vector<float>(200));
  auto terms = upload(std::vector<float>(200));
  mse(dy_.data(), dt.data(), dgrad.data(), terms.data(), 200, stream());
  ref::Vec want_terms(200), want_grad(200);
  for (int i = 0; i < 200; ++i) {
    want_terms[i] = (double{y[i]} - t[i]) * (double{y[i]} - t[i]);
    want_grad[i] = 2.0 * (double{y[i]} - t[i]) / 200.0;
  }
  EXPECT_LT(rel_error(download(terms), want_terms), 1e-5);
  EXPECT_LT(rel_error(download(dgrad), want_grad), 1e-5);
}

}  // namespace
}  // namespace syncopate::cuda
