// SGD (momentum, Nesterov, weight decay) and Adam/AdamW steps against the documented
// torch.optim algorithms (reference.hpp), on the host math and on the device.
#include <gtest/gtest.h>

#include <vector>

#include "backends/cuda/cuda_model.hpp"
#include "backends/cuda/kernels.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

namespace ref = reference;
using ref::random_floats;
using ref::rel_error;

constexpr int kSteps = 4;
constexpr int64_t kN = 1000;

const SgdOptions kSgd[] = {
    {.lr = 0.1f},
    {.lr = 0.1f, .momentum = 0.9f},
    {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-2f},
    {.lr = 0.05f, .momentum = 0.8f, .weight_decay = 1e-3f, .nesterov = true},
};

const AdamOptions kAdam[] = {
    {.lr = 1e-2f},
    {.lr = 1e-2f, .weight_decay = 0.1f},
    {.lr = 1e-2f,
     .beta1 = 0.8f,
     .beta2 = 0.99f,
     .weight_decay = 0.1f,
     .variant = AdamVariant::kAdamW},
};

ref::Sgd sgd_reference(const SgdOptions& o) {
  return {o.lr, o.momentum, o.weight_decay, o.nesterov};
}

ref::Adam adam_reference(const AdamOptions& o) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.variant == AdamVariant::kAdamW};
}

TEST(CudaHostMath, SgdMatchesTorchAlgorithm) {
  for (const SgdOptions& o : kSgd) {
    auto p = random_floats(kN, 1);
    std::vector<float> buf(kN, 0.0f);
    ref::Vec want = ref::to_double(p);
    ref::Sgd reference = sgd_reference(o);
    for (int step = 0; step < kSteps; ++step) {
      const auto g = random_floats(kN, 10 + step);
      for (int64_t i = 0; i < kN; ++i) {
        math::sgd_at(p.data(), g.data(), buf.data(), o.lr, o.momentum, o.weight_decay, o.nesterov,
                     i);
      }
      reference.step(want, g);
    }
    EXPECT_LT(rel_error(p, want), 1e-6) << "momentum " << o.momentum << " nesterov " << o.nesterov;
  }
}

TEST(CudaHostMath, AdamMatchesTextbookAlgorithm) {
  for (const AdamOptions& o : kAdam) {
    auto p = random_floats(kN, 2);
    std::vector<float> m(kN, 0.0f), v(kN, 0.0f);
    ref::Vec want = ref::to_double(p);
    ref::Adam reference = adam_reference(o);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = random_floats(kN, 20 + step);
      const double bc1 = 1 - std::pow(double{o.beta1}, step);
      const double bc2 = 1 - std::pow(double{o.beta2}, step);
      for (int64_t i = 0; i < kN; ++i) {
        math::adam_at(p.data(), g.data(), m.data(), v.data(), o.lr, o.beta1, o.beta2, o.eps,
                      o.weight_decay, o.variant == AdamVariant::kAdamW,
                      static_cast<float>(o.lr / bc1), static_cast<float>(std::sqrt(bc2)), i);
      }
      reference.step(want, g);
    }
    EXPECT_LT(rel_error(p, want), 1e-6) << "variant " << int(o.variant);
  }
}

using CudaOptimizers = CudaTest;

TEST_F(CudaOptimizers, SgdStepsMatchTorchAlgorithm) {
  for (const SgdOptions& o : kSgd) {
    const auto p0 = random_floats(kN, 3);
    auto p = upload(p0);
    CudaOptimizer optimizer(kN, o);
    ref::Vec want = ref::to_double(p0);
    ref::Sgd reference = sgd_reference(o);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = random_floats(kN, 30 + step);
      auto dg = upload(g);
      optimizer.step(p.data(), dg.data(), step, stream());
      reference.step(want, g);
      EXPECT_LT(rel_error(download(p), want), 1e-5)
          << "step " << step << " nesterov " << o.nesterov;
    }
  }
}

TEST_F(CudaOptimizers, AdamStepsMatchTextbookAlgorithm) {
  for (const AdamOptions& o : kAdam) {
    const auto p0 = random_floats(kN, 4);
    auto p = upload(p0);
    CudaOptimizer optimizer(kN, o);
    ref::Vec want = ref::to_double(p0);
    ref::Adam reference = adam_reference(o);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = random_floats(kN, 40 + step);
      auto dg = upload(g);
      optimizer.step(p.data(), dg.data(), step, stream());
      reference.step(want, g);
      EXPECT_LT(rel_error(download(p), want), 1e-5) << "step " << step;
    }
  }
}

TEST_F(CudaOptimizers, ResetStateForgetsMomentum) {
  const SgdOptions o{.lr = 0.1f, .momentum = 0.9f};
  const auto p0 = random_floats(kN, 5), g = random_floats(kN, 6);
  auto p = upload(p0), dg = upload(g);
  CudaOptimizer optimizer(kN, o);
  optimizer.step(p.data(), dg.data(), 1, stream());
  optimizer.reset_state(stream());
  optimizer.step(p.data(), dg.data(), 2, stream());
  // Two momentum-free steps of lr * g each (a kept buffer would give lr * (1 + 1.9) g).
  ref::Vec want(kN);
  for (int64_t i = 0; i < kN; ++i) want[i] = p0[i] - 2 * 0.1 * g[i];
  EXPECT_LT(rel_error(download(p), want), 1e-6);
}

}  // namespace
}  // namespace syncopate::cuda
