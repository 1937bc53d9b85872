#pragma once
// One training step of a Model as the Trainer drives it: forward, softmax cross-entropy,
// backward and the optimizer's step. The device tests take the CPU model's step as the reference.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/nn/loss.hpp"
#include "core/nn/model.hpp"
#include "core/optim/optim.hpp"

namespace syncopate::cuda {

inline LossResult cpu_step(Model& model, Optimizer& optimizer, const std::vector<float>& x,
                           const std::vector<float>& labels, const StepContext& ctx, float lr,
                           int64_t step) {
  const auto batch = static_cast<int64_t>(labels.size());
  model.set_batch(batch);
  std::copy(x.begin(), x.end(), model.input().data());
  for (int i = 0; i < model.num_layers(); ++i) model.forward_layer(i, ctx);
  const Tensor label_tensor(Shape{batch}, labels);
  const LossResult loss = softmax_cross_entropy(model.output(), label_tensor, &model.output_grad());
  model.zero_grads();
  for (int i = model.num_layers() - 1; i >= 0; --i) model.backward_layer(i);
  optimizer.step(model.params(), model.grads(), lr, step);
  return loss;
}

}  // namespace syncopate::cuda
