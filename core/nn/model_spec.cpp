// Layer descriptions: names, checked factories, parameter counts, shapes, and the CPU layers.
#include "core/nn/model_spec.hpp"

#include <array>
#include <sstream>
#include <utility>

#include "core/base/check.hpp"
#include "core/nn/layers_extra.hpp"

namespace syncopate {
namespace {

constexpr std::array<std::pair<LayerKind, std::string_view>, 11> kKindNames = {{
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
}};

[[noreturn]] void bad_input(const LayerSpec& spec, const Shape& input, const char* what) {
  std::ostringstream message;
  message << "layer " << to_string(spec.kind) << ": input " << to_string(input) << " " << what;
  throw UserError(message.str());
}

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

LayerSpec dense_spec(int64_t in, int64_t out) {
  check_positive(in, "dense.in");
  check_positive(out, "dense.out");
  return {.kind = LayerKind::kDense, .in = in, .out = out};
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

int64_t num_params(const LayerSpec& spec) {
  switch (spec.kind) {
    case LayerKind::kDense:
      return spec.in * spec.out + spec.out;
    case LayerKind::kConv2d:
      return spec.out * spec.in * spec.kernel * spec.kernel +
             (spec.bias == Bias::kYes ? spec.out : 0);
    case LayerKind::kBatchNorm2d:
    case LayerKind::kBottleneck:
    case LayerKind::kUnusedConv2d:
      return make_layer(spec)->num_params();
    default:
      return 0;
  }
}

Shape output_shape(const LayerSpec& spec, const Shape& input) {
  if (input.empty()) bad_input(spec, input, "has no batch dimension");
  const int64_t batch = input[0];
  switch (spec.kind) {
    case LayerKind::kDense:
      if (batch == 0 || numel(input) / batch != spec.in) bad_input(spec, input, "!= (B, in)");
      return {batch, spec.out};
    case LayerKind::kConv2d: {
      if (input.size() != 4 || input[1] != spec.in) bad_input(spec, input, "!= (B, in, H, W)");
      const int64_t h = input[2] + 2 * spec.padding - spec.kernel;
      const int64_t w = input[3] + 2 * spec.padding - spec.kernel;
      if (h < 0 || w < 0) bad_input(spec, input, "is smaller than the kernel");
      return {batch, spec.out, h / spec.stride + 1, w / spec.stride + 1};
    }
    case LayerKind::kMaxPool2d:
    case LayerKind::kAvgPool2d: {
      if (input.size() != 4) bad_input(spec, input, "!= (B, C, H, W)");
      const int64_t h = input[2] + 2 * spec.padding - spec.kernel;
      const int64_t w = input[3] + 2 * spec.padding - spec.kernel;
      if (h < 0 || w < 0) bad_input(spec, input, "is smaller than the window");
      return {batch, input[1], h / spec.stride + 1, w / spec.stride + 1};
    }
    case LayerKind::kGlobalAvgPool:
      if (input.size() != 4) bad_input(spec, input, "!= (B, C, H, W)");
      return {batch, input[1]};
    case LayerKind::kFlatten:
      return {batch, batch == 0 ? 0 : numel(input) / batch};
    case LayerKind::kRelu:
    case LayerKind::kDropout:
      return input;
    case LayerKind::kBatchNorm2d:
    case LayerKind::kBottleneck:
    case LayerKind::kUnusedConv2d:
      return make_layer(spec)->output_shape(input);
  }
  bad_input(spec, input, "has an unknown layer kind");
}

std::unique_ptr<Layer> make_layer(const LayerSpec& s) {
  switch (s.kind) {
    case LayerKind::kDense:
      return dense(s.in, s.out);
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
  }
  SYNC_CHECK(false, "layer kind " << static_cast<int>(s.kind));
}

}  // namespace syncopate
