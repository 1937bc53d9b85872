// PowerSGD: the parameter matrices of a model, the elements each step sends, full rank
// reproducing the gradient, and error feedback making the applied updates add up.
#include "core/train/powersgd.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/base/rng.hpp"
#include "core/comm/local_backend.hpp"
#include "core/nn/model_spec.hpp"

namespace syncopate {
namespace {

TEST(PowerSgd, MlpTensorsAreItsWeightMatricesAndBiasVectors) {
  const ModelSpec spec = zoo_spec("mlp");
  const auto model = make_model(spec);
  const std::vector<ParamTensor> tensors = param_tensors(spec, *model);
  size_t total = 0, matrices = 0, expected_elements = 0;
  const int rank = 4;
  for (const ParamTensor& t : tensors) {
    EXPECT_EQ(t.offset, total);
    total += t.count();
    if (t.cols > 1) {
      ++matrices;
      expected_elements += (t.rows + t.cols) * std::min<size_t>({t.rows, t.cols, rank});
    } else {
      expected_elements += t.count();
    }
  }
  EXPECT_EQ(total, static_cast<size_t>(model->num_params()));
  EXPECT_EQ(matrices, 3u);  // 784-256-128-10
  EXPECT_EQ(tensors[0].rows, 256u);
  EXPECT_EQ(tensors[0].cols, 784u);
  EXPECT_EQ(tensors[1].rows, 256u);  // its bias
  EXPECT_EQ(tensors[1].cols, 1u);
  const PowerSgd powersgd(tensors, rank, 1);
  EXPECT_EQ(powersgd.elements_per_step(), expected_elements);
  EXPECT_EQ(expected_elements, (256 + 784) * 4 + (128 + 256) * 4 + (10 + 128) * 4 + 256 + 128 + 10);
}

// GPT-2's tensors: attention and MLP projections and the embedding tables are matrices; the
// norms and biases are vectors; nothing is left to the one-vector fallback.
TEST(PowerSgd, Gpt2IsAlmostAllMatrices) {
  const ModelSpec spec = zoo_spec("gpt2");
  const auto model = make_model(spec, Storage::kShapeOnly);
  size_t in_matrices = 0, total = 0, largest_vector = 0;
  for (const ParamTensor& t : param_tensors(spec, *model)) {
    total += t.count();
    if (t.cols > 1)
      in_matrices += t.count();
    else
      largest_vector = std::max(largest_vector, t.count());
  }
  EXPECT_EQ(total, static_cast<size_t>(model->num_params()));
  EXPECT_GT(static_cast<double>(in_matrices), 0.99 * static_cast<double>(total));
  EXPECT_LE(largest_vector, 4u * 768);  // the MLP's hidden bias, not a whole layer
}

std::vector<float> random_values(size_t n, uint32_t extra) {
  Rng rng({.seed = 7, .purpose = RngPurpose::kSynthetic, .extra = extra});
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

TEST(PowerSgd, FullRankReproducesTheGradient) {
  const std::vector<ParamTensor> tensors = {{0, 6, 5}, {30, 4, 1}, {34, 3, 7}};
  PowerSgd powersgd(tensors, 100, 3);  // rank clamped to min(n, m)
  LocalCommunicator comm;
  WallClockExecutor exec;
  const std::vector<float> grad = random_values(55, 1);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g = grad;
    powersgd.reduce(g, comm, exec, Algorithm::kRing);
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], grad[i], 1e-4) << "step " << step;
  }
}

// A gradient of rank 2 (a batch of two samples) at rank 5: the surplus columns of P carry no
// part of M, so the full-rank factors still reproduce it.
TEST(PowerSgd, FullRankReproducesARankDeficientGradient) {
  const std::vector<float> u = random_values(12, 3), v = random_values(10, 4);
  std::vector<float> grad(30, 0.0f);
  for (size_t s = 0; s < 2; ++s)
    for (size_t i = 0; i < 6; ++i)
      for (size_t j = 0; j < 5; ++j) grad[i * 5 + j] += u[s * 6 + i] * v[s * 5 + j];
  PowerSgd powersgd({{0, 6, 5}}, 5, 9);
  LocalCommunicator comm;
  WallClockExecutor exec;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g = grad;
    powersgd.reduce(g, comm, exec, Algorithm::kRing);
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], grad[i], 1e-5) << "step " << step;
  }
}

// A constant gradient of rank 3, compressed at rank 1: each step's update is far from it, but
// with error feedback the updates add up to it (the mean over T steps converges); without,
// they do not.
TEST(PowerSgd, ErrorFeedbackMakesTheAppliedUpdatesAddUp) {
  const std::vector<ParamTensor> tensors = {{0, 8, 6}};
  const std::vector<float> grad = random_values(48, 2);
  double norm = 0;
  for (float x : grad) norm += double{x} * x;
  norm = std::sqrt(norm);
  const auto mean_error = [&](ErrorFeedback feedback, int steps) {
    PowerSgd powersgd(tensors, 1, 5, feedback);
    LocalCommunicator comm;
    WallClockExecutor exec;
    std::vector<double> sum(grad.size(), 0.0);
    for (int t = 0; t < steps; ++t) {
      std::vector<float> g = grad;
      powersgd.reduce(g, comm, exec, Algorithm::kRing);
      for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    }
    double error = 0;
    for (size_t i = 0; i < grad.size(); ++i) {
      const double d = sum[i] / steps - grad[i];
      error += d * d;
    }
    return std::sqrt(error) / norm;
  };
  const double with = mean_error(ErrorFeedback::kOn, 400);
  const double without = mean_error(ErrorFeedback::kOff, 400);
  EXPECT_LT(with, 0.05);
  EXPECT_GT(without, 0.3);
  EXPECT_LT(mean_error(ErrorFeedback::kOn, 800), with);  // and keeps converging
}

TEST(PowerSgd, ZeroGradientStaysFinite) {
  PowerSgd powersgd({{0, 4, 4}}, 2, 1);
  LocalCommunicator comm;
  WallClockExecutor exec;
  std::vector<float> g(16, 0.0f);
  powersgd.reduce(g, comm, exec, Algorithm::kRing);
  for (float x : g) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace syncopate
