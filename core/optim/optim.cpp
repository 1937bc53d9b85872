// SGD, Adam and AdamW over the flat parameter buffer, and the learning-rate schedules.
#include "core/optim/optim.hpp"

// GCC 12 reports a false maybe-uninitialized inside its AVX-512 intrinsics when Eigen's
// vectorised sqrt is inlined; the diagnostic is tied to the header's lines, so silence it there.
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#pragma GCC diagnostic pop
#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

// Throws UserError "field: value is invalid; allowed: ..." unless ok.
void require(bool ok, const char* field, double value, const char* allowed) {
  if (ok) return;
  std::ostringstream out;
  out << field << ": " << value << " is invalid; allowed: " << allowed;
  throw UserError(out.str());
}

// torch.optim.SGD with dampening 0.
class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& config, int64_t num_params)
      : momentum_(static_cast<float>(config.momentum)),
        weight_decay_(static_cast<float>(config.weight_decay)),
        nesterov_(config.nesterov),
        num_params_(num_params),
        buffer_(config.momentum != 0 ? static_cast<size_t>(num_params) : 0, 0.0f) {}

  void step(std::span<float> params, std::span<const float> grads, float lr,
            int64_t /*step*/) override {
    SYNC_CHECK(
        static_cast<int64_t>(params.size()) == num_params_ && grads.size() == params.size(),
        "params " << params.size() << " grads " << grads.size() << " expected " << num_params_);
    float* p = params.data();
    const float* g = grads.data();
    const size_t n = params.size();
    const float wd = weight_decay_, mu = momentum_;
    if (buffer_.empty()) {
      for (size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
      return;
    }
    // A zero buffer is a fresh one: mu * 0 + d equals PyTorch's first-step b = d.
    float* b = buffer_.data();
    if (nesterov_) {
      for (size_t i = 0; i < n; ++i) {
        const float d = g[i] + wd * p[i];
        b[i] = mu * b[i] + d;
        p[i] -= lr * (d + mu * b[i]);
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float d = g[i] + wd * p[i];
        b[i] = mu * b[i] + d;
        p[i] -= lr * b[i];
      }
    }
  }

  std::span<float> state() override { return buffer_; }
  void reset() override { std::fill(buffer_.begin(), buffer_.end(), 0.0f); }

  Cost cost(int64_t num_params) const override {
    const double n = static_cast<double>(num_params);
    double flops_per = 2;  // p -= lr * d
    if (weight_decay_ != 0) flops_per += 2;
    if (!buffer_.empty()) flops_per += nesterov_ ? 4 : 2;
    const double words = buffer_.empty() ? 3 : 5;  // read p, g (, b); write p (, b)
    return {n * flops_per, n * words * sizeof(float), OpKind::kOptimizer};
  }

 private:
  float momentum_, weight_decay_;
  bool nesterov_;
  int64_t num_params_;
  std::vector<float> buffer_;
};

// torch.optim.Adam (weight decay added to the gradient) and AdamW (decoupled decay).
class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& config, int64_t num_params, bool decoupled)
      : config_(config),
        decoupled_(decoupled),
        num_params_(num_params),
        state_(2 * static_cast<size_t>(num_params), 0.0f) {}

  void step(std::span<float> params, std::span<const float> grads, float lr,
            int64_t step) override {
    SYNC_CHECK(
        static_cast<int64_t>(params.size()) == num_params_ && grads.size() == params.size(),
        "params " << params.size() << " grads " << grads.size() << " expected " << num_params_);
    SYNC_CHECK(step >= 1, "Adam step counts from 1, got " << step);
    const size_t n = params.size();
    float* p = params.data();
    const float* g = grads.data();
    float* m = state_.data();
    float* v = state_.data() + n;
    // Scalars as PyTorch forms them (in double, then used against float tensors).
    const double t = static_cast<double>(step);
    const float step_size = static_cast<float>(lr / (1.0 - std::pow(config_.beta1, t)));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(config_.beta2, t)));
    const float b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
    // 1 - beta in double first, as PyTorch does (1 - 0.999f is not 0.001f).
    const float c1 = static_cast<float>(1.0 - config_.beta1);
    const float c2 = static_cast<float>(1.0 - config_.beta2);
    const float eps = static_cast<float>(config_.eps);
    const float wd = static_cast<float>(config_.weight_decay);
    const float coupled_wd = decoupled_ ? 0.0f : wd;
    const float shrink = decoupled_ ? static_cast<float>(1.0 - lr * config_.weight_decay) : 1.0f;
    // Eigen arrays vectorise the square root (a plain loop over std::sqrt does not, because of
    // errno); chunks keep the passes of each statement in cache.
    constexpr size_t kChunk = 4096;
    for (size_t i0 = 0; i0 < n; i0 += kChunk) {
      const auto len = static_cast<Eigen::Index>(std::min(kChunk, n - i0));
      Eigen::Map<Eigen::ArrayXf> P(p + i0, len), M(m + i0, len), V(v + i0, len);
      Eigen::Map<const Eigen::ArrayXf> G(g + i0, len);
      if (decoupled_) P *= shrink;
      M = b1 * M + c1 * (G + coupled_wd * P);
      V = b2 * V + c2 * (G + coupled_wd * P).square();
      P -= step_size * M / (V.sqrt() / bc2_sqrt + eps);
    }
  }

  std::span<float> state() override { return state_; }
  void reset() override { std::fill(state_.begin(), state_.end(), 0.0f); }

  Cost cost(int64_t num_params) const override {
    const double n = static_cast<double>(num_params);
    // m: 3, v: 4, sqrt, divide, add eps, divide, update: 5 more; decay 2.
    const double flops_per = 12 + (config_.weight_decay != 0 ? 2 : 0);
    return {n * flops_per, n * 7 * sizeof(float), OpKind::kOptimizer};  // read p g m v, write p m v
  }

 private:
  OptimizerConfig config_;
  bool decoupled_;
  int64_t num_params_;
  std::vector<float> state_;  // m then v
};

}  // namespace

void validate(const OptimizerConfig& c) {
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0, "optimizer.weight_decay",
          c.weight_decay, ">= 0");
  if (c.kind == OptimizerKind::kSgd) {
    require(std::isfinite(c.momentum) && c.momentum >= 0 && c.momentum < 1, "optimizer.momentum",
            c.momentum, "[0, 1)");
    if (c.nesterov && c.momentum == 0) {
      throw UserError("optimizer.nesterov: true needs momentum > 0; allowed: momentum in (0, 1)");
    }
  } else {
    require(c.beta1 >= 0 && c.beta1 < 1, "optimizer.beta1", c.beta1, "[0, 1)");
    require(c.beta2 >= 0 && c.beta2 < 1, "optimizer.beta2", c.beta2, "[0, 1)");
    require(std::isfinite(c.eps) && c.eps > 0, "optimizer.eps", c.eps, "> 0");
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, int64_t num_params) {
  validate(config);
  SYNC_CHECK(num_params >= 0, num_params);
  if (config.kind == OptimizerKind::kSgd) return std::make_unique<Sgd>(config, num_params);
  return std::make_unique<Adam>(config, num_params, config.kind == OptimizerKind::kAdamW);
}

void validate(const ScheduleConfig& c) {
  require(std::isfinite(c.lr) && c.lr >= 0, "schedule.lr", c.lr, ">= 0");
  require(std::isfinite(c.warmup_epochs) && c.warmup_epochs >= 0, "schedule.warmup_epochs",
          c.warmup_epochs, ">= 0");
  require(c.warmup_start_factor >= 0 && c.warmup_start_factor <= 1, "schedule.warmup_start_factor",
          c.warmup_start_factor, "[0, 1]");
  if (c.kind == ScheduleKind::kStep) {
    require(std::isfinite(c.step_size) && c.step_size > 0, "schedule.step_size", c.step_size,
            "> 0");
    require(std::isfinite(c.gamma) && c.gamma > 0, "schedule.gamma", c.gamma, "> 0");
  }
  if (c.kind == ScheduleKind::kCosine) {
    require(c.min_lr >= 0 && c.min_lr <= c.lr, "schedule.min_lr", c.min_lr, "[0, lr]");
    require(std::isfinite(c.total_epochs) && c.total_epochs > c.warmup_epochs,
            "schedule.total_epochs", c.total_epochs, "> warmup_epochs");
  }
}

double learning_rate(const ScheduleConfig& c, double epoch) {
  SYNC_CHECK(epoch >= 0, "epoch " << epoch);
  double lr = c.lr;
  if (c.kind == ScheduleKind::kStep) {
    lr = c.lr * std::pow(c.gamma, std::floor(epoch / c.step_size));
  } else if (c.kind == ScheduleKind::kCosine) {
    double t = (epoch - c.warmup_epochs) / (c.total_epochs - c.warmup_epochs);
    t = std::clamp(t, 0.0, 1.0);
    lr = c.min_lr + (c.lr - c.min_lr) * (1 + std::cos(std::numbers::pi * t)) / 2;
  } else {
    SYNC_CHECK(c.kind == ScheduleKind::kConstant, "schedule kind " << to_string(c.kind));
  }
  if (epoch < c.warmup_epochs) {
    const double s = c.warmup_start_factor;
    lr *= s + (1 - s) * epoch / c.warmup_epochs;
  }
  return lr;
}

}  // namespace syncopate
