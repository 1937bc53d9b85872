#pragma once
// Layers beyond the basic set of core/nn/layer.hpp: ResNet's and transformers' building blocks,
// the smooth activations and the normalisations.
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

// A skip connection around a list of layers: y = x + layers(x), the layers applied in order
// (they must keep the shape). Parameters: those of the layers, in order; each is initialised as
// the Model does (He before a ReLU, Xavier otherwise). Its costs are its layers' plus the add,
// reported as the op kind of its costliest layer.
std::unique_ptr<Layer> skip(std::vector<std::unique_ptr<Layer>> layers);

// Elementwise: 1 / (1 + e^-x); tanh; GELU in GPT-2's tanh form,
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
std::unique_ptr<Layer> sigmoid();
std::unique_ptr<Layer> tanh_layer();
std::unique_ptr<Layer> gelu();

// Over the last axis (features): LayerNorm y = (x - mean) / sqrt(var + 1e-5) * gamma + beta,
// parameters gamma (init 1) then beta (init 0); RMSNorm y = x / sqrt(mean(x^2) + 1e-5) * gamma.
std::unique_ptr<Layer> layernorm(int64_t features);
std::unique_ptr<Layer> rmsnorm(int64_t features);

// (B, T) token ids (integers stored as floats, in [0, vocabulary)) -> (B, T, width): the token's
// row of the table (vocabulary, width), plus the position's row of a learned table (positions,
// width) when positions > 0. Parameters: the token table, then the position table; init
// N(0, 0.02^2) as GPT-2. No input gradient (the ids are not differentiable: dx is zero).
std::unique_ptr<Layer> embedding(int64_t vocabulary, int64_t width, int64_t positions);

// Causal multi-head self-attention over (B, T, width): qkv = x Wqkv^T + bqkv (Wqkv (3 width,
// width)), per head softmax(q k^T / sqrt(d)) v with future positions masked, then the output
// projection Wo (width, width) + bo. Parameters: Wqkv, bqkv, Wo, bo (biases when bias = kYes).
// Its FLOPs count the full T x T score matrix (the usual convention, e.g. Megatron-LM's).
std::unique_ptr<Layer> attention(int64_t width, int64_t heads, Bias bias);

// LLaMA's gated MLP over (B, T, width): down(silu(gate(x)) * up(x)), gate and up (hidden,
// width), down (width, hidden). COST-ONLY (as batchnorm2d): parameters and costs, no math.
std::unique_ptr<Layer> swiglu(int64_t width, int64_t hidden, Bias bias);

// The output projection of tied embeddings, (B, ..., width) -> (B, ..., vocabulary) with the
// embedding's table transposed: no parameters of its own. COST-ONLY: its costs are a dense
// layer's without bias; forward/backward throw InternalError.
std::unique_ptr<Layer> tied_dense(int64_t width, int64_t vocabulary);

}  // namespace syncopate
