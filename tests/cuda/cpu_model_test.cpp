// CudaModel against the CPU Model (core/nn/model.hpp): same layer lists (checked without a
// device), and on the device the same outputs, loss, gradients and parameters after several
// optimizer steps, dropout included (the device draws the CPU layer's mask).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backends/cuda/cuda_model.hpp"
#include "core/nn/loss.hpp"
#include "core/nn/model.hpp"
#include "core/optim/optim.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/model_step.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/reference_model.hpp"

namespace syncopate::cuda {
namespace {

using reference::random_floats;
using reference::rel_error;
using reference::to_double;

// Every layer kind the CUDA backend runs, with overlapping pooling windows and dropout.
std::unique_ptr<Model> mixed_cpu_model() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(conv2d(1, 4, 3, 1, 1));
  layers.push_back(relu());
  layers.push_back(maxpool2d(3, 2));
  layers.push_back(avgpool2d(2, 1));
  layers.push_back(dropout(0.5f));
  layers.push_back(conv2d(4, 8, 3, 2, 0));
  layers.push_back(relu());
  layers.push_back(global_avgpool());
  layers.push_back(dense(8, 10));
  return std::make_unique<Model>("mixed", Shape{1, 16, 16}, std::move(layers));
}

struct Pair {
  std::unique_ptr<Model> cpu;
  ModelSpec spec;
};

std::vector<Pair> pairs() {
  std::vector<Pair> out;
  out.push_back({make_model("mlp"), zoo_spec("mlp")});
  out.push_back({make_model("cnn"), zoo_spec("cnn")});
  out.push_back({mixed_cpu_model(), mixed_spec()});
  return out;
}

TEST(CudaHostMath, ZooLayerListsMatchTheCpuZoo) {
  for (const Pair& p : pairs()) {
    EXPECT_NO_THROW(check_matches(*p.cpu, p.spec)) << p.spec.name;
  }
  const auto cnn = make_model("cnn");
  EXPECT_THROW(check_matches(*cnn, zoo_spec("mlp")), UserError);
  ModelSpec wrong_pool = mixed_spec();
  wrong_pool.layers[2] = avgpool2d_spec(3, 2);  // kind differs
  EXPECT_THROW(check_matches(*mixed_cpu_model(), wrong_pool), UserError);
  ModelSpec wrong_width = zoo_spec("mlp");
  wrong_width.layers[1] = dense_spec(784, 255);
  EXPECT_THROW(check_matches(*make_model("mlp"), wrong_width), UserError);
}

// One description builds both models: the CPU model of a description matches it, and the CUDA
// backend takes every zoo model whose layers it has kernels for and refuses the others.
TEST(CudaHostMath, TheCudaModelIsBuiltFromTheCpuModelsDescription) {
  const auto mixed = make_model(mixed_spec());
  ASSERT_TRUE(mixed->spec().has_value());
  EXPECT_NO_THROW(check_matches(*mixed, *mixed->spec()));
  EXPECT_NO_THROW(check_matches(*mixed_cpu_model(), *mixed->spec()));
  for (const std::string name : {"mlp", "cnn", "nfnet"}) {
    EXPECT_NO_THROW(check_runs_on_cuda(*make_model(name, Storage::kShapeOnly)->spec())) << name;
  }
  for (const std::string name : {"nfnet_full", "resnet50"}) {
    EXPECT_THROW(check_runs_on_cuda(zoo_spec(name)), UserError) << name;
  }
  ModelSpec padded = mixed_spec();
  padded.layers[2] = maxpool2d_spec(3, 2, 1);
  EXPECT_THROW(check_runs_on_cuda(padded), UserError);
}

TEST(CudaHostMath, LayersWithoutKernelsAreRefusedByNameAndTheOthersRun) {
  const auto refused = [](const ModelSpec& spec, const std::string& what) {
    try {
      check_runs_on_cuda(spec);
      ADD_FAILURE() << "no error for " << what;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(zoo_spec("gpt2"), "layer 1.1 (attention) has no CUDA kernels");
  refused(zoo_spec("llama-7b"), "has no CUDA kernels");
  refused({"bn", {2, 4, 4}, {residual_spec({batchnorm2d_spec(2)})}},
          "layer 0.0 (batchnorm2d) has no CUDA kernels");
  refused({"late_ids", {8}, {dense_spec(8, 8), embedding_spec(8, 4)}},
          "layer 1 (embedding) has CUDA kernels only as the model's first layer");
  // The layers of the transformer and smooth-activation models run, nested blocks included.
  const Shape image = {1, 4, 4};
  for (const LayerSpec& layer : {sigmoid_spec(), tanh_spec(), gelu_spec()}) {
    EXPECT_NO_THROW(check_runs_on_cuda({"act", image, {flatten_spec(), layer}}));
  }
  EXPECT_NO_THROW(check_runs_on_cuda(
      {"lm",
       {6},
       {embedding_spec(10, 8, 6), residual_spec({layernorm_spec(8), dense_spec(8, 8)}),
        residual_spec({residual_spec({rmsnorm_spec(8), gelu_spec()})}), dense_spec(8, 10)}}));
  refused({"nobias", {16}, {dense_spec(16, 4, Bias::kNo)}}, "(dense) without bias");
  EXPECT_NO_THROW(check_runs_on_cuda({"seq", {3, 16}, {dense_spec(16, 4)}}));  // the last axis
}

// The reference loops the device tests compare against (with their flat parameter layout:
// weights then bias per layer) compute what the CPU layers compute.
TEST(CudaHostMath, ReferenceModelMatchesTheCpuModel) {
  for (Pair& p : pairs()) {
    SCOPED_TRACE(p.spec.name);
    p.cpu->init(11);
    const int64_t batch = 2;
    const auto x = random_floats(size_t(batch * numel(p.spec.sample_shape)), 4);
    const std::vector<float> labels = {3, 8};
    p.cpu->set_batch(batch);
    std::copy(x.begin(), x.end(), p.cpu->input().data());
    for (int i = 0; i < p.cpu->num_layers(); ++i) p.cpu->forward_layer(i, {.mode = Mode::kEval});
    const Tensor label_tensor(Shape{batch}, labels);
    softmax_cross_entropy(p.cpu->output(), label_tensor, &p.cpu->output_grad());
    p.cpu->zero_grads();
    for (int i = p.cpu->num_layers() - 1; i >= 0; --i) p.cpu->backward_layer(i);

    reference::ReferenceRun run = reference::reference_forward(p.spec, p.cpu->params(), x, batch);
    const reference::Xent xent = reference::softmax_xent(run.acts.back(), labels, batch, 10);
    reference::reference_backward(p.spec, p.cpu->params(), reference::to_float(xent.dlogits), run);
    EXPECT_LT(rel_error(p.cpu->output().span(), to_double(run.acts.back())), 1e-5);
    EXPECT_LT(rel_error(p.cpu->grads(), run.grads), 1e-5);
  }
}

using CudaVsCpuModel = CudaTest;

TEST_F(CudaVsCpuModel, TrainingStepsMatchTheCpuModel) {
  const OptimizerConfig configs[] = {
      {.kind = OptimizerKind::kSgd, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-4},
      {.kind = OptimizerKind::kAdamW, .weight_decay = 1e-2}};
  for (const OptimizerConfig& config : configs) {
    for (Pair& p : pairs()) {
      SCOPED_TRACE(p.spec.name + " " + std::string(to_string(config.kind)));
      p.cpu->init(17);
      auto gpu = CudaModel::from_cpu(*p.cpu, p.spec);
      auto cpu_opt = make_optimizer(config, p.cpu->num_params());
      CudaOptimizer gpu_opt(config, gpu->num_params());
      const int64_t batch = 16;
      const auto x = random_floats(size_t(batch * numel(p.spec.sample_shape)), 3);
      std::vector<float> labels(static_cast<size_t>(batch));
      for (int64_t b = 0; b < batch; ++b) labels[size_t(b)] = float((b * 7) % 10);
      gpu->set_batch(batch);
      const float lr = config.kind == OptimizerKind::kSgd ? 0.05f : 1e-3f;
      // SGD is linear in the gradient, so fp32 rounding stays at fp32 size. Adam's update is
      // about lr * sign(g) where |g| is tiny: a gradient that is rounding noise on either side
      // moves its parameter by up to 2 lr, so parameters (and later gradients) are compared
      // more loosely there; the Adam arithmetic itself is checked to 1e-5 in optimizer_test.
      const double tolerance = config.kind == OptimizerKind::kSgd ? 1e-5 : 1e-3;
      for (int step = 1; step <= 3; ++step) {
        const StepContext ctx{.mode = Mode::kTrain, .seed = 5, .step = uint32_t(step)};
        const LossResult want = cpu_step(*p.cpu, *cpu_opt, x, labels, ctx, lr, step);
        const LossResult got = train_step(*gpu, gpu_opt, x, labels, ctx, lr, step);
        EXPECT_NEAR(got.loss, want.loss, 10 * tolerance * want.loss) << "step " << step;
        EXPECT_NEAR(got.correct, want.correct, step == 1 ? 0 : 1) << "step " << step;
        std::vector<float> grads(p.cpu->grads().size()), params(grads.size());
        gpu->get_grads(grads);
        gpu->get_params(params);
        EXPECT_LT(rel_error(grads, to_double(p.cpu->grads())), 10 * tolerance) << "step " << step;
        EXPECT_LT(rel_error(params, to_double(p.cpu->params())), tolerance) << "step " << step;
      }
      std::vector<float> out(size_t(batch * 10));
      gpu->get_output(out);
      EXPECT_LT(rel_error(out, to_double(p.cpu->output().span())), 10 * tolerance);
    }
  }
}

TEST_F(CudaVsCpuModel, FromCpuRejectsAMismatchedList) {
  const auto cnn = make_model("cnn");
  EXPECT_THROW(CudaModel::from_cpu(*cnn, zoo_spec("mlp")), UserError);
  const auto cost_only = make_model("mlp", Storage::kShapeOnly);
  EXPECT_THROW(CudaModel::from_cpu(*cost_only, zoo_spec("mlp")), UserError);
}

}  // namespace
}  // namespace syncopate::cuda
