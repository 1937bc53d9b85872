#pragma once
// An accelerator runs a model's forward and backward passes, and the test set's forward passes,
// on a device (model.device = "cuda").
// The host keeps what the strategies touch: parameters, gradients and the optimizer, so every
// strategy and backend works unchanged; each step copies the parameters in and the gradients
// out (Debian's Open MPI is not CUDA-aware: collectives stage through host memory anyway).
#include <functional>
#include <memory>
#include <span>

#include "core/nn/layer.hpp"
#include "core/nn/loss.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate {

class Model;

class Accelerator {
 public:
  virtual ~Accelerator() = default;
  // One batch: parameters in, forward, the loss (softmax cross-entropy when `classify`, else
  // MSE), backward of grad_scale times the mean loss, gradients out (overwritten).
  virtual LossResult forward_backward(std::span<const float> params, const Tensor& x,
                                      const Tensor& y, bool classify, float grad_scale,
                                      const StepContext& ctx, std::span<float> grads) = 0;
  // The model's output for a batch (ctx.mode: evaluation for the test set) from these
  // parameters, into `out` (resized to the batch's output).
  virtual void forward(std::span<const float> params, const Tensor& x, const StepContext& ctx,
                       Tensor& out) = 0;
};

// Makes the accelerator for a worker's model (the app picks the device's implementation).
using AcceleratorFactory = std::function<std::unique_ptr<Accelerator>(const Model& model)>;

}  // namespace syncopate
