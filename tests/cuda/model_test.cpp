// CudaModel (whole forward, loss, backward and optimizer step on the device) against the same
// layer list run through the double-precision reference loops on the CPU.
#include <gtest/gtest.h>

#include <vector>

#include "backends/cuda/cuda_model.hpp"
#include "core/base/check.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/reference_model.hpp"

namespace syncopate::cuda {
namespace {

namespace ref = reference;
using ref::random_floats;
using ref::reference_backward;
using ref::reference_forward;
using ref::ReferenceRun;
using ref::rel_error;
using ref::to_float;

std::vector<float> labels_for(int64_t batch) {
  std::vector<float> labels(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) labels[size_t(b)] = float((b * 3 + 1) % 10);
  return labels;
}

using CudaModelTest = CudaTest;

TEST_F(CudaModelTest, ForwardBackwardAndStepMatchReference) {
  for (const ModelSpec& spec : {zoo_spec("mlp"), zoo_spec("cnn"), mixed_spec()}) {
    for (const int64_t batch : {int64_t{8}, int64_t{3}}) {
      SCOPED_TRACE(spec.name + " batch " + std::to_string(batch));
      CudaModel model(spec);
      const auto params = random_floats(size_t(model.num_params()), 1, -0.2f, 0.2f);
      model.set_params(params);
      model.set_batch(batch);
      const auto x = random_floats(size_t(batch * numel(spec.sample_shape)), 2);
      const auto labels = labels_for(batch);
      // Eval mode: dropout is the identity, as in the reference.
      model.set_input(x);
      model.forward({.mode = Mode::kEval});
      const LossResult loss = model.softmax_cross_entropy(labels);
      model.zero_grads();
      model.backward();

      ReferenceRun run = reference_forward(spec, params, x, batch);
      const ref::Xent want = ref::softmax_xent(run.acts.back(), labels, batch, 10);
      reference_backward(spec, params, to_float(want.dlogits), run);
      std::vector<float> out(size_t(batch * 10)), grads(params.size());
      model.get_output(out);
      model.get_grads(grads);
      EXPECT_LT(rel_error(out, ref::to_double(run.acts.back())), 1e-4);
      EXPECT_NEAR(loss.loss, want.loss, 1e-4 * want.loss);
      EXPECT_EQ(loss.correct, want.correct);
      EXPECT_LT(rel_error(grads, run.grads), 1e-4);

      // One SGD step: p - lr g.
      CudaOptimizer sgd(OptimizerConfig{.kind = OptimizerKind::kSgd}, model.num_params());
      sgd.step(model.params(), model.grads(), 0.5f, 1, model.stream());
      std::vector<float> stepped(params.size());
      model.get_params(stepped);
      ref::Vec want_params(params.size());
      for (size_t i = 0; i < params.size(); ++i) want_params[i] = params[i] - 0.5 * run.grads[i];
      EXPECT_LT(rel_error(stepped, want_params), 1e-5);
    }
  }
}

TEST_F(CudaModelTest, DropoutIsDeterministicPerStepAndIdentityInEval) {
  const ModelSpec spec = mixed_spec();
  CudaModel model(spec);
  model.set_params(random_floats(size_t(model.num_params()), 3, -0.3f, 0.3f));
  model.set_batch(4);
  model.set_input(random_floats(size_t(4 * 256), 4));
  std::vector<float> eval(40), train_a(40), train_b(40), train_c(40);
  model.forward({.mode = Mode::kEval});
  model.get_output(eval);
  model.forward({.mode = Mode::kTrain, .seed = 9, .step = 1});
  model.get_output(train_a);
  model.forward({.mode = Mode::kTrain, .seed = 9, .step = 1});
  model.get_output(train_b);
  model.forward({.mode = Mode::kTrain, .seed = 9, .step = 2});
  model.get_output(train_c);
  EXPECT_EQ(train_a, train_b);
  EXPECT_NE(train_a, train_c);
  EXPECT_NE(train_a, eval);
}

TEST_F(CudaModelTest, TrainingReducesTheLoss) {
  // Ten well-separated classes: prototypes plus noise; a few SGD steps must fit them.
  const ModelSpec spec = zoo_spec("mlp");
  CudaModel model(spec);
  model.set_params(random_floats(size_t(model.num_params()), 5, -0.05f, 0.05f));
  const int64_t batch = 64, dim = 784;
  const auto prototypes = random_floats(size_t(10 * dim), 6);
  const auto noise = random_floats(size_t(batch * dim), 7, -0.5f, 0.5f);
  const auto labels = labels_for(batch);
  std::vector<float> x(size_t(batch * dim));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < dim; ++j)
      x[size_t(b * dim + j)] = prototypes[size_t(labels[size_t(b)]) * dim + j] + noise[b * dim + j];
  model.set_batch(batch);
  CudaOptimizer optimizer(OptimizerConfig{.kind = OptimizerKind::kSgd, .momentum = 0.9},
                          model.num_params());
  const LossResult first = train_step(model, optimizer, x, labels, {.seed = 1}, 0.05f, 1);
  LossResult last;
  for (int step = 2; step <= 30; ++step) {
    last =
        train_step(model, optimizer, x, labels, {.seed = 1, .step = uint32_t(step)}, 0.05f, step);
  }
  EXPECT_GT(first.loss, 1.5);  // ~ln 10 at a small random init
  EXPECT_LT(last.loss, 0.1 * first.loss);
  EXPECT_EQ(last.correct, batch);
}

TEST_F(CudaModelTest, RejectsBadLabelsAndShapes) {
  CudaModel model(zoo_spec("mlp"));
  model.set_batch(2);
  model.set_input(random_floats(2 * 784, 8));
  model.forward({});
  const std::vector<float> out_of_range = {0.0f, 10.0f}, fractional = {0.5f, 1.0f};
  EXPECT_THROW(model.softmax_cross_entropy(out_of_range), UserError);
  EXPECT_THROW(model.softmax_cross_entropy(fractional), UserError);
  EXPECT_THROW(model.set_input(std::vector<float>(10)), InternalError);
  const ModelSpec mismatched{"bad", {1, 28, 28}, {dense_spec(10, 2)}};
  EXPECT_THROW(CudaModel{mismatched}, UserError);
}

}  // namespace
}  // namespace syncopate::cuda
