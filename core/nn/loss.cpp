// Softmax cross-entropy and the regression losses (MSE, MAE, Huber), with gradients and costs.
#include "core/nn/loss.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/base/check.hpp"

namespace syncopate {

LossResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* dlogits) {
  SYNC_CHECK(!logits.shape_only() && !labels.shape_only(),
             "softmax_cross_entropy on shape-only tensors (cost-only models use loss_cost)");
  SYNC_CHECK(logits.rank() == 2 && labels.numel() == logits.dim(0),
             "logits " << to_string(logits.shape()) << " labels " << to_string(labels.shape()));
  const int64_t batch = logits.dim(0), classes = logits.dim(1);
  if (dlogits) dlogits->resize(logits.shape());
  LossResult result;
  double total = 0.0;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const float label_value = labels[b];
    const int64_t label = static_cast<int64_t>(label_value);
    if (!(label_value >= 0.0f && static_cast<float>(label) == label_value && label < classes)) {
      throw UserError("softmax_cross_entropy: labels[" + std::to_string(b) +
                      "] = " + std::to_string(label_value) +
                      " is not a class index; allowed: integers in [0, " + std::to_string(classes) +
                      ")");
    }
    const float* row = logits.data() + b * classes;
    int64_t arg = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (row[c] > row[arg]) arg = c;
    }
    const float max = row[arg];
    result.correct += arg == label ? 1 : 0;
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(row[c] - max));
    // -log softmax[label] = log(sum) - (z_label - max)
    total += std::log(sum) - static_cast<double>(row[label] - max);
    if (dlogits) {
      float* d = dlogits->data() + b * classes;
      const double inv_sum = 1.0 / sum;
      for (int64_t c = 0; c < classes; ++c) {
        const double p = std::exp(static_cast<double>(row[c] - max)) * inv_sum;
        d[c] = static_cast<float>(p - (c == label ? 1.0 : 0.0)) * inv_batch;
      }
    }
  }
  result.loss = batch > 0 ? total / static_cast<double>(batch) : 0.0;
  return result;
}

LossResult mse(const Tensor& pred, const Tensor& target, Tensor* dpred) {
  SYNC_CHECK(!pred.shape_only() && !target.shape_only(),
             "mse on shape-only tensors (cost-only models use loss_cost)");
  SYNC_CHECK(pred.numel() == target.numel(),
             "pred " << to_string(pred.shape()) << " target " << to_string(target.shape()));
  const int64_t n = pred.numel();
  if (dpred) dpred->resize(pred.shape());
  double total = 0.0;
  const float scale = n > 0 ? 2.0f / static_cast<float>(n) : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float diff = pred[i] - target[i];
    total += static_cast<double>(diff) * diff;
    if (dpred) (*dpred)[i] = diff * scale;
  }
  return {n > 0 ? total / static_cast<double>(n) : 0.0, 0};
}

namespace {

// mean(f(pred - target)) with d(mean)/d(pred) = g(pred - target) / numel, f and g per element.
template <typename Value, typename Slope>
LossResult elementwise(const char* what, const Tensor& pred, const Tensor& target, Tensor* dpred,
                       Value value, Slope slope) {
  SYNC_CHECK(!pred.shape_only() && !target.shape_only(),
             what << " on shape-only tensors (cost-only models use loss_cost)");
  SYNC_CHECK(pred.numel() == target.numel(),
             "pred " << to_string(pred.shape()) << " target " << to_string(target.shape()));
  const int64_t n = pred.numel();
  if (dpred) dpred->resize(pred.shape());
  double total = 0.0;
  const float inv_n = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float diff = pred[i] - target[i];
    total += value(static_cast<double>(diff));
    if (dpred) (*dpred)[i] = slope(diff) * inv_n;
  }
  return {n > 0 ? total / static_cast<double>(n) : 0.0, 0};
}

}  // namespace

LossResult mae(const Tensor& pred, const Tensor& target, Tensor* dpred) {
  return elementwise(
      "mae", pred, target, dpred, [](double d) { return std::abs(d); },
      [](float d) { return d > 0 ? 1.0f : (d < 0 ? -1.0f : 0.0f); });
}

LossResult huber(const Tensor& pred, const Tensor& target, double delta, Tensor* dpred) {
  SYNC_CHECK(delta > 0, "huber delta " << delta);
  const auto fdelta = static_cast<float>(delta);
  return elementwise(
      "huber", pred, target, dpred,
      [delta](double d) {
        const double a = std::abs(d);
        return a <= delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
      },
      [fdelta](float d) { return std::clamp(d, -fdelta, fdelta); });
}

LossResult compute_loss(const LossChoice& loss, const Tensor& out, const Tensor& labels,
                        Tensor* dout) {
  switch (loss.kind) {
    case LossKind::kCrossEntropy:
      return softmax_cross_entropy(out, labels, dout);
    case LossKind::kMse:
      return mse(out, labels, dout);
    case LossKind::kMae:
      return mae(out, labels, dout);
    case LossKind::kHuber:
      return huber(out, labels, loss.huber_delta, dout);
  }
  SYNC_CHECK(false, "unknown loss kind " << static_cast<int>(loss.kind));
  return {};
}

Cost loss_cost(const Shape& logits_shape) {
  const double n = static_cast<double>(numel(logits_shape));
  const double batch = logits_shape.empty() ? 0.0 : static_cast<double>(logits_shape[0]);
  // max, subtract, exp, sum, log, then exp, scale and subtract again for the gradient.
  return {8 * n, (2 * n + batch) * sizeof(float), OpKind::kLoss};
}

}  // namespace syncopate
