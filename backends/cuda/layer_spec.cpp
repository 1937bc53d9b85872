// Layer descriptions of the CUDA model: shapes, parameter counts and the zoo's lists.
#include <sstream>

#include "backends/cuda/cuda_model.hpp"
#include "core/base/check.hpp"

namespace syncopate::cuda {
namespace {

[[noreturn]] void bad_input(const LayerSpec& spec, const Shape& input, const char* what) {
  std::ostringstream message;
  message << __FILE__ << ": layer " << to_string(spec.kind) << ": input "
          << syncopate::to_string(input) << " " << what;
  throw UserError(message.str());
}

void check_positive(int64_t value, const char* field) {
  if (value <= 0) {
    throw UserError(std::string(__FILE__) + ": " + field + ": must be positive, got " +
                    std::to_string(value));
  }
}

}  // namespace

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::kDense:
      return "dense";
    case LayerKind::kConv2d:
      return "conv2d";
    case LayerKind::kMaxPool2d:
      return "maxpool2d";
    case LayerKind::kAvgPool2d:
      return "avgpool2d";
    case LayerKind::kGlobalAvgPool:
      return "global_avgpool";
    case LayerKind::kRelu:
      return "relu";
    case LayerKind::kFlatten:
      return "flatten";
    case LayerKind::kDropout:
      return "dropout";
  }
  return "?";
}

LayerSpec dense_spec(int64_t in, int64_t out) {
  check_positive(in, "dense.in");
  check_positive(out, "dense.out");
  return {.kind = LayerKind::kDense, .in = in, .out = out};
}

LayerSpec conv2d_spec(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
                      int64_t padding) {
  check_positive(in_channels, "conv2d.in_channels");
  check_positive(out_channels, "conv2d.out_channels");
  check_positive(kernel, "conv2d.kernel");
  check_positive(stride, "conv2d.stride");
  check_positive(padding + 1, "conv2d.padding + 1");
  return {.kind = LayerKind::kConv2d,
          .in = in_channels,
          .out = out_channels,
          .kernel = kernel,
          .stride = stride,
          .padding = padding};
}

LayerSpec maxpool2d_spec(int64_t kernel, int64_t stride) {
  check_positive(kernel, "maxpool2d.kernel");
  check_positive(stride, "maxpool2d.stride");
  return {.kind = LayerKind::kMaxPool2d, .kernel = kernel, .stride = stride};
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
    throw UserError(std::string(__FILE__) + ": dropout.rate: must be in [0, 1), got " +
                    std::to_string(rate));
  }
  return {.kind = LayerKind::kDropout, .rate = rate};
}

int64_t num_params(const LayerSpec& spec) {
  switch (spec.kind) {
    case LayerKind::kDense:
      return spec.in * spec.out + spec.out;
    case LayerKind::kConv2d:
      return spec.out * spec.in * spec.kernel * spec.kernel + spec.out;
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
      const int64_t h = input[2] - spec.kernel, w = input[3] - spec.kernel;
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
  }
  bad_input(spec, input, "has an unknown layer kind");
}

ModelSpec cuda_zoo_spec(const std::string& name) {
  if (name == "mlp") {
    return {"mlp",
            {1, 28, 28},
            {flatten_spec(), dense_spec(784, 256), relu_spec(), dense_spec(256, 128), relu_spec(),
             dense_spec(128, 10)}};
  }
  if (name == "cnn") {  // LeNet-style, as core/nn/zoo.cpp
    return {"cnn",
            {1, 28, 28},
            {conv2d_spec(1, 32, 3, 1, 1), relu_spec(), maxpool2d_spec(2, 2),
             conv2d_spec(32, 64, 3, 1, 1), relu_spec(), maxpool2d_spec(2, 2), flatten_spec(),
             dense_spec(3136, 128), relu_spec(), dense_spec(128, 10)}};
  }
  throw UserError(std::string(__FILE__) + ": model: '" + name +
                  "' has no CUDA layer list; allowed: mlp, cnn");
}

}  // namespace syncopate::cuda
