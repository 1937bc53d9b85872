// Optimizers and schedules against hand-computed and PyTorch values.
#include "core/optim/optim.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

using Floats = std::vector<float>;

// Runs `steps` steps from params p with the given gradients, returns params after each step.
std::vector<Floats> run(const OptimizerConfig& config, Floats p, const std::vector<Floats>& grads,
                        float lr) {
  auto opt = make_optimizer(config, static_cast<int64_t>(p.size()));
  std::vector<Floats> out;
  for (size_t t = 0; t < grads.size(); ++t) {
    opt->step(p, grads[t], lr, static_cast<int64_t>(t + 1));
    out.push_back(p);
  }
  return out;
}

void expect_near(const Floats& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Sgd, MomentumThreeStepsByHand) {
  // One parameter p = 1, constant gradient 0.5, lr 0.1, momentum 0.9:
  //   b1 = 0.5,  p = 1 - 0.05 = 0.95
  //   b2 = 0.9 * 0.5 + 0.5 = 0.95,   p = 0.95 - 0.095 = 0.855
  //   b3 = 0.9 * 0.95 + 0.5 = 1.355, p = 0.855 - 0.1355 = 0.7195
  OptimizerConfig c;
  c.momentum = 0.9;
  const auto out = run(c, {1.0f}, {{0.5f}, {0.5f}, {0.5f}}, 0.1f);
  EXPECT_NEAR(out[0][0], 0.95, 1e-6);
  EXPECT_NEAR(out[1][0], 0.855, 1e-6);
  EXPECT_NEAR(out[2][0], 0.7195, 1e-6);
}

TEST(Sgd, WeightDecayAndNesterovByHand) {
  // Weight decay 0.1 (momentum 0.9, lr 0.1, g = 0.5, p = 1): d = g + 0.1 p.
  //   d1 = 0.6,     b1 = 0.6,     p = 0.94
  //   d2 = 0.594,   b2 = 1.134,   p = 0.8266
  //   d3 = 0.58266, b3 = 1.60326, p = 0.666274
  OptimizerConfig c;
  c.momentum = 0.9;
  c.weight_decay = 0.1;
  auto out = run(c, {1.0f}, {{0.5f}, {0.5f}, {0.5f}}, 0.1f);
  EXPECT_NEAR(out[0][0], 0.94, 1e-6);
  EXPECT_NEAR(out[1][0], 0.8266, 1e-6);
  EXPECT_NEAR(out[2][0], 0.666274, 1e-6);
  // Nesterov, no decay: the update is g + 0.9 b.
  //   b1 = 0.5,   update 0.95,   p = 0.905
  //   b2 = 0.95,  update 1.355,  p = 0.7695
  //   b3 = 1.355, update 1.7195, p = 0.59755
  c.weight_decay = 0;
  c.nesterov = true;
  out = run(c, {1.0f}, {{0.5f}, {0.5f}, {0.5f}}, 0.1f);
  EXPECT_NEAR(out[0][0], 0.905, 1e-6);
  EXPECT_NEAR(out[1][0], 0.7695, 1e-6);
  EXPECT_NEAR(out[2][0], 0.59755, 1e-6);
  // Plain SGD with decay: p = 1 - 0.1 * (0.5 + 0.1) = 0.94, and no state.
  OptimizerConfig plain;
  plain.weight_decay = 0.1;
  out = run(plain, {1.0f}, {{0.5f}}, 0.1f);
  EXPECT_NEAR(out[0][0], 0.94, 1e-6);
  EXPECT_TRUE(make_optimizer(plain, 5)->state().empty());
}

const Floats kP0 = {1.0f, -2.0f, 0.5f};
const std::vector<Floats> kGrads = {
    {0.5f, -1.0f, 0.25f}, {0.3f, 0.2f, -0.4f}, {-0.1f, 0.6f, 0.05f}};

TEST(Sgd, MatchesPyTorchGolden) {
  // Golden values from Debian's python3-torch 1.13.1, printed after each step of:
  //   p = torch.nn.Parameter(torch.tensor(kP0)); opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
  //   for g in kGrads: p.grad = torch.tensor(g); opt.step()
  // and the same with nesterov=True, weight_decay=0.01.
  OptimizerConfig c;
  c.momentum = 0.9;
  auto out = run(c, kP0, kGrads, 0.1f);
  expect_near(out[0], {0.949999988079071, -1.899999976158142, 0.4749999940395355}, 1e-6);
  expect_near(out[1], {0.875, -1.8299999237060547, 0.4925000071525574}, 1e-6);
  expect_near(out[2], {0.8174999952316284, -1.8269999027252197, 0.503250002861023}, 1e-6);
  c.nesterov = true;
  c.weight_decay = 0.01;
  out = run(c, kP0, kGrads, 0.1f);
  expect_near(out[0], {0.9031000137329102, -1.8062000274658203, 0.4515500068664551}, 1e-6);
  expect_near(out[1], {0.8030741214752197, -1.758148193359375, 0.5060370564460754}, 1e-6);
  expect_near(out[2], {0.7583377957344055, -1.8091866970062256, 0.5090203285217285}, 1e-6);
}

// Adam in double, written out from Kingma & Ba with PyTorch's placement of eps.
std::vector<std::vector<double>> adam_reference(bool decoupled, double lr, double wd) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  std::vector<double> p(kP0.begin(), kP0.end()), m(3, 0), v(3, 0);
  std::vector<std::vector<double>> out;
  for (int t = 1; t <= 2; ++t) {
    for (size_t i = 0; i < 3; ++i) {
      if (decoupled) p[i] *= 1 - lr * wd;
      const double g = kGrads[t - 1][i] + (decoupled ? 0 : wd * p[i]);
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(b1, t));
      const double v_hat_sqrt = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t));
      p[i] -= lr * m_hat / (v_hat_sqrt + eps);
    }
    out.push_back(p);
  }
  return out;
}

TEST(Adam, TwoStepsAgainstDoubleReferenceAndPyTorch) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdam;
  c.weight_decay = 0.1;
  const std::vector<Floats> grads(kGrads.begin(), kGrads.begin() + 2);
  auto out = run(c, kP0, grads, 0.01f);
  auto ref = adam_reference(false, 0.01, 0.1);
  expect_near(out[0], ref[0], 1e-6);
  expect_near(out[1], ref[1], 1e-6);
  // torch.optim.Adam([p], lr=0.01, weight_decay=0.1)
  expect_near(out[0], {0.9900000095367432, -1.9900000095367432, 0.49000000953674316}, 1e-6);
  expect_near(out[1], {0.9802993535995483, -1.9833056926727295, 0.4913056790828705}, 1e-6);

  c.kind = OptimizerKind::kAdamW;
  out = run(c, kP0, grads, 0.01f);
  ref = adam_reference(true, 0.01, 0.1);
  expect_near(out[0], ref[0], 1e-6);
  expect_near(out[1], ref[1], 1e-6);
  // torch.optim.AdamW([p], lr=0.01, weight_decay=0.1)
  expect_near(out[0], {0.9890000224113464, -1.9880000352859497, 0.4895000159740448}, 1e-6);
  expect_near(out[1], {0.9784361720085144, -1.980901837348938, 0.4917716383934021}, 1e-6);
}

TEST(Optimizer, StateLayoutAndReset) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdam;
  auto adam = make_optimizer(c, 3);
  ASSERT_EQ(adam->state().size(), 6u);
  Floats p = kP0;
  adam->step(p, kGrads[0], 0.01f, 1);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(adam->state()[i], 0.1 * kGrads[0][i], 1e-7);                       // m = (1 - b1) g
    EXPECT_NEAR(adam->state()[3 + i], 0.001 * kGrads[0][i] * kGrads[0][i], 1e-9);  // v
  }
  adam->reset();
  for (float s : adam->state()) EXPECT_EQ(s, 0.0f);

  // SGD momentum: after reset, the next step equals a fresh optimizer's first step.
  c = OptimizerConfig{};
  c.momentum = 0.9;
  auto used = make_optimizer(c, 3);
  Floats a = kP0;
  used->step(a, kGrads[0], 0.1f, 1);
  used->step(a, kGrads[1], 0.1f, 2);
  EXPECT_EQ(used->state().size(), 3u);
  EXPECT_NE(used->state()[0], 0.0f);
  used->reset();
  Floats b = a;
  used->step(a, kGrads[2], 0.1f, 3);
  make_optimizer(c, 3)->step(b, kGrads[2], 0.1f, 1);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(a[i], b[i]);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(used->state()[i], kGrads[2][i]);  // b = g
}

TEST(Optimizer, CostAndErrors) {
  OptimizerConfig c;
  c.momentum = 0.9;
  const Cost cost = make_optimizer(c, 10)->cost(1000);
  EXPECT_EQ(cost.kind, OpKind::kOptimizer);
  EXPECT_GT(cost.flops, 0);
  EXPECT_DOUBLE_EQ(make_optimizer(c, 10)->cost(2000).flops, 2 * cost.flops);
  EXPECT_EQ(cost.bytes, 1000.0 * 5 * 4);  // read p, g, b; write p, b
  // Kinds are an enum: an unknown name never reaches the optimizer (the scenario refuses it).
  EXPECT_FALSE(value_in(kOptimizerKindNames, "adagrad").has_value());
  EXPECT_EQ(names_in(kOptimizerKindNames), "sgd, adam, adamw");
  c = OptimizerConfig{};
  c.nesterov = true;  // without momentum, as PyTorch refuses
  EXPECT_THROW(make_optimizer(c, 3), UserError);
  c = OptimizerConfig{};
  c.momentum = 1.5;
  EXPECT_THROW(make_optimizer(c, 3), UserError);
  c = OptimizerConfig{};
  c.kind = OptimizerKind::kAdam;
  c.eps = 0;
  EXPECT_THROW(make_optimizer(c, 3), UserError);
}

TEST(Schedule, ClosedForms) {
  ScheduleConfig c;
  c.lr = 0.1;
  for (double e : {0.0, 0.5, 7.25}) EXPECT_DOUBLE_EQ(learning_rate(c, e), 0.1);

  c.kind = ScheduleKind::kStep;
  c.step_size = 2;
  c.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(c, 1.99), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(c, 2), 0.05);
  EXPECT_DOUBLE_EQ(learning_rate(c, 5.5), 0.025);

  c.kind = ScheduleKind::kCosine;
  c.min_lr = 0.001;
  c.total_epochs = 10;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0), 0.1);
  EXPECT_NEAR(learning_rate(c, 5), 0.0505, 1e-15);
  EXPECT_NEAR(learning_rate(c, 2.5), 0.001 + 0.099 * (1 + std::sqrt(0.5)) / 2, 1e-15);
  EXPECT_NEAR(learning_rate(c, 10), 0.001, 1e-15);
  EXPECT_NEAR(learning_rate(c, 12), 0.001, 1e-15);  // clamped after the end
}

TEST(Schedule, LinearWarmup) {
  ScheduleConfig c;
  c.lr = 0.1;
  c.warmup_epochs = 2;
  c.warmup_start_factor = 0.1;
  EXPECT_NEAR(learning_rate(c, 0), 0.01, 1e-15);
  EXPECT_NEAR(learning_rate(c, 1), 0.1 * (0.1 + 0.9 * 0.5), 1e-15);
  EXPECT_NEAR(learning_rate(c, 2), 0.1, 1e-15);
  EXPECT_NEAR(learning_rate(c, 3), 0.1, 1e-15);
  // Cosine after warm-up runs over epochs [2, 12]: half-way at 7.
  c.kind = ScheduleKind::kCosine;
  c.total_epochs = 12;
  c.warmup_start_factor = 0;
  EXPECT_NEAR(learning_rate(c, 0), 0.0, 1e-15);
  EXPECT_NEAR(learning_rate(c, 0.5), 0.025, 1e-15);
  EXPECT_NEAR(learning_rate(c, 2), 0.1, 1e-15);
  EXPECT_NEAR(learning_rate(c, 7), 0.05, 1e-15);
  EXPECT_NEAR(learning_rate(c, 12), 0.0, 1e-15);
}

TEST(Schedule, Validation) {
  ScheduleConfig c;
  EXPECT_NO_THROW(validate(c));
  EXPECT_FALSE(value_in(kScheduleKindNames, "exponential").has_value());
  EXPECT_EQ(names_in(kScheduleKindNames), "constant, step, cosine");
  c = ScheduleConfig{};
  c.kind = ScheduleKind::kStep;
  c.step_size = 0;
  EXPECT_THROW(validate(c), UserError);
  c = ScheduleConfig{};
  c.kind = ScheduleKind::kCosine;
  c.warmup_epochs = 3;
  c.total_epochs = 3;
  EXPECT_THROW(validate(c), UserError);
  c = ScheduleConfig{};
  c.warmup_start_factor = 1.5;
  EXPECT_THROW(validate(c), UserError);
  c = ScheduleConfig{};
  c.lr = -1;
  EXPECT_THROW(validate(c), UserError);
}

}  // namespace
}  // namespace syncopate
