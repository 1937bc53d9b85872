// The model zoo: small models to train for real, and the large ones people ask about.
#include <array>

#include "core/base/check.hpp"
#include "core/nn/layers_extra.hpp"
#include "core/nn/model.hpp"

namespace syncopate {
namespace {

using LayerList = std::vector<std::unique_ptr<Layer>>;

template <typename... Layers>
LayerList list(Layers... layers) {
  LayerList out;
  (out.push_back(std::move(layers)), ...);
  return out;
}

// 784-256-128-10 with ReLU.
LayerList mlp() {
  return list(flatten(), dense(784, 256), relu(), dense(256, 128), relu(), dense(128, 10));
}

// LeNet-style: two 3x3 convolutions with 2x2 max pooling, then two dense layers.
LayerList cnn() {
  return list(conv2d(1, 32, 3, 1, 1), relu(), maxpool2d(2, 2), conv2d(32, 64, 3, 1, 1), relu(),
              maxpool2d(2, 2), flatten(), dense(3136, 128), relu(), dense(128, 10));
}

// The paper's simplified NFNet (no normalisation) on 64x64x3 images. With `full`, each block
// also holds the 1x1 shortcut convolution the original defines but never uses.
LayerList nfnet(bool full) {
  LayerList layers =
      list(conv2d(3, 32, 3, 1, 1), relu(), conv2d(32, 64, 3, 1, 1), relu(), maxpool2d(2, 2));
  struct Block {
    int64_t in, out, stride;
  };
  for (const Block& b :
       std::array<Block, 4>{{{64, 128, 1}, {128, 256, 1}, {256, 512, 2}, {512, 1024, 2}}}) {
    layers.push_back(conv2d(b.in, b.out, 3, b.stride, 1));
    layers.push_back(relu());
    layers.push_back(conv2d(b.out, b.out, 3, 1, 1));
    layers.push_back(relu());
    if (full) layers.push_back(unused_conv2d(b.in, b.out, 1));
  }
  layers.push_back(global_avgpool());
  layers.push_back(dense(1024, 1024));
  layers.push_back(relu());
  layers.push_back(dense(1024, 10));
  return layers;
}

// torchvision's ResNet-50 (v1.5: the stride sits on the 3x3 convolution) for 1000 classes.
LayerList resnet50() {
  LayerList layers =
      list(conv2d(3, 64, 7, 2, 3, Bias::kNo), batchnorm2d(64), relu(), maxpool2d(3, 2, 1));
  struct Stage {
    int64_t blocks, width, stride;
  };
  int64_t in = 64;
  for (const Stage& s : std::array<Stage, 4>{{{3, 64, 1}, {4, 128, 2}, {6, 256, 2}, {3, 512, 2}}}) {
    for (int64_t i = 0; i < s.blocks; ++i) {
      const int64_t out = 4 * s.width;
      layers.push_back(bottleneck(in, s.width, out, i == 0 ? s.stride : 1));
      in = out;
    }
  }
  layers.push_back(global_avgpool());
  layers.push_back(dense(2048, 1000));
  return layers;
}

}  // namespace

std::vector<std::string> model_names() { return {"mlp", "cnn", "nfnet", "nfnet_full", "resnet50"}; }

std::unique_ptr<Model> make_model(const std::string& name, Storage storage) {
  if (name == "mlp") return std::make_unique<Model>(name, Shape{1, 28, 28}, mlp(), storage);
  if (name == "cnn") return std::make_unique<Model>(name, Shape{1, 28, 28}, cnn(), storage);
  if (name == "nfnet")
    return std::make_unique<Model>(name, Shape{3, 64, 64}, nfnet(false), storage);
  if (name == "nfnet_full") {
    return std::make_unique<Model>(name, Shape{3, 64, 64}, nfnet(true), storage);
  }
  if (name == "resnet50") {
    return std::make_unique<Model>(name, Shape{3, 224, 224}, resnet50(), storage);
  }
  std::string allowed;
  for (const auto& n : model_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw UserError("model: name = \"" + name + "\" is unknown; allowed: " + allowed);
}

}  // namespace syncopate
