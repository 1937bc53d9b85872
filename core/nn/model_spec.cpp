// Layer descriptions: the kinds' names and the checked factories.
#include "core/nn/model_spec.hpp"

#include <array>
#include <utility>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

constexpr std::array<std::pair<LayerKind, std::string_view>, 21> kKindNames = {{
    {LayerKind::kDense, "dense"},
    {LayerKind::kConv2d, "conv2d"},
    {LayerKind::kMaxPool2d, "maxpool2d"},
    {LayerKind::kAvgPool2d, "avgpool2d"},
    {LayerKind::kGlobalAvgPool, "global_avgpool"},
    {LayerKind::kRelu, "relu"},
    {LayerKind::kFlatten, "flatten"},
    {LayerKind::kDropout, "dropout"},
    {LayerKind::kBatchNorm2d, "batchnorm2d"},
    {LayerKind::kBottleneck, "bottleneck"},
    {LayerKind::kUnusedConv2d, "unused_conv2d"},
    {LayerKind::kSigmoid, "sigmoid"},
    {LayerKind::kTanh, "tanh"},
    {LayerKind::kGelu, "gelu"},
    {LayerKind::kLayerNorm, "layernorm"},
    {LayerKind::kRmsNorm, "rmsnorm"},
    {LayerKind::kEmbedding, "embedding"},
    {LayerKind::kResidual, "residual"},
    {LayerKind::kAttention, "attention"},
    {LayerKind::kSwiglu, "swiglu"},
    {LayerKind::kTiedDense, "tied_dense"},
}};

void check_positive(int64_t value, const char* field) {
  if (value <= 0) {
    throw UserError(std::string("layer ") + field + ": must be positive, got " +
                    std::to_string(value));
  }
}

}  // namespace

std::string_view to_string(LayerKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  return "?";
}

std::optional<LayerKind> parse_layer_kind(std::string_view name) {
  for (const auto& [kind, n] : kKindNames) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

LayerSpec dense_spec(int64_t in, int64_t out, Bias bias) {
  check_positive(in, "dense.in");
  check_positive(out, "dense.out");
  return {.kind = LayerKind::kDense, .in = in, .out = out, .bias = bias};
}

LayerSpec conv2d_spec(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
                      int64_t padding, Bias bias) {
  check_positive(in_channels, "conv2d.in");
  check_positive(out_channels, "conv2d.out");
  check_positive(kernel, "conv2d.kernel");
  check_positive(stride, "conv2d.stride");
  check_positive(padding + 1, "conv2d.padding + 1");
  return {.kind = LayerKind::kConv2d,
          .in = in_channels,
          .out = out_channels,
          .kernel = kernel,
          .stride = stride,
          .padding = padding,
          .bias = bias};
}

LayerSpec maxpool2d_spec(int64_t kernel, int64_t stride, int64_t padding) {
  check_positive(kernel, "maxpool2d.kernel");
  check_positive(stride, "maxpool2d.stride");
  check_positive(padding + 1, "maxpool2d.padding + 1");
  return {.kind = LayerKind::kMaxPool2d, .kernel = kernel, .stride = stride, .padding = padding};
}

LayerSpec avgpool2d_spec(int64_t kernel, int64_t stride) {
  check_positive(kernel, "avgpool2d.kernel");
  check_positive(stride, "avgpool2d.stride");
  return {.kind = LayerKind::kAvgPool2d, .kernel = kernel, .stride = stride};
}

LayerSpec global_avgpool_spec() { return {.kind = LayerKind::kGlobalAvgPool}; }
LayerSpec relu_spec() { return {.kind = LayerKind::kRelu}; }
LayerSpec flatten_spec() { return {.kind = LayerKind::kFlatten}; }

LayerSpec dropout_spec(float rate) {
  if (!(rate >= 0.0f && rate < 1.0f)) {
    throw UserError("layer dropout.rate: must be in [0, 1), got " + std::to_string(rate));
  }
  return {.kind = LayerKind::kDropout, .rate = rate};
}

LayerSpec batchnorm2d_spec(int64_t channels) {
  check_positive(channels, "batchnorm2d.in");
  return {.kind = LayerKind::kBatchNorm2d, .in = channels};
}

LayerSpec bottleneck_spec(int64_t in, int64_t width, int64_t out, int64_t stride) {
  check_positive(in, "bottleneck.in");
  check_positive(width, "bottleneck.width");
  check_positive(out, "bottleneck.out");
  check_positive(stride, "bottleneck.stride");
  return {.kind = LayerKind::kBottleneck, .in = in, .out = out, .width = width, .stride = stride};
}

LayerSpec unused_conv2d_spec(int64_t in_channels, int64_t out_channels, int64_t kernel) {
  check_positive(in_channels, "unused_conv2d.in");
  check_positive(out_channels, "unused_conv2d.out");
  check_positive(kernel, "unused_conv2d.kernel");
  return {
      .kind = LayerKind::kUnusedConv2d, .in = in_channels, .out = out_channels, .kernel = kernel};
}

LayerSpec sigmoid_spec() { return {.kind = LayerKind::kSigmoid}; }
LayerSpec tanh_spec() { return {.kind = LayerKind::kTanh}; }
LayerSpec gelu_spec() { return {.kind = LayerKind::kGelu}; }

LayerSpec layernorm_spec(int64_t features) {
  check_positive(features, "layernorm.in");
  return {.kind = LayerKind::kLayerNorm, .in = features};
}

LayerSpec rmsnorm_spec(int64_t features) {
  check_positive(features, "rmsnorm.in");
  return {.kind = LayerKind::kRmsNorm, .in = features};
}

LayerSpec embedding_spec(int64_t vocabulary, int64_t width, int64_t positions) {
  check_positive(vocabulary, "embedding.vocabulary");
  check_positive(width, "embedding.width");
  check_positive(positions + 1, "embedding.positions + 1");
  return {.kind = LayerKind::kEmbedding, .in = vocabulary, .out = width, .positions = positions};
}

LayerSpec residual_spec(std::vector<LayerSpec> layers) {
  if (layers.empty()) throw UserError("layer residual.layers: needs at least one layer");
  return {.kind = LayerKind::kResidual, .layers = std::move(layers)};
}

LayerSpec attention_spec(int64_t width, int64_t heads, Bias bias) {
  check_positive(width, "attention.width");
  check_positive(heads, "attention.heads");
  if (width % heads != 0) {
    throw UserError("layer attention.heads: " + std::to_string(heads) +
                    " heads do not divide the width " + std::to_string(width));
  }
  return {.kind = LayerKind::kAttention, .in = width, .bias = bias, .heads = heads};
}

LayerSpec swiglu_spec(int64_t width, int64_t hidden, Bias bias) {
  check_positive(width, "swiglu.width");
  check_positive(hidden, "swiglu.hidden");
  return {.kind = LayerKind::kSwiglu, .in = width, .width = hidden, .bias = bias};
}

LayerSpec tied_dense_spec(int64_t width, int64_t vocabulary) {
  check_positive(width, "tied_dense.width");
  check_positive(vocabulary, "tied_dense.vocabulary");
  return {.kind = LayerKind::kTiedDense, .in = width, .out = vocabulary};
}

}  // namespace syncopate
