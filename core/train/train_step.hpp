#pragma once
// One training step of one worker: the strategy's hooks around forward, loss and backward (on
// the host layer by layer, or on an accelerator in one piece) and the optimizer step, every
// piece of compute accounted on the Executor.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/base/function_ref.hpp"
#include "core/comm/timed_comm.hpp"
#include "core/data/data.hpp"
#include "core/nn/accelerator.hpp"
#include "core/nn/loss.hpp"
#include "core/train/epoch_plan.hpp"
#include "core/train/strategy.hpp"

namespace syncopate {

// Where a step sits in the run.
struct StepPosition {
  int epoch = 0;
  size_t index = 0;    // in the epoch
  int64_t global = 0;  // this worker's steps before it, over the whole run
  // Measure which of the model's parameters and gradients are in memory (resident_param_bytes,
  // resident_grad_bytes) during this step: every step holds them alike, so the trainer asks it
  // of each epoch's first.
  bool measure_memory = false;
};

// What a step adds to the epoch's tally.
struct StepOutcome {
  LossResult loss;
  int64_t samples = 0;  // 0: the step had no samples (its loss means nothing)
};

class TrainStep {
 public:
  // loss: softmax cross-entropy or a regression loss. `step_ctx` carries the seed and the worker;
  // without an accelerator the passes run on the host.
  TrainStep(WorkerContext& ctx, Strategy& strategy, PhaseTimes& phases, const Dataset& train,
            const LossChoice& loss, const StepContext& step_ctx,
            std::unique_ptr<Accelerator> accelerator);

  // Runs `step` at learning rate `lr`. Throws UserError when the loss is NaN or Inf (naming
  // worker, epoch and step).
  StepOutcome run(const PlannedStep& step, const StepPosition& at, double lr);
  // The device the passes run on; nullptr: the host.
  Accelerator* accelerator() const { return accelerator_.get(); }
  // The most bytes of the model's parameters found in memory at once (resident_bytes), over the
  // steps run with StepPosition::measure_memory: after every layer's hook of the passes of a
  // strategy that gives back parameters, otherwise after the step. 0 in cost-only runs.
  size_t resident_param_bytes() const { return resident_param_bytes_; }
  // The same for the model's gradients: after every layer's backward for a strategy that gives
  // back gradients, otherwise after the step.
  size_t resident_grad_bytes() const { return resident_grad_bytes_; }

 private:
  // Runs `math` as compute of `cost`, traced as `name`.
  void compute(std::string_view name, const Cost& cost, FunctionRef<void()> math);
  std::string layer_name(int i) const;
  LossResult forward_backward(const PlannedStep& step);
  LossResult host_pass(float scale);
  LossResult device_pass(int64_t batch, float scale);
  void empty_pass();
  void backward_hooks();
  // After a hook that may have gathered parameters or given them back, in a measured step.
  void after_gather_hook();
  // After a layer's backward, in a measured step.
  void after_backward_math();
  // Raises `most` to the bytes of `buffer` in memory now (not in cost-only runs).
  void measure(std::span<const float> buffer, size_t& most) const;
  void zero_grads();

  WorkerContext& ctx_;
  Strategy& strategy_;
  PhaseTimes& phases_;
  const Dataset& train_;
  const LossChoice loss_;
  const bool cost_only_;
  StepContext step_ctx_;
  std::unique_ptr<Accelerator> accelerator_;
  const Cost zero_cost_;  // zeroing the gradients
  Tensor labels_;
  bool measuring_ = false;  // this step's StepPosition::measure_memory
  size_t resident_param_bytes_ = 0, resident_grad_bytes_ = 0;
};

}  // namespace syncopate
