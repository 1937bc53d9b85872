#pragma once
// Layers beyond the basic set of core/nn/layer.hpp, for the larger zoo models.
#include <memory>
#include <vector>

#include "core/nn/layer.hpp"

namespace syncopate {

// Per-channel BatchNorm over (B, C, H, W): parameters gamma (C) then beta (C); init gamma 1,
// beta 0. COST-ONLY: it counts parameters and reports costs, but forward/backward throw
// InternalError ("cost-only"), so a model containing it cannot compute with real storage.
std::unique_ptr<Layer> batchnorm2d(int64_t channels);

// A residual block: y = relu(main(x) + shortcut(x)), where main and shortcut are sequences of
// layers applied in order (an empty shortcut is the identity). Its parameters are those of main,
// then those of shortcut, in order. Its math is real (it drives its sub-layers), so it computes
// whenever its sub-layers do. init_params uses He for every sub-layer with weights (in ResNets
// every convolution is followed by BatchNorm and ReLU), from the one stream it is given.
// Its costs are the sums of its sub-layers' costs plus the add and ReLU, reported as kConv.
std::unique_ptr<Layer> residual(std::vector<std::unique_ptr<Layer>> main,
                                std::vector<std::unique_ptr<Layer>> shortcut);

// The torchvision ResNet bottleneck: conv1x1 in->width, BN, ReLU, conv3x3 width->width (stride),
// BN, ReLU, conv1x1 width->out, BN; shortcut conv1x1 in->out (stride) + BN when the shape changes.
std::unique_ptr<Layer> bottleneck(int64_t in, int64_t width, int64_t out, int64_t stride);

// The parameters of a kernel x kernel convolution in->out (weights, then bias) that take no part
// in compute: the identity in forward and backward, zero cost, its gradients stay zero. Models the
// original NFNet's shortcut convolutions, which are defined (and so averaged and communicated) but
// never used.
std::unique_ptr<Layer> unused_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel);

}  // namespace syncopate
