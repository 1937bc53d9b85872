// SGD (momentum, Nesterov, weight decay) and Adam/AdamW steps against the documented
// torch.optim algorithms (reference.hpp, double precision) and against core/optim's CPU
// optimizers, on the host math and on the device.
#include <gtest/gtest.h>

#include <vector>

#include "backends/cuda/cuda_model.hpp"
#include "backends/cuda/kernels.hpp"
#include "core/optim/optim.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

namespace ref = reference;
using ref::random_floats;
using ref::rel_error;

constexpr int kSteps = 4;
constexpr int64_t kN = 1000;

struct Case {
  OptimizerConfig config;
  float lr;
};

const Case kCases[] = {
    {{.kind = OptimizerKind::kSgd}, 0.1f},
    {{.kind = OptimizerKind::kSgd, .momentum = 0.9}, 0.1f},
    {{.kind = OptimizerKind::kSgd, .momentum = 0.9, .weight_decay = 1e-2}, 0.05f},
    {{.kind = OptimizerKind::kSgd, .momentum = 0.8, .nesterov = true, .weight_decay = 1e-3}, 0.05f},
    {{.kind = OptimizerKind::kAdam}, 1e-2f},
    {{.kind = OptimizerKind::kAdam, .weight_decay = 0.1}, 1e-2f},
    {{.kind = OptimizerKind::kAdamW, .weight_decay = 0.1, .beta1 = 0.8, .beta2 = 0.99}, 1e-2f},
};

std::string name_of(const Case& c) {
  return std::string(to_string(c.config.kind)) + " momentum " + std::to_string(c.config.momentum) +
         " nesterov " + std::to_string(c.config.nesterov) + " wd " +
         std::to_string(c.config.weight_decay);
}

// The double-precision reference of one case, stepped alongside.
struct Reference {
  explicit Reference(const Case& c)
      : sgd{c.lr, c.config.momentum, c.config.weight_decay, c.config.nesterov},
        adam{c.lr,         c.config.beta1,        c.config.beta2,
             c.config.eps, c.config.weight_decay, c.config.kind == OptimizerKind::kAdamW},
        is_sgd(c.config.kind == OptimizerKind::kSgd) {}
  void step(ref::Vec& p, std::span<const float> g) {
    if (is_sgd) {
      sgd.step(p, g);
    } else {
      adam.step(p, g);
    }
  }
  ref::Sgd sgd;
  ref::Adam adam;
  bool is_sgd;
};

TEST(CudaHostMath, OptimizerMathMatchesTorchAlgorithmAndCpuOptimizer) {
  for (const Case& c : kCases) {
    auto p = random_floats(kN, 1);
    std::vector<float> state(2 * kN, 0.0f), cpu_p = p;
    auto cpu = make_optimizer(c.config, kN);
    Reference want_ref(c);
    ref::Vec want = ref::to_double(p);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = random_floats(kN, 10 + step);
      if (c.config.kind == OptimizerKind::kSgd) {
        for (int64_t i = 0; i < kN; ++i) {
          math::sgd_at(p.data(), g.data(), state.data(), c.lr, float(c.config.momentum),
                       float(c.config.weight_decay), c.config.nesterov, i);
        }
      } else {
        const AdamOptions o{.lr = c.lr,
                            .beta1 = c.config.beta1,
                            .beta2 = c.config.beta2,
                            .eps = c.config.eps,
                            .weight_decay = c.config.weight_decay,
                            .variant = c.config.kind == OptimizerKind::kAdamW ? AdamVariant::kAdamW
                                                                              : AdamVariant::kAdam};
        const math::AdamScalars a = adam_scalars(o, step);
        for (int64_t i = 0; i < kN; ++i) {
          math::adam_at(p.data(), g.data(), state.data(), state.data() + kN, a, i);
        }
      }
      want_ref.step(want, g);
      cpu->step(cpu_p, g, c.lr, step);
    }
    EXPECT_LT(rel_error(p, want), 1e-6) << name_of(c);
    EXPECT_LT(rel_error(p, ref::to_double(cpu_p)), 1e-6) << name_of(c);
  }
}

using CudaOptimizers = CudaTest;

TEST_F(CudaOptimizers, StepsMatchTorchAlgorithmAndCpuOptimizer) {
  for (const Case& c : kCases) {
    const auto p0 = random_floats(kN, 3);
    auto p = upload(p0);
    std::vector<float> cpu_p = p0;
    CudaOptimizer optimizer(c.config, kN);
    auto cpu = make_optimizer(c.config, kN);
    EXPECT_EQ(optimizer.state_size(), int64_t(cpu->state().size())) << name_of(c);
    Reference want_ref(c);
    ref::Vec want = ref::to_double(p0);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = random_floats(kN, 30 + step);
      auto dg = upload(g);
      optimizer.step(p.data(), dg.data(), c.lr, step, stream());
      want_ref.step(want, g);
      cpu->step(cpu_p, g, c.lr, step);
      const auto got = download(p);
      EXPECT_LT(rel_error(got, want), 1e-5) << name_of(c) << " step " << step;
      EXPECT_LT(rel_error(got, ref::to_double(cpu_p)), 1e-5) << name_of(c) << " step " << step;
    }
    // The state is the CPU optimizer's, in the same layout.
    if (optimizer.state_size() > 0) {
      const auto state = download(optimizer.state(), size_t(optimizer.state_size()));
      EXPECT_LT(rel_error(state, ref::to_double(cpu->state())), 1e-5) << name_of(c);
    }
  }
}

TEST_F(CudaOptimizers, ResetForgetsMomentum) {
  const OptimizerConfig config{.kind = OptimizerKind::kSgd, .momentum = 0.9};
  const auto p0 = random_floats(kN, 5), g = random_floats(kN, 6);
  auto p = upload(p0), dg = upload(g);
  CudaOptimizer optimizer(config, kN);
  optimizer.step(p.data(), dg.data(), 0.1f, 1, stream());
  optimizer.reset(stream());
  optimizer.step(p.data(), dg.data(), 0.1f, 2, stream());
  // Two momentum-free steps of lr * g each (a kept buffer would give lr * (1 + 1.9) g).
  ref::Vec want(kN);
  for (int64_t i = 0; i < kN; ++i) want[i] = p0[i] - 2 * 0.1 * g[i];
  EXPECT_LT(rel_error(download(p), want), 1e-6);
}

}  // namespace
}  // namespace syncopate::cuda
