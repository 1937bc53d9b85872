#pragma once
// Losses over a batch: the mean over samples, and its gradient with respect to the predictions.
#include <cstdint>
#include <limits>

#include "core/nn/cost.hpp"
#include "core/scenario/choices.hpp"
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

// Mean absolute error, like PyTorch's L1Loss: mean(|pred - target|); dpred receives
// sign(pred - target) / numel (0 where they are equal).
LossResult mae(const Tensor& pred, const Tensor& target, Tensor* dpred);

// Huber loss, like PyTorch's HuberLoss(delta): per element 0.5 d^2 if |d| <= delta, else
// delta (|d| - 0.5 delta), d = pred - target, averaged; dpred receives clamp(d, -delta, delta) /
// numel. delta > 0.
LossResult huber(const Tensor& pred, const Tensor& target, double delta, Tensor* dpred);

// The loss a run trains with: its kind and, for huber, delta.
struct LossChoice {
  LossKind kind = LossKind::kCrossEntropy;
  double huber_delta = 1.0;
  bool classify() const { return kind == LossKind::kCrossEntropy; }
};
// Dispatches to the functions above (labels are targets for the regression losses).
LossResult compute_loss(const LossChoice& loss, const Tensor& out, const Tensor& labels,
                        Tensor* dout);

// Errors of regression predictions over a test set, in the targets' own units. With several
// target columns mse and mae are over all values, r2 and pearson the mean of the columns'
// (sklearn's "uniform_average"). NaN: not computed (classification), or undefined (constant
// targets or predictions).
struct RegressionMetrics {
  static constexpr double kNotComputed = std::numeric_limits<double>::quiet_NaN();
  double mse = kNotComputed, mae = kNotComputed, r2 = kNotComputed, pearson = kNotComputed;
};

// Forward + gradient of the softmax cross-entropy over logits of this shape (B, C).
Cost loss_cost(const Shape& logits_shape);

}  // namespace syncopate
