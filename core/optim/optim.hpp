#pragma once
// Optimizers (SGD with momentum/Nesterov/weight decay, Adam, AdamW) over one flat parameter
// buffer, and learning-rate schedules.
//
// The update rules are PyTorch's (torch.optim.SGD / Adam / AdamW, dampening 0, no amsgrad), so
// a run can be checked against PyTorch step by step. The step number and the learning rate are
// passed in explicitly: the caller owns the schedule and the step count. All optimizer state sits
// in one flat buffer (state()), so a strategy can average it across workers, reset it (the
// paper's code builds a fresh optimizer per block) or keep it.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/base/enum_names.hpp"
#include "core/nn/cost.hpp"

namespace syncopate {

enum class OptimizerKind { kSgd, kAdam, kAdamW };
inline constexpr NameTable<OptimizerKind, 3> kOptimizerKindNames{
    {{OptimizerKind::kSgd, "sgd"},
     {OptimizerKind::kAdam, "adam"},
     {OptimizerKind::kAdamW, "adamw"}}};
inline std::string_view to_string(OptimizerKind kind) { return name_in(kOptimizerKindNames, kind); }

enum class ScheduleKind { kConstant, kStep, kCosine };
inline constexpr NameTable<ScheduleKind, 3> kScheduleKindNames{
    {{ScheduleKind::kConstant, "constant"},
     {ScheduleKind::kStep, "step"},
     {ScheduleKind::kCosine, "cosine"}}};
inline std::string_view to_string(ScheduleKind kind) { return name_in(kScheduleKindNames, kind); }

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  double momentum = 0;      // sgd
  bool nesterov = false;    // sgd; needs momentum > 0 (as PyTorch)
  double weight_decay = 0;  // sgd/adam: added to the gradient; adamw: decoupled
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam/adamw
};

// Throws UserError naming the field ("optimizer.<field>") when a value is out of range.
void validate(const OptimizerConfig& config);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of params (in place) from grads. step counts from 1 (Adam's bias correction
  // uses it); lr is this step's learning rate.
  virtual void step(std::span<float> params, std::span<const float> grads, float lr,
                    int64_t step) = 0;
  // All optimizer state in one flat buffer: SGD with momentum holds the momentum buffer
  // (num_params), plain SGD nothing, Adam/AdamW m then v (2 x num_params). An all-zero state
  // is exactly a fresh optimizer's: PyTorch's first SGD step sets b = g, which equals
  // mu * 0 + g; Adam starts from m = v = 0. After a reset, Adam's caller should count steps
  // from 1 again, as a fresh PyTorch optimizer would.
  virtual std::span<float> state() = 0;
  virtual void reset() = 0;  // state() filled with 0
  // The cost of one step over num_params parameters (OpKind::kOptimizer).
  virtual Cost cost(int64_t num_params) const = 0;
};

// Validates the config; throws UserError for a value out of range.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, int64_t num_params);

// Learning-rate schedules, as functions of the fractional epoch
// (epoch + step / steps_per_epoch, counting from 0):
//   constant: lr
//   step:     lr * gamma^floor(epoch / step_size)
//   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2, t = (epoch - warmup_epochs) /
//             (total_epochs - warmup_epochs) clamped to [0, 1]; so the decay runs over the
//             epochs after warm-up and reaches min_lr at total_epochs.
// Linear warm-up multiplies the schedule by a factor rising linearly from warmup_start_factor
// at epoch 0 to 1 at warmup_epochs (PyTorch's LinearLR), then 1.
struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kConstant;
  double lr = 0.1;
  double warmup_epochs = 0;  // linear warm-up from lr * warmup_start_factor
  double warmup_start_factor = 0.0;
  double step_size = 1;  // epochs, for step
  double gamma = 0.1;
  double min_lr = 0;
  double total_epochs = 1;  // for cosine
};

// Throws UserError naming the field ("schedule.<field>") when a value is out of range.
void validate(const ScheduleConfig& config);
double learning_rate(const ScheduleConfig& config, double epoch);

}  // namespace syncopate
