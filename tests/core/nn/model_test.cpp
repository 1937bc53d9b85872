// The flat-buffer model: views, parameter ranges, finite-difference backward, shape-only costs,
// initialisation, layer fit.
#include "core/nn/model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/check.hpp"
#include "core/nn/loss.hpp"
#include "tests/core/nn/layers_testing.hpp"

namespace syncopate {
namespace {

using testing::random_floats;

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

std::vector<float> run_forward(Model& model, const Tensor& x) {
  return copy(model.forward(x, {}).span());
}

TEST(Model, ParameterViewsAliasTheFlatBuffer) {
  auto model = make_model("cnn");
  model->init(3);
  const Tensor x({2, 1, 28, 28}, random_floats(2 * 784, 1));
  const auto before = run_forward(*model, x);
  // A weight of the first dense layer (layer 7), changed through params().
  const BlockRange r = model->param_range(7);
  model->params()[r.offset + 100] += 5.0f;
  EXPECT_NE(run_forward(*model, x), before);
  model->params()[r.offset + 100] -= 5.0f;
  EXPECT_EQ(run_forward(*model, x), before);
  // A bias of the last layer shifts that logit by exactly the change.
  const BlockRange last = model->param_range(model->num_layers() - 1);
  model->params()[last.offset + last.count - 1] += 1.0f;  // bias of class 9
  const auto after = run_forward(*model, x);
  EXPECT_NEAR(after[9], before[9] + 1.0f, 1e-5);
  EXPECT_EQ(after[8], before[8]);
}

TEST(Model, ParamRangesCoverTheBufferContiguously) {
  for (const std::string& name : model_names()) {
    auto model = make_model(name, Storage::kShapeOnly);
    size_t offset = 0;
    for (int i = 0; i < model->num_layers(); ++i) {
      const BlockRange r = model->param_range(i);
      EXPECT_EQ(r.offset, offset) << name << " layer " << i;
      EXPECT_EQ(static_cast<int64_t>(r.count), model->layer(i).num_params());
      offset += r.count;
    }
    EXPECT_EQ(static_cast<int64_t>(offset), model->num_params()) << name;
    EXPECT_TRUE(model->params().empty());
    EXPECT_TRUE(model->grads().empty());
  }
  auto real = make_model("mlp");
  EXPECT_EQ(static_cast<int64_t>(real->params().size()), real->num_params());
  EXPECT_EQ(static_cast<int64_t>(real->grads().size()), real->num_params());
}

// Drives the per-layer API and compares the flat gradient buffer with central differences of the
// float loss (a smooth model: conv -> flatten -> dense, softmax cross-entropy).
TEST(Model, LayerByLayerBackwardMatchesFiniteDifferences) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(conv2d(1, 2, 3, 1, 1));
  layers.push_back(flatten());
  layers.push_back(dense(2 * 5 * 5, 3));
  Model model("tiny", {1, 5, 5}, std::move(layers));
  model.init(9);
  const Tensor x({2, 1, 5, 5}, random_floats(50, 2));
  const Tensor labels({2}, {1.0f, 2.0f});
  auto loss = [&] { return softmax_cross_entropy(model.forward(x, {}), labels, nullptr).loss; };
  model.set_batch(2);
  std::memcpy(model.input().data(), x.data(), 50 * sizeof(float));
  for (int i = 0; i < model.num_layers(); ++i) model.forward_layer(i, {});
  softmax_cross_entropy(model.output(), labels, &model.output_grad());
  model.zero_grads();
  for (int i = model.num_layers() - 1; i >= 0; --i) model.backward_layer(i);
  const std::vector<float> grads = copy(model.grads());
  std::vector<double> fd(grads.size());
  const float eps = 1e-2f;
  for (size_t i = 0; i < grads.size(); ++i) {
    const float saved = model.params()[i];
    model.params()[i] = saved + eps;
    const double plus = loss();
    model.params()[i] = saved - eps;
    const double minus = loss();
    model.params()[i] = saved;
    fd[i] = (plus - minus) / (2 * eps);
  }
  EXPECT_LT(testing::normalised_error(testing::to_double(grads), fd), 1e-3);
  // A second backward accumulates: the gradients double.
  for (int i = model.num_layers() - 1; i >= 0; --i) model.backward_layer(i);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_FLOAT_EQ(model.grads()[i], 2 * grads[i]);
  model.zero_grads();
  for (float g : model.grads()) EXPECT_EQ(g, 0.0f);
}

// A layer that only passes calls on: it never absorbs a ReLU, so a model with it runs a ReLU
// before it as a layer of its own.
class Unfused final : public Layer {
 public:
  explicit Unfused(std::unique_ptr<Layer> inner) : inner_(std::move(inner)) {}
  std::string_view kind() const override { return inner_->kind(); }
  Shape output_shape(const Shape& input) const override { return inner_->output_shape(input); }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override {
    inner_->forward(x, y, ctx);
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    inner_->backward(x, y, dy, dx);
  }
  Cost forward_cost(const Shape& input) const override { return inner_->forward_cost(input); }
  Cost backward_cost(const Shape& input, bool input_grad) const override {
    return inner_->backward_cost(input, input_grad);
  }

 private:
  std::unique_ptr<Layer> inner_;
};

// (conv -> relu -> pool) twice, then dense, with the pools absorbing their ReLUs and streaming
// their input gradients into the convolutions, or not; without the ReLUs (conv -> pool) when
// !relus. Each pool's output gradient is dense (a convolution or a dense layer follows), so a
// wrong mask shows.
std::unique_ptr<Model> conv_pool_model(bool fuse, bool relus = true) {
  std::vector<std::unique_ptr<Layer>> layers;
  auto block = [&](int64_t in, std::unique_ptr<Layer> pool) {
    layers.push_back(conv2d(in, 4, 3, 1, 1));
    if (relus) layers.push_back(relu());
    layers.push_back(fuse ? std::move(pool) : std::make_unique<Unfused>(std::move(pool)));
  };
  block(2, maxpool2d(2, 2));     // the 2x2 fast path: 10x10 -> 5x5
  block(4, maxpool2d(3, 2, 1));  // overlapping windows with padding: 5x5 -> 3x3
  layers.push_back(flatten());
  layers.push_back(dense(4 * 3 * 3, 5));
  return std::make_unique<Model>("conv_pool", Shape{2, 10, 10}, std::move(layers));
}

// Values on a coarse grid, so that windows hold ties, zeros and all-negative maxima.
std::vector<float> coarse(size_t n, uint32_t seed) {
  std::vector<float> v = random_floats(n, seed);
  for (float& x : v) x = std::round(x * 3.0f) / 2.0f;
  return v;
}

// One training step's output and parameter gradients, on coarse input and weights (many
// pre-ReLU values tie or are exactly 0).
struct StepResult {
  std::vector<float> output, grads;
};
StepResult coarse_step(Model& m) {
  const int64_t batch = 3;
  const Tensor labels({batch}, {0.0f, 3.0f, 4.0f});
  const std::vector<float> x = coarse(static_cast<size_t>(batch * 200), 4);
  m.init(5);
  const std::vector<float> w = coarse(m.params().size(), 6);
  std::copy(w.begin(), w.end(), m.params().begin());
  m.set_batch(batch);
  std::copy(x.begin(), x.end(), m.input().data());
  for (int i = 0; i < m.num_layers(); ++i) m.forward_layer(i, {});
  softmax_cross_entropy(m.output(), labels, &m.output_grad());
  m.zero_grads();
  for (int i = m.num_layers() - 1; i >= 0; --i) m.backward_layer(i);
  return {copy(m.output().span()), copy(m.grads())};
}

TEST(Model, MaxPoolAbsorbsTheReluBeforeItWithTheSameBits) {
  auto fused = conv_pool_model(true);
  auto plain = conv_pool_model(false);
  for (int i = 0; i < fused->num_layers(); ++i)
    EXPECT_EQ(fused->relu_absorbed(i), i == 1 || i == 4);
  for (int i = 0; i < plain->num_layers(); ++i) EXPECT_FALSE(plain->relu_absorbed(i));
  const StepResult a = coarse_step(*fused), b = coarse_step(*plain);
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.grads, b.grads);
  // The gradients are not trivially equal: the convolution's reach through both pools.
  const BlockRange conv = fused->param_range(0);
  EXPECT_TRUE(std::any_of(a.grads.begin() + static_cast<std::ptrdiff_t>(conv.offset),
                          a.grads.begin() + static_cast<std::ptrdiff_t>(conv.offset + conv.count),
                          [](float g) { return g != 0.0f; }));
}

// Each pool's backward runs inside the convolution before it, image by image: the first one
// (which computes no input gradient) and the second (which does), with and without an absorbed
// ReLU between them. The same bits as the layers run one by one.
TEST(Model, PoolsStreamTheirInputGradientIntoTheConvolutionWithTheSameBits) {
  for (bool relus : {true, false}) {
    auto fused = conv_pool_model(true, relus);
    auto plain = conv_pool_model(false, relus);
    const int block = relus ? 3 : 2;  // layers per (conv, [relu,] pool)
    for (int i = 0; i < fused->num_layers(); ++i) {
      EXPECT_EQ(fused->backward_runs_in(i), i < 2 * block ? i / block * block : i) << i;
      EXPECT_EQ(plain->backward_runs_in(i), i);
    }
    const StepResult a = coarse_step(*fused), b = coarse_step(*plain);
    EXPECT_EQ(a.output, b.output) << relus;
    EXPECT_EQ(a.grads, b.grads) << relus;
    for (int conv : {0, block}) {
      const BlockRange r = fused->param_range(conv);
      EXPECT_TRUE(std::any_of(a.grads.begin() + static_cast<std::ptrdiff_t>(r.offset),
                              a.grads.begin() + static_cast<std::ptrdiff_t>(r.offset + r.count),
                              [](float g) { return g != 0.0f; }));
    }
  }
  // A convolution on the Winograd path (8 input channels or more) does not take one.
  auto cnn = make_model("cnn");  // conv(1, 32), relu, pool, conv(32, 64), relu, pool, ...
  EXPECT_EQ(cnn->backward_runs_in(2), 0);
  EXPECT_EQ(cnn->backward_runs_in(1), 0);
  EXPECT_EQ(cnn->backward_runs_in(5), 5);
  EXPECT_EQ(cnn->backward_runs_in(4), 5);
}

TEST(Model, InputGradientsOnlyBehindTheFirstParameterLayer) {
  auto model = make_model("mlp");  // flatten, dense, relu, dense, relu, dense
  EXPECT_FALSE(model->needs_input_grad(0));
  EXPECT_FALSE(model->needs_input_grad(1));
  EXPECT_TRUE(model->needs_input_grad(2));
  model->set_batch(64);
  EXPECT_EQ(model->backward_cost(0).flops, 0);
  EXPECT_EQ(model->backward_cost(1).flops, 2.0 * 64 * 784 * 256 + 64 * 256);  // dW and db only
  EXPECT_EQ(model->backward_cost(3).flops, 4.0 * 64 * 256 * 128 + 64 * 128);
}

TEST(Model, ShapeOnlyGivesTheSameShapesAndCostsAsReal) {
  // nfnet (20 M parameters) only at a small batch, to keep the test fast.
  for (const char* name : {"mlp", "cnn", "nfnet"}) {
    auto real = make_model(name, Storage::kReal);
    auto shape_only = make_model(name, Storage::kShapeOnly);
    EXPECT_EQ(real->num_params(), shape_only->num_params());
    for (int64_t batch : {int64_t{2}, std::string(name) == "nfnet" ? int64_t{2} : int64_t{16}}) {
      real->set_batch(batch);
      shape_only->set_batch(batch);
      EXPECT_TRUE(shape_only->input().shape_only());
      EXPECT_EQ(shape_only->output().shape(), real->output().shape());
      EXPECT_EQ(real->output_shape(batch), real->output().shape());
      double forward = 0, backward = 0;
      for (int i = 0; i < real->num_layers(); ++i) {
        const Cost a = real->forward_cost(i), b = shape_only->forward_cost(i);
        EXPECT_EQ(a.flops, b.flops);
        EXPECT_EQ(a.bytes, b.bytes);
        EXPECT_EQ(a.kind, b.kind);
        const Cost c = real->backward_cost(i), d = shape_only->backward_cost(i);
        EXPECT_EQ(c.flops, d.flops);
        EXPECT_EQ(c.bytes, d.bytes);
        forward += a.flops;
        backward += c.flops;
        // The driving code runs on a shape-only model without doing math.
        shape_only->forward_layer(i, {});
      }
      for (int i = shape_only->num_layers() - 1; i >= 0; --i) shape_only->backward_layer(i);
      EXPECT_DOUBLE_EQ(real->forward_flops(batch), forward) << name;
      EXPECT_DOUBLE_EQ(real->backward_flops(batch), backward) << name;
    }
  }
}

// A shape-only model keeps its layer costs per batch size: each batch change gives the costs
// a fresh model computes at that batch, with layer keys of the current shapes.
TEST(Model, ShapeOnlyCostsFollowTheBatch) {
  auto kept = make_model("resnet50", Storage::kShapeOnly);
  for (int64_t batch : {int64_t{1}, int64_t{3}, int64_t{3}, int64_t{1}}) {
    kept->set_batch(batch);
    auto fresh = make_model("resnet50", Storage::kShapeOnly);
    fresh->set_batch(batch);
    for (int repeat = 0; repeat < 2; ++repeat) {
      for (int i = 0; i < kept->num_layers(); ++i) {
        const Cost a = kept->forward_cost(i), b = fresh->forward_cost(i);
        EXPECT_EQ(a.flops, b.flops) << batch << " layer " << i;
        EXPECT_EQ(a.bytes, b.bytes);
        ASSERT_FALSE(a.layer.input.empty());
        EXPECT_EQ(a.layer.input[0], batch);
        const Cost c = kept->backward_cost(i), d = fresh->backward_cost(i);
        EXPECT_EQ(c.flops, d.flops) << batch << " layer " << i;
        EXPECT_EQ(c.bytes, d.bytes);
      }
    }
  }
}

TEST(Model, InitIsDeterministicPerSeedWithHeAndXavierScales) {
  auto a = make_model("cnn"), b = make_model("cnn");
  a->init(5);
  b->init(5);
  EXPECT_EQ(copy(a->params()), copy(b->params()));
  b->init(6);
  EXPECT_NE(copy(a->params()), copy(b->params()));
  // Layer 7 is dense(3136, 128) followed by ReLU: He, std sqrt(2/3136); its bias is zero.
  // Layer 9 is dense(128, 10), the last: Xavier, std sqrt(2/(128+10)).
  auto sample_std = [&](int layer, size_t count) {
    const BlockRange r = a->param_range(layer);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < count; ++i) {
      const double v = a->params()[r.offset + i];
      sum += v;
      sq += v * v;
    }
    const double mean = sum / static_cast<double>(count);
    return std::sqrt(sq / static_cast<double>(count) - mean * mean);
  };
  EXPECT_NEAR(sample_std(7, 3136 * 128), std::sqrt(2.0 / 3136), 0.01 * std::sqrt(2.0 / 3136));
  EXPECT_NEAR(sample_std(9, 1280), std::sqrt(2.0 / 138), 0.08 * std::sqrt(2.0 / 138));
  // Conv layer 0 (followed by ReLU): He over fan_in 9.
  EXPECT_NEAR(sample_std(0, 288), std::sqrt(2.0 / 9), 0.15 * std::sqrt(2.0 / 9));
  for (int layer : {0, 3, 7, 9}) {
    const BlockRange r = a->param_range(layer);
    const int64_t outputs = layer == 0 ? 32 : layer == 3 ? 64 : layer == 7 ? 128 : 10;
    for (int64_t i = 0; i < outputs; ++i) {
      EXPECT_EQ(a->params()[r.offset + r.count - 1 - static_cast<size_t>(i)], 0.0f);
    }
  }
}

// Samples do not interact: a batch of 2 gives the first two outputs of a batch of 5, whether the
// batch shrinks or grows (the activations are resized, not reallocated, on the way down).
TEST(Model, OutputsDoNotDependOnTheBatch) {
  auto model = make_model("cnn");
  model->init(4);
  const auto values = random_floats(5 * 784, 8);
  const Tensor five({5, 1, 28, 28}, values);
  const Tensor two({2, 1, 28, 28}, std::vector<float>(values.begin(), values.begin() + 2 * 784));
  const auto out5 = run_forward(*model, five);
  const auto out2 = run_forward(*model, two);
  ASSERT_EQ(out5.size(), 50u);
  ASSERT_EQ(out2.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_NEAR(out2[i], out5[i], 1e-5f * (1 + std::abs(out5[i])));
  EXPECT_EQ(run_forward(*model, five), out5);
}

TEST(Model, RejectsLayersThatDoNotFitTogether) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(flatten());
  layers.push_back(dense(100, 10));
  EXPECT_THROW(Model("bad", {1, 28, 28}, std::move(layers)), UserError);
}

}  // namespace
}  // namespace syncopate
