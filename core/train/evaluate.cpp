// Evaluation of a model on a test set, in batches of 250, in evaluation mode.
#include "core/train/evaluate.hpp"

#include <algorithm>
#include <vector>

#include "core/nn/loss.hpp"

namespace syncopate {

Evaluation evaluate(Model& model, const Dataset& test, LossKind loss) {
  constexpr int64_t kBatch = 250;
  Evaluation result;
  const bool classify = loss == LossKind::kCrossEntropy;
  int64_t correct = 0;
  double loss_sum = 0;
  Tensor x, y;
  std::vector<int64_t> indices;
  StepContext ctx;
  ctx.mode = Mode::kEval;
  for (int64_t start = 0; start < test.size(); start += kBatch) {
    const int64_t n = std::min(kBatch, test.size() - start);
    indices.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) indices[static_cast<size_t>(i)] = start + i;
    gather_batch(test, indices, x, y);
    const Tensor& out = model.forward(x, ctx);
    const LossResult r = classify ? softmax_cross_entropy(out, y, nullptr) : mse(out, y, nullptr);
    loss_sum += r.loss * static_cast<double>(n);
    correct += r.correct;
  }
  const double n = static_cast<double>(std::max<int64_t>(1, test.size()));
  result.loss = loss_sum / n;
  if (classify) result.accuracy = static_cast<double>(correct) / n;
  return result;
}

}  // namespace syncopate
