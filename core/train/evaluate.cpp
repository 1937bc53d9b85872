// Evaluation of a model on a test set, in batches of 250, in evaluation mode.
#include "core/train/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace syncopate {
namespace {

// Sums over a test set for the regression metrics, per target column, in double.
class RegressionTally {
 public:
  explicit RegressionTally(size_t columns) : columns_(columns, Sums{}) {}

  // pred and target: rows of columns_.size() values each, in the targets' units.
  void add(std::span<const float> pred, std::span<const float> target) {
    for (size_t i = 0; i < pred.size(); ++i) {
      Sums& c = columns_[i % columns_.size()];
      const double p = pred[i], t = target[i];
      c.n += 1;
      c.squared += (p - t) * (p - t);
      c.absolute += std::abs(p - t);
      c.p += p, c.t += t, c.pp += p * p, c.tt += t * t, c.pt += p * t;
    }
  }

  RegressionMetrics metrics() const {
    RegressionMetrics m;
    double n = 0, squared = 0, absolute = 0, r2 = 0, pearson = 0;
    for (const Sums& c : columns_) {
      n += c.n, squared += c.squared, absolute += c.absolute;
      const double t_var = c.tt - c.t * c.t / c.n, p_var = c.pp - c.p * c.p / c.n;
      const double cov = c.pt - c.p * c.t / c.n;
      r2 += t_var > 0 ? 1.0 - c.squared / t_var : std::nan("");
      pearson += t_var > 0 && p_var > 0 ? cov / std::sqrt(t_var * p_var) : std::nan("");
    }
    if (n == 0) return m;
    const auto k = static_cast<double>(columns_.size());
    m.mse = squared / n, m.mae = absolute / n, m.r2 = r2 / k, m.pearson = pearson / k;
    return m;
  }

 private:
  struct Sums {
    double n = 0, squared = 0, absolute = 0, p = 0, t = 0, pp = 0, tt = 0, pt = 0;
  };
  std::vector<Sums> columns_;
};

}  // namespace

Evaluation evaluate(Model& model, const Dataset& test, const LossChoice& loss,
                    Accelerator* accelerator) {
  constexpr int64_t kBatch = 250;
  Evaluation result;
  const bool classify = loss.classify();
  const int64_t columns = test.size() > 0 ? test.y.numel() / test.size() : 1;
  RegressionTally tally(static_cast<size_t>(std::max<int64_t>(1, columns)));
  int64_t correct = 0;
  double loss_sum = 0;
  Tensor x, y, device_out;
  std::vector<int64_t> indices;
  std::vector<float> pred, target;
  StepContext ctx;
  ctx.mode = Mode::kEval;
  for (int64_t start = 0; start < test.size(); start += kBatch) {
    const int64_t n = std::min(kBatch, test.size() - start);
    indices.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) indices[static_cast<size_t>(i)] = start + i;
    gather_batch(test, indices, x, y);
    if (accelerator != nullptr) accelerator->forward(model.params(), x, ctx, device_out);
    const Tensor& out = accelerator != nullptr ? device_out : model.forward(x, ctx);
    const LossResult r = compute_loss(loss, out, y, nullptr);
    loss_sum += r.loss * static_cast<double>(n);
    correct += r.correct;
    if (classify) continue;
    pred.assign(out.span().begin(), out.span().end());
    target.assign(y.span().begin(), y.span().end());
    unscale(test.target_scaling, pred);
    unscale(test.target_scaling, target);
    tally.add(pred, target);
  }
  const double n = static_cast<double>(std::max<int64_t>(1, test.size()));
  result.loss = loss_sum / n;
  if (classify) result.accuracy = static_cast<double>(correct) / n;
  if (!classify) result.errors = tally.metrics();
  return result;
}

}  // namespace syncopate
