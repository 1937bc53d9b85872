// The model zoo: small models to train for real, and the large ones people ask about, as
// descriptions (ModelSpec) that every build of a model starts from.
#include <array>

#include "core/base/check.hpp"
#include "core/nn/model.hpp"
#include "core/nn/model_spec.hpp"
#include "core/nn/transformer.hpp"

namespace syncopate {
namespace {

using Layers = std::vector<LayerSpec>;

// 784-256-128-10 with ReLU.
Layers mlp() {
  return {flatten_spec(),       dense_spec(784, 256), relu_spec(),
          dense_spec(256, 128), relu_spec(),          dense_spec(128, 10)};
}

// LeNet-style: two 3x3 convolutions with 2x2 max pooling, then two dense layers.
Layers cnn() {
  return {conv2d_spec(1, 32, 3, 1, 1),
          relu_spec(),
          maxpool2d_spec(2, 2),
          conv2d_spec(32, 64, 3, 1, 1),
          relu_spec(),
          maxpool2d_spec(2, 2),
          flatten_spec(),
          dense_spec(3136, 128),
          relu_spec(),
          dense_spec(128, 10)};
}

// The paper's simplified NFNet (no normalisation) on 64x64x3 images. With `full`, each block
// also holds the 1x1 shortcut convolution the original defines but never uses.
Layers nfnet(bool full) {
  Layers layers = {conv2d_spec(3, 32, 3, 1, 1), relu_spec(), conv2d_spec(32, 64, 3, 1, 1),
                   relu_spec(), maxpool2d_spec(2, 2)};
  struct Block {
    int64_t in, out, stride;
  };
  for (const Block& b :
       std::array<Block, 4>{{{64, 128, 1}, {128, 256, 1}, {256, 512, 2}, {512, 1024, 2}}}) {
    layers.push_back(conv2d_spec(b.in, b.out, 3, b.stride, 1));
    layers.push_back(relu_spec());
    layers.push_back(conv2d_spec(b.out, b.out, 3, 1, 1));
    layers.push_back(relu_spec());
    if (full) layers.push_back(unused_conv2d_spec(b.in, b.out, 1));
  }
  layers.push_back(global_avgpool_spec());
  layers.push_back(dense_spec(1024, 1024));
  layers.push_back(relu_spec());
  layers.push_back(dense_spec(1024, 10));
  return layers;
}

// torchvision's ResNet-50 (v1.5: the stride sits on the 3x3 convolution) for 1000 classes.
Layers resnet50() {
  Layers layers = {conv2d_spec(3, 64, 7, 2, 3, Bias::kNo), batchnorm2d_spec(64), relu_spec(),
                   maxpool2d_spec(3, 2, 1)};
  struct Stage {
    int64_t blocks, width, stride;
  };
  int64_t in = 64;
  for (const Stage& s : std::array<Stage, 4>{{{3, 64, 1}, {4, 128, 2}, {6, 256, 2}, {3, 512, 2}}}) {
    for (int64_t i = 0; i < s.blocks; ++i) {
      const int64_t out = 4 * s.width;
      layers.push_back(bottleneck_spec(in, s.width, out, i == 0 ? s.stride : 1));
      in = out;
    }
  }
  layers.push_back(global_avgpool_spec());
  layers.push_back(dense_spec(2048, 1000));
  return layers;
}

}  // namespace

std::vector<std::string> model_names() {
  return {"mlp",  "cnn",         "nfnet",      "nfnet_full", "resnet50",
          "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl",    "llama-7b"};
}

bool is_zoo_name(const std::string& name) {
  for (const std::string& n : model_names()) {
    if (n == name) return true;
  }
  return false;
}

ModelSpec zoo_spec(const std::string& name) {
  if (name == "mlp") return {name, {1, 28, 28}, mlp()};
  if (name == "cnn") return {name, {1, 28, 28}, cnn()};
  if (name == "nfnet") return {name, {3, 64, 64}, nfnet(false)};
  if (name == "nfnet_full") return {name, {3, 64, 64}, nfnet(true)};
  if (name == "resnet50") return {name, {3, 224, 224}, resnet50()};
  if (const TransformerConfig* config = builtin_transformer(name)) {
    return transformer_spec(name, *config);
  }
  std::string allowed;
  for (const auto& n : model_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw UserError("model: name = \"" + name + "\" is unknown; allowed: " + allowed);
}

std::unique_ptr<Model> make_model(const ModelSpec& spec, Storage storage) {
  return std::make_unique<Model>(spec, storage);
}

std::unique_ptr<Model> make_model(const std::string& name, Storage storage) {
  return make_model(zoo_spec(name), storage);
}

}  // namespace syncopate
