#pragma once
// The cost of one piece of compute, as the model reports it and the Executor accounts it.
#include <cstdint>
#include <span>
#include <string_view>

namespace syncopate {

// Which host-profile speed applies: a GPU runs a GEMM far faster than a pooling kernel.
enum class OpKind { kGemm, kConv, kPool, kElementwise, kLoss, kOptimizer };
inline constexpr int kNumOpKinds = 6;

constexpr std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kGemm:
      return "gemm";
    case OpKind::kConv:
      return "conv";
    case OpKind::kPool:
      return "pool";
    case OpKind::kElementwise:
      return "elementwise";
    case OpKind::kLoss:
      return "loss";
    case OpKind::kOptimizer:
      return "optimizer";
  }
  return "?";
}

enum class Pass { kNone, kForward, kBackward };

// Which layer pass a cost is, so that a host profile holding measured per-layer times (sim)
// can use them instead of the speed of the op kind. The shapes are views into the model that
// reported the cost: valid while its batch is unchanged (long enough for Executor::compute).
struct LayerKey {
  Pass pass = Pass::kNone;          // kNone: not a layer's pass (loss, optimizer, ...)
  std::string_view kind;            // Layer::kind(), e.g. "dense"
  std::span<const int64_t> input;   // the layer's input shape, batch first
  std::span<const int64_t> output;  // its output shape
};

struct Cost {
  double flops = 0;  // floating-point operations (a multiply-add counts 2)
  double bytes = 0;  // bytes read + written from memory (activations, weights, gradients)
  OpKind kind = OpKind::kElementwise;
  LayerKey layer{};  // set by Model::forward_cost / backward_cost
};

}  // namespace syncopate
