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
  kSigmoid,
  kTanh,
  kGelu,
  kLayerNorm,
  kRmsNorm,
  kEmbedding,
  kResidual,
  kAttention,
  kSwiglu,
  kTiedDense,
};

// "dense", "conv2d", "maxpool2d", "avgpool2d", "global_avgpool", "relu", "flatten", "dropout",
// "batchnorm2d", "bottleneck", "unused_conv2d", "sigmoid", "tanh", "gelu", "layernorm",
// "rmsnorm", "embedding", "residual", "attention", "swiglu", "tied_dense": the CPU
// Layer::kind() names, except that a bottleneck's CPU layer is a "residual"
// (core/nn/layers_extra.hpp).
std::string_view to_string(LayerKind kind);
std::optional<LayerKind> parse_layer_kind(std::string_view name);

// A layer: its kind and that kind's parameters (the others keep their defaults, unused):
//   dense           in, out: features (of the last axis: (B, ..., in) -> (B, ..., out)); bias
//   conv2d          in, out: channels; kernel (square), stride, padding (zeros), bias
//   maxpool2d       kernel, stride, padding (never wins the max)
//   avgpool2d       kernel, stride
//   dropout         rate
//   batchnorm2d     in: channels (cost-only, see core/nn/layers_extra.hpp)
//   bottleneck      in, width, out: channels; stride (torchvision's ResNet block)
//   unused_conv2d   in, out: channels; kernel
//   layernorm       in: features of the last axis (gamma, beta); rmsnorm: the same, gamma only
//   embedding       in: vocabulary, out: width, positions: learned positions (0: none);
//                   (B, T) token ids -> (B, T, width)
//   residual        layers: x + layers(x) (the layers must keep the shape)
//   attention       in: width, heads; bias (causal multi-head self-attention, (B, T, width))
//   swiglu          in: width, width: hidden; bias (LLaMA's gated MLP, (B, T, in))
//   tied_dense      in: width, out: vocabulary (the embedding's weights, transposed; no
//                   parameters of its own)
//   global_avgpool, relu, sigmoid, tanh, gelu, flatten: none
// The *_spec factories below check the values (UserError).
struct LayerSpec {
  LayerKind kind = LayerKind::kRelu;
  int64_t in = 0, out = 0;
  int64_t width = 0;
  int64_t kernel = 0, stride = 1, padding = 0;
  Bias bias = Bias::kYes;
  float rate = 0.0f;
  int64_t heads = 0, positions = 0;
  std::vector<LayerSpec> layers = {};  // residual: the layers the skip goes around
};

LayerSpec dense_spec(int64_t in, int64_t out, Bias bias = Bias::kYes);
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
LayerSpec sigmoid_spec();
LayerSpec tanh_spec();
LayerSpec gelu_spec();
LayerSpec layernorm_spec(int64_t features);
LayerSpec rmsnorm_spec(int64_t features);
LayerSpec embedding_spec(int64_t vocabulary, int64_t width, int64_t positions = 0);
LayerSpec residual_spec(std::vector<LayerSpec> layers);
LayerSpec attention_spec(int64_t width, int64_t heads, Bias bias = Bias::kYes);
LayerSpec swiglu_spec(int64_t width, int64_t hidden, Bias bias = Bias::kNo);
LayerSpec tied_dense_spec(int64_t width, int64_t vocabulary);

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
bool is_zoo_name(const std::string& name);

// The index of the first layer (at the top level) that is cost-only or holds one (batchnorm2d,
// bottleneck, swiglu, tied_dense): a model that can only be simulated cost-only. -1 if none.
int first_cost_only_layer(const ModelSpec& spec);

// The parameter count and output shape of a whole description (UserError on a misfit).
int64_t num_params(const ModelSpec& spec);
Shape output_shape(const ModelSpec& spec, int64_t batch);

}  // namespace syncopate
