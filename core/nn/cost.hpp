#pragma once
// The cost of one piece of compute, as the model reports it and the Executor accounts it.
#include <cstdint>
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

struct Cost {
  double flops = 0;  // floating-point operations (a multiply-add counts 2)
  double bytes = 0;  // bytes read + written from memory (activations, weights, gradients)
  OpKind kind = OpKind::kElementwise;
};

}  // namespace syncopate
