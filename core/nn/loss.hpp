#pragma once
// Losses over a batch: the mean over samples, and its gradient with respect to the predictions.
#include <cstdint>

#include "core/nn/cost.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate {

struct LossResult {
  double loss = 0;      // mean over the batch
  int64_t correct = 0;  // samples whose arg-max prediction is the label (0 for regression)
};

// logits (B, C); labels (B) hold class indices as floats. Softmax cross-entropy, computed stably
// (max subtraction). When dlogits is not null it is resized to (B, C) and receives
// d(mean loss)/d(logits) = (softmax - onehot) / B. Ties in the arg-max go to the lowest class.
// A label that is not an integer in [0, C) throws UserError.
LossResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* dlogits);

// Mean squared error over all elements: mean((pred - target)^2), like PyTorch's MSELoss.
// pred and target have the same element count; dpred (resized to pred's shape) receives
// 2 (pred - target) / numel.
LossResult mse(const Tensor& pred, const Tensor& target, Tensor* dpred);

// Forward + gradient of the softmax cross-entropy over logits of this shape (B, C).
Cost loss_cost(const Shape& logits_shape);

}  // namespace syncopate
