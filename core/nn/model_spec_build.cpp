// Layer descriptions at work: parameter counts, output shapes, and the CPU layers they describe.
#include <sstream>

#include "core/base/check.hpp"
#include "core/nn/layers_extra.hpp"
#include "core/nn/model_spec.hpp"

namespace syncopate {
namespace {

// "expected input (B,32,H,W), got (64,256)": the first dimension is the batch.
[[noreturn]] void bad_input(const LayerSpec& spec, const Shape& input,
                            const std::string& expected) {
  std::ostringstream message;
  message << "layer " << to_string(spec.kind) << ": expected input " << expected << ", got "
          << to_string(input);
  throw UserError(message.str());
}

std::string features(int64_t n) { return "(B,...," + std::to_string(n) + ")"; }

// (B, ..., in) -> (B, ..., out): layers that act on the last axis.
Shape last_axis(const LayerSpec& spec, const Shape& input, int64_t in, int64_t out) {
  if (input.size() < 2 || input.back() != in) bad_input(spec, input, features(in));
  Shape shape = input;
  shape.back() = out;
  return shape;
}

Shape dense_shape(const LayerSpec& spec, const Shape& input) {
  const int64_t batch = input[0];
  if (input.size() >= 3 && input.back() == spec.in)
    return last_axis(spec, input, spec.in, spec.out);
  if (batch == 0 || numel(input) / batch != spec.in) bad_input(spec, input, features(spec.in));
  return {batch, spec.out};
}

Shape window_shape(const LayerSpec& spec, const Shape& input, int64_t channels) {
  const std::string expected =
      channels > 0 ? "(B," + std::to_string(channels) + ",H,W)" : "(B,C,H,W)";
  if (input.size() != 4 || (channels > 0 && input[1] != channels)) bad_input(spec, input, expected);
  const int64_t h = input[2] + 2 * spec.padding - spec.kernel;
  const int64_t w = input[3] + 2 * spec.padding - spec.kernel;
  if (h < 0 || w < 0) {
    bad_input(
        spec, input,
        expected + " with H and W at least " + std::to_string(spec.kernel - 2 * spec.padding));
  }
  return {input[0], channels > 0 ? spec.out : input[1], h / spec.stride + 1, w / spec.stride + 1};
}

Shape residual_shape(const LayerSpec& spec, const Shape& input) {
  Shape shape = input;
  for (const LayerSpec& layer : spec.layers) shape = output_shape(layer, shape);
  if (shape != input) {
    throw UserError("layer residual: its layers turn " + to_string(input) + " into " +
                    to_string(shape) + "; the skip needs them to keep the shape");
  }
  return shape;
}

Shape embedding_shape(const LayerSpec& spec, const Shape& input) {
  if (input.size() != 2) bad_input(spec, input, "(B,T) token ids");
  if (spec.positions > 0 && input[1] > spec.positions) {
    bad_input(
        spec, input,
        "(B,T) with T at most " + std::to_string(spec.positions) + " (its learned positions)");
  }
  return {input[0], input[1], spec.out};
}

}  // namespace

int64_t num_params(const LayerSpec& spec) {
  const int64_t bias = spec.bias == Bias::kYes ? 1 : 0;
  switch (spec.kind) {
    case LayerKind::kDense:
      return spec.in * spec.out + bias * spec.out;
    case LayerKind::kConv2d:
      return spec.out * spec.in * spec.kernel * spec.kernel + bias * spec.out;
    case LayerKind::kLayerNorm:
      return 2 * spec.in;
    case LayerKind::kRmsNorm:
      return spec.in;
    case LayerKind::kEmbedding:
      return (spec.in + spec.positions) * spec.out;
    case LayerKind::kAttention:
      return 4 * spec.in * spec.in + bias * 4 * spec.in;
    case LayerKind::kSwiglu:
      return 3 * spec.in * spec.width + bias * (2 * spec.width + spec.in);
    case LayerKind::kResidual: {
      int64_t n = 0;
      for (const LayerSpec& layer : spec.layers) n += num_params(layer);
      return n;
    }
    case LayerKind::kBatchNorm2d:
    case LayerKind::kBottleneck:
    case LayerKind::kUnusedConv2d:
      return make_layer(spec)->num_params();
    default:
      return 0;
  }
}

Shape output_shape(const LayerSpec& spec, const Shape& input) {
  if (input.empty()) bad_input(spec, input, "a shape with a batch dimension");
  const int64_t batch = input[0];
  switch (spec.kind) {
    case LayerKind::kDense:
      return dense_shape(spec, input);
    case LayerKind::kConv2d:
      return window_shape(spec, input, spec.in);
    case LayerKind::kMaxPool2d:
    case LayerKind::kAvgPool2d:
      return window_shape(spec, input, 0);
    case LayerKind::kGlobalAvgPool:
      if (input.size() != 4) bad_input(spec, input, "(B,C,H,W)");
      return {batch, input[1]};
    case LayerKind::kFlatten:
      return {batch, batch == 0 ? 0 : numel(input) / batch};
    case LayerKind::kRelu:
    case LayerKind::kDropout:
    case LayerKind::kSigmoid:
    case LayerKind::kTanh:
    case LayerKind::kGelu:
      return input;
    case LayerKind::kLayerNorm:
    case LayerKind::kRmsNorm:
    case LayerKind::kSwiglu:
      return last_axis(spec, input, spec.in, spec.in);
    case LayerKind::kAttention:
      if (input.size() != 3 || input[2] != spec.in)
        bad_input(spec, input, "(B,T," + std::to_string(spec.in) + ")");
      return input;
    case LayerKind::kTiedDense:
      return last_axis(spec, input, spec.in, spec.out);
    case LayerKind::kEmbedding:
      return embedding_shape(spec, input);
    case LayerKind::kResidual:
      return residual_shape(spec, input);
    case LayerKind::kBatchNorm2d:
    case LayerKind::kBottleneck:
    case LayerKind::kUnusedConv2d:
      return make_layer(spec)->output_shape(input);
  }
  bad_input(spec, input, "a known layer kind");
}

std::unique_ptr<Layer> make_layer(const LayerSpec& s) {
  switch (s.kind) {
    case LayerKind::kDense:
      return dense(s.in, s.out, s.bias);
    case LayerKind::kConv2d:
      return conv2d(s.in, s.out, s.kernel, s.stride, s.padding, s.bias);
    case LayerKind::kMaxPool2d:
      return maxpool2d(s.kernel, s.stride, s.padding);
    case LayerKind::kAvgPool2d:
      return avgpool2d(s.kernel, s.stride);
    case LayerKind::kGlobalAvgPool:
      return global_avgpool();
    case LayerKind::kRelu:
      return relu();
    case LayerKind::kFlatten:
      return flatten();
    case LayerKind::kDropout:
      return dropout(s.rate);
    case LayerKind::kBatchNorm2d:
      return batchnorm2d(s.in);
    case LayerKind::kBottleneck:
      return bottleneck(s.in, s.width, s.out, s.stride);
    case LayerKind::kUnusedConv2d:
      return unused_conv2d(s.in, s.out, s.kernel);
    case LayerKind::kSigmoid:
      return sigmoid();
    case LayerKind::kTanh:
      return tanh_layer();
    case LayerKind::kGelu:
      return gelu();
    case LayerKind::kLayerNorm:
      return layernorm(s.in);
    case LayerKind::kRmsNorm:
      return rmsnorm(s.in);
    case LayerKind::kEmbedding:
      return embedding(s.in, s.out, s.positions);
    case LayerKind::kResidual: {
      std::vector<std::unique_ptr<Layer>> layers;
      for (const LayerSpec& layer : s.layers) layers.push_back(make_layer(layer));
      return skip(std::move(layers));
    }
    case LayerKind::kAttention:
      return attention(s.in, s.heads, s.bias);
    case LayerKind::kSwiglu:
      return swiglu(s.in, s.width, s.bias);
    case LayerKind::kTiedDense:
      return tied_dense(s.in, s.out);
  }
  SYNC_CHECK(false, "layer kind " << static_cast<int>(s.kind));
}

namespace {

bool cost_only(const LayerSpec& layer) {
  using enum LayerKind;
  if (layer.kind == kResidual) {
    for (const LayerSpec& inner : layer.layers) {
      if (cost_only(inner)) return true;
    }
  }
  return layer.kind == kBatchNorm2d || layer.kind == kBottleneck || layer.kind == kSwiglu ||
         layer.kind == kTiedDense;
}

}  // namespace

int first_cost_only_layer(const ModelSpec& spec) {
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (cost_only(spec.layers[i])) return static_cast<int>(i);
  }
  return -1;
}

int64_t num_params(const ModelSpec& spec) {
  int64_t n = 0;
  for (const LayerSpec& layer : spec.layers) n += num_params(layer);
  return n;
}

Shape output_shape(const ModelSpec& spec, int64_t batch) {
  Shape shape{batch};
  shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  for (const LayerSpec& layer : spec.layers) shape = output_shape(layer, shape);
  return shape;
}

}  // namespace syncopate
