// CudaModel (whole forward, loss, backward and optimizer step on the device) against the same
// layer list run through the double-precision reference loops on the CPU.
#include <gtest/gtest.h>

#include <vector>

#include "backends/cuda/cuda_model.hpp"
#include "core/check.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

namespace ref = reference;
using ref::random_floats;
using ref::rel_error;

// The reference model: activations in float between layers (like the device), each layer's
// math in double.
struct ReferenceRun {
  std::vector<std::vector<float>> acts;  // acts[i] is layer i's input
  std::vector<Shape> shapes;
  ref::Vec grads;
};

std::vector<float> to_float(const ref::Vec& v) { return {v.begin(), v.end()}; }

ref::Pool pool_of(const LayerSpec& l, const Shape& s) {
  const bool global = l.kind == LayerKind::kGlobalAvgPool;
  return {s[0], s[1], s[2], s[3], global ? s[2] : l.kernel, global ? 1 : l.stride};
}

ref::Conv conv_of(const LayerSpec& l, const Shape& s) {
  return {s[0], s[1], s[2], s[3], l.out, l.kernel, l.stride, l.padding};
}

// Forward in eval mode (dropout is the identity).
ReferenceRun reference_forward(const ModelSpec& spec, std::span<const float> params,
                               const std::vector<float>& x, int64_t batch) {
  ReferenceRun run;
  Shape shape = {batch};
  shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  run.acts.push_back(x);
  run.shapes.push_back(shape);
  size_t offset = 0;
  for (const LayerSpec& l : spec.layers) {
    const std::vector<float>& in = run.acts.back();
    const Shape out_shape = output_shape(l, shape);
    const float* w = params.data() + offset;
    std::vector<float> out;
    ref::Vec y, unused;
    switch (l.kind) {
      case LayerKind::kDense:
        out = to_float(ref::dense_forward(in, {w, size_t(l.in * l.out)},
                                          {w + l.in * l.out, size_t(l.out)}, batch, l.in, l.out));
        break;
      case LayerKind::kConv2d: {
        const size_t nw = size_t(l.out * l.in * l.kernel * l.kernel);
        out = to_float(ref::conv_forward(in, {w, nw}, {w + nw, size_t(l.out)}, conv_of(l, shape)));
        break;
      }
      case LayerKind::kMaxPool2d:
        ref::maxpool(in, {}, pool_of(l, shape), y, unused);
        out = to_float(y);
        break;
      case LayerKind::kAvgPool2d:
      case LayerKind::kGlobalAvgPool:
        ref::avgpool(in, {}, pool_of(l, shape), y, unused);
        out = to_float(y);
        break;
      case LayerKind::kRelu:
        for (const float v : in) out.push_back(v > 0 ? v : 0.0f);
        break;
      case LayerKind::kFlatten:
      case LayerKind::kDropout:
        out = in;
        break;
    }
    offset += size_t(num_params(l));
    run.acts.push_back(out);
    run.shapes.push_back(out_shape);
    shape = out_shape;
  }
  return run;
}

void reference_backward(const ModelSpec& spec, std::span<const float> params, std::vector<float> dy,
                        ReferenceRun& run) {
  run.grads.assign(params.size(), 0.0);
  size_t end = params.size();
  for (int i = int(spec.layers.size()) - 1; i >= 0; --i) {
    const LayerSpec& l = spec.layers[size_t(i)];
    const std::vector<float>& x = run.acts[size_t(i)];
    const Shape& shape = run.shapes[size_t(i)];
    const size_t offset = end - size_t(num_params(l));
    const float* w = params.data() + offset;
    ref::Vec dx, unused;
    switch (l.kind) {
      case LayerKind::kDense:
      case LayerKind::kConv2d: {
        const size_t nw = size_t(num_params(l) - l.out);
        const ref::Grads g = l.kind == LayerKind::kDense
                                 ? ref::dense_backward(x, {w, nw}, dy, shape[0], l.in, l.out)
                                 : ref::conv_backward(x, {w, nw}, dy, conv_of(l, shape));
        for (size_t j = 0; j < nw; ++j) run.grads[offset + j] = g.dw[j];
        for (size_t j = 0; j < size_t(l.out); ++j) run.grads[offset + nw + j] = g.db[j];
        dx = g.dx;
        break;
      }
      case LayerKind::kMaxPool2d:
        ref::maxpool(x, dy, pool_of(l, shape), unused, dx);
        break;
      case LayerKind::kAvgPool2d:
      case LayerKind::kGlobalAvgPool:
        ref::avgpool(x, dy, pool_of(l, shape), unused, dx);
        break;
      case LayerKind::kRelu:
        for (size_t j = 0; j < x.size(); ++j) dx.push_back(x[j] > 0 ? dy[j] : 0.0);
        break;
      case LayerKind::kFlatten:
      case LayerKind::kDropout:
        dx = ref::to_double(dy);
        break;
    }
    dy = to_float(dx);
    end = offset;
  }
}

// Covers every layer kind, overlapping pooling windows, strided and padded convolutions.
ModelSpec mixed_spec() {
  return {"mixed",
          {1, 16, 16},
          {conv2d_spec(1, 4, 3, 1, 1), relu_spec(), maxpool2d_spec(3, 2), avgpool2d_spec(2, 1),
           dropout_spec(0.5f), conv2d_spec(4, 8, 3, 2, 0), relu_spec(), global_avgpool_spec(),
           dense_spec(8, 10)}};
}

std::vector<float> labels_for(int64_t batch) {
  std::vector<float> labels(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) labels[size_t(b)] = float((b * 3 + 1) % 10);
  return labels;
}

using CudaModelTest = CudaTest;

TEST_F(CudaModelTest, ForwardBackwardAndStepMatchReference) {
  for (const ModelSpec& spec : {cuda_zoo_spec("mlp"), cuda_zoo_spec("cnn"), mixed_spec()}) {
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
      CudaOptimizer sgd(model.num_params(), SgdOptions{.lr = 0.5f});
      sgd.step(model.params(), model.grads(), 1, model.stream());
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
  const ModelSpec spec = cuda_zoo_spec("mlp");
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
  CudaOptimizer optimizer(model.num_params(), SgdOptions{.lr = 0.05f, .momentum = 0.9f});
  const LossResult first = train_step(model, optimizer, x, labels, {.seed = 1}, 1);
  LossResult last;
  for (int step = 2; step <= 30; ++step) {
    last = train_step(model, optimizer, x, labels, {.seed = 1, .step = uint32_t(step)}, step);
  }
  EXPECT_GT(first.loss, 1.5);  // ~ln 10 at a small random init
  EXPECT_LT(last.loss, 0.1 * first.loss);
  EXPECT_EQ(last.correct, batch);
}

TEST_F(CudaModelTest, RejectsBadLabelsAndShapes) {
  CudaModel model(cuda_zoo_spec("mlp"));
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
