#pragma once
// One description of a model, from which every build of it is made: the CPU Model with real
// parameters, the shape-only (cost-only) Model (make_model, core/nn/model.hpp) and the CUDA
// model (backends/cuda). A description is plain data: the sample shape and a list of layers,
// each a kind with the parameters of that kind.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/nn/layer.hpp"

namespace syncopate {

enum class LayerKind {
  kDense,
  kConv2d,
  kMaxPool2d,
  kAvgPool2d,
  kGlobalAvgPool,
  kRelu,
  kFlatten,
  kDropout,
  kBatchNorm2d,
  kBottleneck,
  kUnusedConv2d,
};

// "dense", "conv2d", "maxpool2d", "avgpool2d", "global_avgpool", "relu", "flatten", "dropout",
// "batchnorm2d", "bottleneck", "unused_conv2d": the CPU Layer::kind() names, except that a
// bottleneck's CPU layer is a "residual" (core/nn/layers_extra.hpp).
std::string_view to_string(LayerKind kind);
std::optional<LayerKind> parse_layer_kind(std::string_view name);

// A layer: its kind and that kind's parameters (the others keep their defaults, unused):
//   dense           in, out: features
//   conv2d          in, out: channels; kernel (square), stride, padding (zeros), bias
//   maxpool2d       kernel, stride, padding (never wins the max)
//   avgpool2d       kernel, stride
//   dropout         rate
//   batchnorm2d     in: channels (cost-only, see core/nn/layers_extra.hpp)
//   bottleneck      in, width, out: channels; stride (torchvision's ResNet block)
//   unused_conv2d   in, out: channels; kernel
//   global_avgpool, relu, flatten: none
// The *_spec factories below check the values (UserError).
struct LayerSpec {
  LayerKind kind = LayerKind::kRelu;
  int64_t in = 0, out = 0;
  int64_t width = 0;
  int64_t kernel = 0, stride = 1, padding = 0;
  Bias bias = Bias::kYes;
  float rate = 0.0f;
};

LayerSpec dense_spec(int64_t in, int64_t out);
LayerSpec conv2d_spec(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1,
                      int64_t padding = 0, Bias bias = Bias::kYes);
LayerSpec maxpool2d_spec(int64_t kernel, int64_t stride, int64_t padding = 0);
LayerSpec avgpool2d_spec(int64_t kernel, int64_t stride);
LayerSpec global_avgpool_spec();
LayerSpec relu_spec();
LayerSpec flatten_spec();
LayerSpec dropout_spec(float rate);
LayerSpec batchnorm2d_spec(int64_t channels);
LayerSpec bottleneck_spec(int64_t in, int64_t width, int64_t out, int64_t stride);
LayerSpec unused_conv2d_spec(int64_t in_channels, int64_t out_channels, int64_t kernel);

// The layer's parameter count (weights, then bias, as its CPU layer lays them out).
int64_t num_params(const LayerSpec& spec);
// Input and output include the batch; throws UserError if the input does not fit the layer.
Shape output_shape(const LayerSpec& spec, const Shape& input);
// The CPU layer it describes.
std::unique_ptr<Layer> make_layer(const LayerSpec& spec);

struct ModelSpec {
  std::string name;
  Shape sample_shape;  // one sample's input shape, without the batch, e.g. {1, 28, 28}
  std::vector<LayerSpec> layers;
};

// The zoo's descriptions by name (model_names(), core/nn/model.hpp); UserError for others.
ModelSpec zoo_spec(const std::string& name);

}  // namespace syncopate
