// On the device: the kernels of sigmoid, tanh, GELU, LayerNorm, RMSNorm, the embedding and the
// residual sum against the CPU layers, and CudaModels holding these layers (residual blocks,
// nested, with dropout inside; strided average pooling) against the CPU Model over several
// SGD steps. The device's expf/tanhf and fused multiply-adds differ from the host's, so these
// compare to a relative error of 1e-5 (the host math is checked bit for bit in
// ops_math_layers_test.cpp). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_model.hpp"
#include "core/nn/layers_extra.hpp"
#include "core/nn/loss.hpp"
#include "core/nn/model.hpp"
#include "core/optim/optim.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/model_step.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

using reference::random_floats;
using reference::rel_error;
using reference::to_double;

constexpr double kTolerance = 1e-5;

// A CPU layer's forward and backward on (x, dy), with its parameters and gradients given.
struct CpuPass {
  std::vector<float> y, dx, grads;
};

CpuPass cpu_pass(const LayerSpec& spec, const Shape& in, const std::vector<float>& x,
                 const std::vector<float>& dy, std::vector<float> params,
                 std::vector<float> grads) {
  auto layer = make_layer(spec);
  layer->bind(params, grads);
  const Shape out = layer->output_shape(in);
  Tensor y(out), dx(in);
  const Tensor xt(in, x), dyt(out, dy);
  layer->forward(xt, y, {});
  layer->backward(xt, y, dyt, &dx);
  return {std::vector<float>(y.span().begin(), y.span().end()),
          std::vector<float>(dx.span().begin(), dx.span().end()), grads};
}

using CudaLayerKernels = CudaTest;

TEST_F(CudaLayerKernels, SmoothActivationsMatchTheCpuLayers) {
  const Shape shape = {4, 33};
  const auto x = random_floats(numel(shape), 1, -6.0f, 6.0f);
  const auto dy = random_floats(numel(shape), 2);
  const std::pair<LayerSpec, Activation> cases[] = {{sigmoid_spec(), Activation::kSigmoid},
                                                    {tanh_spec(), Activation::kTanh},
                                                    {gelu_spec(), Activation::kGelu}};
  for (const auto& [spec, f] : cases) {
    SCOPED_TRACE(std::string(to_string(spec.kind)));
    const CpuPass want = cpu_pass(spec, shape, x, dy, {}, {});
    auto x_ = upload(x), dy_ = upload(dy), y_ = upload(x), dx_ = upload(x);
    activation_forward(f, x_.data(), y_.data(), numel(shape), stream());
    activation_backward(f, x_.data(), y_.data(), dy_.data(), dx_.data(), numel(shape), stream());
    EXPECT_LT(rel_error(download(y_), to_double(want.y)), kTolerance);
    EXPECT_LT(rel_error(download(dx_), to_double(want.dx)), kTolerance);
  }
}

TEST_F(CudaLayerKernels, NormalisationsMatchTheCpuLayers) {
  const int64_t features = 37;
  const Shape shape = {3, 5, features};
  const int64_t rows = numel(shape) / features;
  const auto x = random_floats(numel(shape), 3, 1.0f, 3.0f);
  const auto dy = random_floats(numel(shape), 4);
  for (const bool centre : {true, false}) {
    SCOPED_TRACE(centre ? "layernorm" : "rmsnorm");
    const LayerSpec spec = centre ? layernorm_spec(features) : rmsnorm_spec(features);
    const auto params = random_floats(num_params(spec), 5, 0.5f, 1.5f);
    const auto grads = random_floats(num_params(spec), 6);
    const CpuPass want = cpu_pass(spec, shape, x, dy, params, grads);
    auto x_ = upload(x), dy_ = upload(dy), p_ = upload(params), g_ = upload(grads);
    auto y_ = upload(x), dx_ = upload(x), stats = upload(std::vector<float>(2 * rows));
    norm_forward(x_.data(), p_.data(), y_.data(), stats.data(), rows, features, centre, stream());
    norm_backward(x_.data(), p_.data(), stats.data(), dy_.data(), g_.data(), dx_.data(), rows,
                  features, centre, stream());
    EXPECT_LT(rel_error(download(y_), to_double(want.y)), kTolerance);
    EXPECT_LT(rel_error(download(dx_), to_double(want.dx)), kTolerance);
    EXPECT_LT(rel_error(download(g_), to_double(want.grads)), kTolerance);
  }
}

// The gather form of the scatter-add adds in the CPU's order: equal bits, run after run.
TEST_F(CudaLayerKernels, EmbeddingMatchesTheCpuLayerBitForBit) {
  const int64_t vocabulary = 11, width = 6, batch = 4, steps = 5;
  const LayerSpec spec = embedding_spec(vocabulary, width, steps);
  const Shape in = {batch, steps};
  std::vector<float> ids(size_t(batch * steps));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = float((i * 7) % 5);  // repeated ids
  const auto dy = random_floats(size_t(batch * steps * width), 7);
  const auto params = random_floats(num_params(spec), 8);
  const auto grads = random_floats(num_params(spec), 9);
  const CpuPass want = cpu_pass(spec, in, ids, dy, params, grads);
  const math::EmbeddingGeometry g{vocabulary, width, steps, batch * steps, steps};
  const math::TokenRows rows = math::token_rows(ids.data(), batch * steps, vocabulary);
  DeviceBuffer<int32_t> offsets(rows.offsets.size()), positions(rows.rows.size());
  copy_to_device(std::span<const int32_t>(rows.offsets), offsets, stream());
  copy_to_device(std::span<const int32_t>(rows.rows), positions, stream());
  auto ids_ = upload(ids), p_ = upload(params), dy_ = upload(dy), y_ = upload(dy);
  embedding_forward(ids_.data(), p_.data(), y_.data(), g, stream());
  EXPECT_EQ(download(y_), want.y);
  for (int run = 0; run < 2; ++run) {
    auto g_ = upload(grads);
    embedding_backward(dy_.data(), offsets.data(), positions.data(), g_.data(), g, stream());
    EXPECT_EQ(download(g_), want.grads) << "run " << run;
  }
}

// A tiny token model: embedding with positions, pre-norm MLP blocks (one nested, one with
// dropout inside), a final norm and a classifier over the flattened sequence.
ModelSpec token_model() {
  const int64_t width = 8;
  return {
      "tokens",
      {6},
      {embedding_spec(13, width, 6),
       residual_spec(
           {layernorm_spec(width), dense_spec(width, 16), gelu_spec(), dense_spec(16, width)}),
       residual_spec({residual_spec({rmsnorm_spec(width), dense_spec(width, width), tanh_spec()}),
                      dropout_spec(0.25f), dense_spec(width, width), sigmoid_spec()}),
       layernorm_spec(width), flatten_spec(), dense_spec(6 * width, 10)}};
}

// An image model: smooth activations, strided and overlapping average pooling, a residual
// block around a padded convolution.
ModelSpec image_model() {
  return {"images",
          {2, 12, 12},
          {conv2d_spec(2, 4, 3, 1, 1), sigmoid_spec(), avgpool2d_spec(3, 2),
           residual_spec({conv2d_spec(4, 4, 3, 1, 1), tanh_spec()}), avgpool2d_spec(2, 2),
           gelu_spec(), flatten_spec(), dense_spec(4 * 2 * 2, 10)}};
}

std::vector<float> inputs(const ModelSpec& spec, int64_t batch) {
  if (spec.layers.front().kind != LayerKind::kEmbedding) {
    return random_floats(size_t(batch * numel(spec.sample_shape)), 11);
  }
  std::vector<float> ids(size_t(batch * numel(spec.sample_shape)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = float((i * 5 + i / 7) % 13);
  return ids;
}

// Without a device: both models build on the CPU from their descriptions, match them, are
// taken by the CUDA backend, and a CPU training step on them gives a finite loss.
TEST(CudaHostMath, LayerModelsAreCpuModelsTheCudaBackendTakes) {
  for (const ModelSpec& spec : {token_model(), image_model()}) {
    SCOPED_TRACE(spec.name);
    auto cpu = make_model(spec);
    cpu->init(23);
    EXPECT_NO_THROW(check_matches(*cpu, spec));
    EXPECT_NO_THROW(check_runs_on_cuda(spec));
    auto optimizer = make_optimizer({.kind = OptimizerKind::kSgd}, cpu->num_params());
    const std::vector<float> labels = {1, 7};
    const StepContext ctx{.mode = Mode::kTrain, .seed = 9, .step = 1};
    const LossResult loss = cpu_step(*cpu, *optimizer, inputs(spec, 2), labels, ctx, 0.05f, 1);
    EXPECT_TRUE(std::isfinite(loss.loss) && loss.loss > 0) << loss.loss;
  }
}

using CudaLayerModels = CudaTest;

TEST_F(CudaLayerModels, TrainingStepsMatchTheCpuModel) {
  const OptimizerConfig config{.kind = OptimizerKind::kSgd, .momentum = 0.9};
  for (const ModelSpec& spec : {token_model(), image_model()}) {
    SCOPED_TRACE(spec.name);
    auto cpu = make_model(spec);
    cpu->init(23);
    auto gpu = CudaModel::from_cpu(*cpu, spec);
    auto cpu_opt = make_optimizer(config, cpu->num_params());
    CudaOptimizer gpu_opt(config, gpu->num_params());
    const int64_t batch = 8;
    const auto x = inputs(spec, batch);
    std::vector<float> labels(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) labels[size_t(b)] = float((b * 3) % 10);
    gpu->set_batch(batch);
    for (int step = 1; step <= 3; ++step) {
      const StepContext ctx{.mode = Mode::kTrain, .seed = 9, .step = uint32_t(step)};
      const LossResult want = cpu_step(*cpu, *cpu_opt, x, labels, ctx, 0.05f, step);
      const LossResult got = train_step(*gpu, gpu_opt, x, labels, ctx, 0.05f, step);
      EXPECT_NEAR(got.loss, want.loss, 1e-4 * want.loss) << "step " << step;
      std::vector<float> grads(cpu->grads().size()), params(grads.size());
      gpu->get_grads(grads);
      gpu->get_params(params);
      EXPECT_LT(rel_error(grads, to_double(cpu->grads())), 1e-4) << "step " << step;
      EXPECT_LT(rel_error(params, to_double(cpu->params())), kTolerance) << "step " << step;
    }
  }
}

TEST_F(CudaLayerModels, BadTokenIdsAreRefusedBeforeTheDevice) {
  CudaModel model(token_model());
  model.set_batch(1);
  std::vector<float> ids = {0, 1, 2, 3, 4, 5};
  EXPECT_NO_THROW(model.set_input(ids));
  for (const float bad : {13.0f, -1.0f, 2.5f}) {
    ids[3] = bad;
    EXPECT_THROW(model.set_input(ids), UserError) << bad;
  }
}

}  // namespace
}  // namespace syncopate::cuda
