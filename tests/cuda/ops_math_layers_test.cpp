// The per-element math of the CUDA kernels for sigmoid, tanh, GELU, LayerNorm, RMSNorm and the
// embedding (ops_math_layers.hpp), run on the host one call per output index as the kernels
// call it, against the CPU layers' forward and backward: bit for bit. Needs no GPU.
#include "backends/cuda/ops_math_layers.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/nn/layers_extra.hpp"
#include "core/nn/model_spec.hpp"
#include "core/tensor/tensor.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

using reference::random_floats;

// A CPU layer with its own parameters and gradients, both given.
struct BoundLayer {
  std::unique_ptr<Layer> layer;
  std::vector<float> params, grads;
  BoundLayer(const LayerSpec& spec, std::vector<float> p, std::vector<float> g)
      : layer(make_layer(spec)), params(std::move(p)), grads(std::move(g)) {
    layer->bind(params, grads);
  }
};

void expect_same_bits(std::span<const float> got, std::span<const float> want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
}

TEST(CudaHostMath, SmoothActivationsAreTheCpuLayersBitForBit) {
  const Shape shape = {3, 5, 7};
  const auto x = random_floats(numel(shape), 21, -6.0f, 6.0f);
  const auto dy = random_floats(numel(shape), 22);
  const Tensor xt(shape, x), dyt(shape, dy);
  using Forward = float (*)(const float*, int64_t);
  using Backward = float (*)(const float*, const float*, int64_t);
  struct Case {
    LayerSpec spec;
    Forward forward;
    Backward backward;
    bool from_output;  // the slope reads the forward output, not the input
  };
  const Case cases[] = {{sigmoid_spec(), math::sigmoid_at, math::sigmoid_backward_at, true},
                        {tanh_spec(), math::tanh_at, math::tanh_backward_at, true},
                        {gelu_spec(), math::gelu_at, math::gelu_backward_at, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(to_string(c.spec.kind)));
    BoundLayer cpu(c.spec, {}, {});
    Tensor y(shape), dx(shape);
    cpu.layer->forward(xt, y, {});
    cpu.layer->backward(xt, y, dyt, &dx);
    std::vector<float> got_y(x.size()), got_dx(x.size());
    for (size_t i = 0; i < x.size(); ++i) got_y[i] = c.forward(x.data(), int64_t(i));
    const float* slope_input = c.from_output ? got_y.data() : x.data();
    for (size_t i = 0; i < x.size(); ++i) {
      got_dx[i] = c.backward(slope_input, dy.data(), int64_t(i));
    }
    expect_same_bits(got_y, y.span());
    expect_same_bits(got_dx, dx.span());
  }
  // GELU is the tanh form: gelu(1) = 0.8411920 (the erf form gives 0.8413447).
  const float one = 1.0f;
  EXPECT_NEAR(math::gelu_at(&one, 0), 0.8411920f, 1e-6f);
}

TEST(CudaHostMath, NormalisationsAreTheCpuLayersBitForBit) {
  const int64_t rows = 6, features = 13;
  const Shape shape = {2, 3, features};
  // An offset mean, so that centring matters.
  const auto x = random_floats(rows * features, 31, 1.0f, 4.0f);
  const auto dy = random_floats(rows * features, 32);
  for (const bool centre : {true, false}) {
    SCOPED_TRACE(centre ? "layernorm" : "rmsnorm");
    const LayerSpec spec = centre ? layernorm_spec(features) : rmsnorm_spec(features);
    const int64_t p = num_params(spec);
    const auto params = random_floats(p, 33, 0.5f, 1.5f);
    const auto grads0 = random_floats(p, 34);  // gradients accumulate onto these
    BoundLayer cpu(spec, params, grads0);
    Tensor y(shape), dx(shape);
    const Tensor xt(shape, x), dyt(shape, dy);
    cpu.layer->forward(xt, y, {});
    cpu.layer->backward(xt, y, dyt, &dx);

    std::vector<float> stats(2 * rows), got_y(x.size()), got_dx(x.size()), got_g(grads0.size());
    for (int64_t r = 0; r < rows; ++r)
      math::norm_stats_row(x.data(), features, centre, r, stats.data());
    for (size_t i = 0; i < x.size(); ++i) {
      got_y[i] = math::norm_at(x.data(), stats.data(), params.data(), features, centre, int64_t(i));
    }
    for (int64_t r = 0; r < rows; ++r) {
      math::norm_backward_row(x.data(), stats.data(), params.data(), dy.data(), features, centre, r,
                              got_dx.data());
    }
    for (int64_t j = 0; j < p; ++j) {
      got_g[size_t(j)] = math::norm_param_grad_at(x.data(), stats.data(), dy.data(), grads0.data(),
                                                  rows, features, j);
    }
    expect_same_bits(got_y, y.span());
    expect_same_bits(got_dx, dx.span());
    expect_same_bits(got_g, cpu.grads);
  }
}

TEST(CudaHostMath, TokenRowsGroupThePositionsOfEachToken) {
  const std::vector<float> ids = {2, 0, 2, 3, 2, 0};
  const math::TokenRows t = math::token_rows(ids.data(), 6, 5);
  EXPECT_EQ(t.offsets, (std::vector<int32_t>{0, 2, 2, 5, 6, 6}));
  EXPECT_EQ(t.rows, (std::vector<int32_t>{1, 5, 0, 2, 4, 3}));
}

TEST(CudaHostMath, EmbeddingIsTheCpuLayerBitForBit) {
  const int64_t vocabulary = 7, width = 5, batch = 3, steps = 4;
  for (const int64_t positions : {int64_t{0}, int64_t{6}}) {
    SCOPED_TRACE(positions);
    const LayerSpec spec = embedding_spec(vocabulary, width, positions);
    const int64_t p = num_params(spec);
    const auto params = random_floats(p, 41);
    const auto grads0 = random_floats(p, 42);
    // Repeated ids, so that the scatter-add sums several positions into one row.
    std::vector<float> ids(batch * steps);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = float((i * 5 + i / 3) % 4);
    const Shape in = {batch, steps}, out = {batch, steps, width};
    const auto dy = random_floats(numel(out), 43);
    BoundLayer cpu(spec, params, grads0);
    Tensor y(out), dx(in);
    const Tensor xt(in, ids), dyt(out, dy);
    cpu.layer->forward(xt, y, {});
    cpu.layer->backward(xt, y, dyt, &dx);

    const math::EmbeddingGeometry g{vocabulary, width, positions, batch * steps, steps};
    std::vector<float> got_y(size_t(numel(out))), got_g(grads0.size());
    for (size_t i = 0; i < got_y.size(); ++i) {
      got_y[i] = math::embedding_at(ids.data(), params.data(), g, int64_t(i));
    }
    const math::TokenRows rows = math::token_rows(ids.data(), batch * steps, vocabulary);
    for (int64_t j = 0; j < p; ++j) {
      got_g[size_t(j)] = math::embedding_grad_at(dy.data(), rows.offsets.data(), rows.rows.data(),
                                                 grads0.data(), g, j);
    }
    expect_same_bits(got_y, y.span());
    expect_same_bits(got_g, cpu.grads);
  }
}

}  // namespace
}  // namespace syncopate::cuda
