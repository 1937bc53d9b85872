// Losses: values and finite-difference gradients against double-precision references.
#include "core/nn/loss.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "core/base/check.hpp"
#include "tests/core/nn/layers_testing.hpp"

namespace syncopate {
namespace {

using testing::normalised_error;
using testing::random_floats;
using testing::Vec;

// mean_b [ log sum_c exp(z_bc) - z_b,label ], in double (logits are small in this reference).
double cross_entropy_ref(const Vec& z, const std::vector<int>& labels, int64_t classes) {
  double total = 0;
  for (size_t b = 0; b < labels.size(); ++b) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[b * classes + c]);
    total += std::log(sum) - z[b * classes + static_cast<size_t>(labels[b])];
  }
  return total / static_cast<double>(labels.size());
}

TEST(SoftmaxCrossEntropy, LossAndGradientMatchDoubleReference) {
  const int64_t batch = 6, classes = 7;
  const std::vector<int> labels{0, 3, 6, 2, 2, 5};
  Tensor logits({batch, classes}, random_floats(batch * classes, 11, 2.0f));
  Tensor y({batch});
  for (int64_t b = 0; b < batch; ++b) y[b] = static_cast<float>(labels[static_cast<size_t>(b)]);
  Tensor grad;
  const LossResult r = softmax_cross_entropy(logits, y, &grad);
  const Vec z = testing::to_double(logits.span());
  EXPECT_NEAR(r.loss, cross_entropy_ref(z, labels, classes), 1e-6);
  ASSERT_EQ(grad.shape(), logits.shape());
  Vec fd(z.size());
  Vec zv = z;
  const double eps = 1e-6;
  for (size_t i = 0; i < z.size(); ++i) {
    zv[i] = z[i] + eps;
    const double plus = cross_entropy_ref(zv, labels, classes);
    zv[i] = z[i] - eps;
    const double minus = cross_entropy_ref(zv, labels, classes);
    zv[i] = z[i];
    fd[i] = (plus - minus) / (2 * eps);
  }
  EXPECT_LT(normalised_error(testing::to_double(grad.span()), fd), 1e-4);
  // Without a gradient tensor: the same loss.
  EXPECT_EQ(softmax_cross_entropy(logits, y, nullptr).loss, r.loss);
  // Correct count by hand: the arg-max of each row.
  int64_t correct = 0;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t arg = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (logits[b * classes + c] > logits[b * classes + arg]) arg = c;
    correct += arg == labels[static_cast<size_t>(b)];
  }
  EXPECT_EQ(r.correct, correct);
}

TEST(SoftmaxCrossEntropy, StableForHugeLogitsAndCountsCorrect) {
  // Row 0: softmax of (1000, 0) -> loss 0 for label 0 (correct); row 1: label 1 with logits
  // (1000, 998) -> loss = log(1 + e^2) - 0 ... = log(e^2 + 1) (wrong prediction).
  Tensor logits({2, 2}, {1000.0f, 0.0f, 1000.0f, 998.0f});
  Tensor labels({2}, {0.0f, 1.0f});
  Tensor grad;
  const LossResult r = softmax_cross_entropy(logits, labels, &grad);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_NEAR(r.loss, (0.0 + std::log(1.0 + std::exp(2.0))) / 2, 1e-6);
  EXPECT_EQ(r.correct, 1);
  const double p = 1.0 / (1.0 + std::exp(-2.0));  // softmax of class 0 in row 1
  EXPECT_NEAR(grad[2], p / 2, 1e-6);
  EXPECT_NEAR(grad[3], (1 - p - 1) / 2, 1e-6);
  EXPECT_NEAR(grad[0], 0.0, 1e-6);
}

TEST(SoftmaxCrossEntropy, RejectsLabelsThatAreNotClassIndices) {
  Tensor logits({1, 3});
  for (float bad : {3.0f, -1.0f, 1.5f}) {
    Tensor labels({1}, {bad});
    EXPECT_THROW(softmax_cross_entropy(logits, labels, nullptr), UserError) << bad;
  }
}

TEST(Mse, LossAndGradientMatchDoubleReference) {
  Tensor pred({4, 3}, random_floats(12, 21)), target({4, 3}, random_floats(12, 22));
  Tensor grad;
  const LossResult r = mse(pred, target, &grad);
  double ref = 0;
  for (int64_t i = 0; i < 12; ++i) ref += std::pow(static_cast<double>(pred[i]) - target[i], 2);
  EXPECT_NEAR(r.loss, ref / 12, 1e-6);
  EXPECT_EQ(r.correct, 0);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(grad[i], 2.0 * (static_cast<double>(pred[i]) - target[i]) / 12, 1e-6);
  }
  EXPECT_EQ(mse(pred, target, nullptr).loss, r.loss);
  // Central differences of the double-precision loss.
  Vec p = testing::to_double(pred.span()), fd(12);
  const Vec t = testing::to_double(target.span());
  auto loss = [&] {
    double sum = 0;
    for (size_t i = 0; i < 12; ++i) sum += (p[i] - t[i]) * (p[i] - t[i]);
    return sum / 12;
  };
  const double eps = 1e-6;
  for (size_t i = 0; i < 12; ++i) {
    const double saved = p[i];
    p[i] = saved + eps;
    const double plus = loss();
    p[i] = saved - eps;
    const double minus = loss();
    p[i] = saved;
    fd[i] = (plus - minus) / (2 * eps);
  }
  EXPECT_LT(normalised_error(testing::to_double(grad.span()), fd), 1e-4);
}

// Central differences of mean_i f(p_i - t_i) at the float predictions, in double.
Vec central_differences(const Tensor& pred, const Tensor& target, double (*f)(double)) {
  Vec p = testing::to_double(pred.span()), fd(p.size());
  const Vec t = testing::to_double(target.span());
  auto loss = [&] {
    double sum = 0;
    for (size_t i = 0; i < p.size(); ++i) sum += f(p[i] - t[i]);
    return sum / static_cast<double>(p.size());
  };
  const double eps = 1e-6;
  for (size_t i = 0; i < p.size(); ++i) {
    const double saved = p[i];
    p[i] = saved + eps;
    const double plus = loss();
    p[i] = saved - eps;
    const double minus = loss();
    p[i] = saved;
    fd[i] = (plus - minus) / (2 * eps);
  }
  return fd;
}

double absolute(double d) { return std::abs(d); }
double huber_one(double d) { return std::abs(d) <= 1 ? 0.5 * d * d : std::abs(d) - 0.5; }
double huber_half(double d) {
  return std::abs(d) <= 0.5 ? 0.5 * d * d : 0.5 * (std::abs(d) - 0.25);
}

TEST(Mae, LossAndGradientMatchDoubleReference) {
  Tensor pred({5, 2}, random_floats(10, 31)), target({5, 2}, random_floats(10, 32));
  Tensor grad;
  const LossResult r = mae(pred, target, &grad);
  double ref = 0;
  for (int64_t i = 0; i < 10; ++i) ref += std::abs(static_cast<double>(pred[i]) - target[i]);
  EXPECT_NEAR(r.loss, ref / 10, 1e-6);
  EXPECT_EQ(r.correct, 0);
  EXPECT_LT(normalised_error(testing::to_double(grad.span()),
                             central_differences(pred, target, absolute)),
            1e-4);
  EXPECT_EQ(compute_loss({LossKind::kMae}, pred, target, nullptr).loss, r.loss);
  // Equal prediction and target: no slope.
  Tensor same({1}, {0.5f}), same_grad;
  mae(same, same, &same_grad);
  EXPECT_EQ(same_grad[0], 0.0f);
}

TEST(Huber, QuadraticInsideDeltaLinearOutsideLikePyTorch) {
  // Differences -3, -0.5, 0.2, 2 with delta 1: 0.5 d^2 inside, |d| - 0.5 outside.
  Tensor pred({4}, {-3.0f, -0.5f, 0.2f, 2.0f}), target({4}, {0.0f, 0.0f, 0.0f, 0.0f});
  Tensor grad;
  const LossResult r = huber(pred, target, 1.0, &grad);
  EXPECT_NEAR(r.loss, (2.5 + 0.125 + 0.02 + 1.5) / 4, 1e-7);
  EXPECT_NEAR(grad[0], -1.0 / 4, 1e-7);
  EXPECT_NEAR(grad[1], -0.5 / 4, 1e-7);
  EXPECT_NEAR(grad[2], 0.2 / 4, 1e-7);
  EXPECT_NEAR(grad[3], 1.0 / 4, 1e-7);
  // The delta is honoured, and a large delta is the half MSE.
  EXPECT_NEAR(huber(pred, target, 0.5, nullptr).loss, (1.375 + 0.125 + 0.02 + 0.875) / 4, 1e-7);
  EXPECT_NEAR(huber(pred, target, 100.0, nullptr).loss, 0.5 * mse(pred, target, nullptr).loss,
              1e-6);
}

TEST(Huber, GradientMatchesCentralDifferences) {
  Tensor pred({6, 2}, random_floats(12, 41, 2.0f)), target({6, 2}, random_floats(12, 42));
  for (const auto& [delta, f] : {std::pair{1.0, &huber_one}, std::pair{0.5, &huber_half}}) {
    Tensor grad;
    huber(pred, target, delta, &grad);
    EXPECT_LT(
        normalised_error(testing::to_double(grad.span()), central_differences(pred, target, f)),
        1e-4)
        << "delta " << delta;
    Tensor via_choice;
    compute_loss({LossKind::kHuber, delta}, pred, target, &via_choice);
    EXPECT_EQ(via_choice[3], grad[3]);
  }
}

TEST(LossCost, IsALossCostProportionalToTheLogits) {
  const Cost a = loss_cost({64, 10}), b = loss_cost({128, 10});
  EXPECT_EQ(a.kind, OpKind::kLoss);
  EXPECT_GT(a.flops, 0);
  EXPECT_DOUBLE_EQ(b.flops, 2 * a.flops);
}

}  // namespace
}  // namespace syncopate
