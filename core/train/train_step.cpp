// A worker's training step: forward, loss and backward on the host or an accelerator, with the
// strategy's hooks, then the optimizer step.
#include "core/train/train_step.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/base/check.hpp"
#include "core/base/resident_pages.hpp"

namespace syncopate {
namespace {

void check_loss(const LossResult& r, int rank, int epoch, size_t step) {
  if (std::isfinite(r.loss)) return;
  std::ostringstream message;
  message << "worker " << rank << ", epoch " << epoch << ", step " << step
          << ": the training loss is " << r.loss
          << "; stopping (lower schedule.lr or check the data)";
  throw UserError(message.str());
}

}  // namespace

TrainStep::TrainStep(WorkerContext& ctx, Strategy& strategy, PhaseTimes& phases,
                     const Dataset& train, const LossChoice& loss, const StepContext& step_ctx,
                     std::unique_ptr<Accelerator> accelerator)
    : ctx_(ctx),
      strategy_(strategy),
      phases_(phases),
      train_(train),
      loss_(loss),
      cost_only_(ctx.exec.cost_only()),
      step_ctx_(step_ctx),
      accelerator_(std::move(accelerator)),
      zero_cost_{.bytes = 4.0 * static_cast<double>(ctx.model.num_params()),
                 .kind = OpKind::kElementwise} {}

StepOutcome TrainStep::run(const PlannedStep& step, const StepPosition& at, double lr) {
  ctx_.exec.begin_step();
  if (step.block_begin) strategy_.on_block_begin(ctx_);
  step_ctx_.epoch = static_cast<uint32_t>(at.epoch);
  step_ctx_.step = static_cast<uint32_t>(at.global);
  measuring_ = at.measure_memory;
  StepOutcome outcome;
  if (step.size > 0) {
    outcome = {forward_backward(step), step.size};
    if (!cost_only_) check_loss(outcome.loss, ctx_.comm.rank(), at.epoch, at.index);
  } else {  // no samples this step (uneven last global batch): contribute zeros
    empty_pass();
  }
  strategy_.before_step(ctx_);
  const OptimizerTarget target = strategy_.optimizer_target(ctx_);
  compute("optimizer", target.optimizer.cost(static_cast<int64_t>(target.params.size())), [&] {
    target.optimizer.step(target.params, target.grads, static_cast<float>(lr),
                          ++ctx_.optimizer_steps);
  });
  strategy_.after_step(ctx_, at.global + 1);
  if (measuring_ && !strategy_.gives_back_parameters()) measure(ctx_.params, resident_param_bytes_);
  if (measuring_ && !strategy_.gives_back_gradients()) measure(ctx_.grads, resident_grad_bytes_);
  return outcome;
}

void TrainStep::compute(std::string_view name, const Cost& cost, FunctionRef<void()> math) {
  const double start = ctx_.exec.now();
  ctx_.exec.compute(cost, math);
  const double end = ctx_.exec.now();
  phases_.compute_s += end - start;
  if (ctx_.tracer.detail_on()) ctx_.tracer.span(name, "compute", start, end);
}

void TrainStep::after_gather_hook() {
  if (measuring_ && strategy_.gives_back_parameters()) measure(ctx_.params, resident_param_bytes_);
}

// Right after a layer's backward, before its hook: the bucket it filled is still in memory.
void TrainStep::after_backward_math() {
  if (measuring_ && strategy_.gives_back_gradients()) measure(ctx_.grads, resident_grad_bytes_);
}

void TrainStep::measure(std::span<const float> buffer, size_t& most) const {
  if (!cost_only_) most = std::max(most, resident_bytes(buffer.data(), buffer.size_bytes()));
}

// Zeroing the gradients before backward, unless the strategy left them zeroed (giving their pages
// back): the cost is accounted alike, as the kernel zeroes each page given back when backward
// writes it again.
void TrainStep::zero_grads() {
  compute("zero_grad", zero_cost_, [&] {
    if (!strategy_.gradients_zeroed()) ctx_.model.zero_grads();
  });
}

// Layer i's name in the trace ("" when the step is not traced: no string is built).
std::string TrainStep::layer_name(int i) const {
  if (!ctx_.tracer.detail_on()) return {};
  return std::string(ctx_.model.layer(i).kind()) + " " + std::to_string(i);
}

LossResult TrainStep::forward_backward(const PlannedStep& step) {
  Model& model = ctx_.model;
  model.set_batch(step.size);
  if (!cost_only_) gather_batch(train_, step.samples, model.input(), labels_);
  const float scale = strategy_.gradient_scale(ctx_, step.global);
  return accelerator_ ? device_pass(step.size, scale) : host_pass(scale);
}

// Forward, loss and backward on the host, layer by layer: each layer's cost is accounted, and
// each bucket's allreduce starts as soon as backward has filled it.
LossResult TrainStep::host_pass(float scale) {
  Model& model = ctx_.model;
  const double forward_start = ctx_.exec.now();
  for (int i = 0; i < model.num_layers(); ++i) {
    strategy_.before_forward_layer(ctx_, i);
    after_gather_hook();
    compute(layer_name(i), model.forward_cost(i), [&] { model.forward_layer(i, step_ctx_); });
  }
  ctx_.tracer.span("forward", "compute", forward_start, ctx_.exec.now());
  LossResult r{};
  compute("loss", loss_cost(model.output().shape()), [&] {
    Tensor& dout = model.output_grad();
    r = compute_loss(loss_, model.output(), labels_, &dout);
    if (scale != 1.0f)
      for (float& g : dout.span()) g *= scale;
  });
  zero_grads();
  const double backward_start = ctx_.exec.now();
  for (int i = model.num_layers() - 1; i >= 0; --i) {
    strategy_.before_backward_layer(ctx_, i);
    after_gather_hook();
    compute(layer_name(i), model.backward_cost(i), [&] { model.backward_layer(i); });
    after_backward_math();
    strategy_.after_backward_layer(ctx_, i);
  }
  ctx_.tracer.span("backward", "compute", backward_start, ctx_.exec.now());
  return r;
}

// The same on the accelerator, as one piece; the buckets start when the gradients are back.
LossResult TrainStep::device_pass(int64_t batch, float scale) {
  Model& model = ctx_.model;
  Cost pass = loss_cost(model.output_shape(batch));
  for (int i = 0; i < model.num_layers(); ++i) {
    pass.flops += model.forward_cost(i).flops + model.backward_cost(i).flops;
    pass.bytes += model.forward_cost(i).bytes + model.backward_cost(i).bytes;
  }
  for (int i = 0; i < model.num_layers(); ++i) strategy_.before_forward_layer(ctx_, i);
  after_gather_hook();
  LossResult r{};
  compute("forward+backward", pass, [&] {
    r = accelerator_->forward_backward(ctx_.params, model.input(), labels_, loss_.classify(), scale,
                                       step_ctx_, ctx_.grads);
  });
  backward_hooks();
  return r;
}

// The backward hooks of every layer, last to first, after a pass that ran in one piece.
void TrainStep::backward_hooks() {
  for (int i = ctx_.model.num_layers() - 1; i >= 0; --i) {
    strategy_.before_backward_layer(ctx_, i);
    strategy_.after_backward_layer(ctx_, i);
  }
}

// A step without samples: zero gradients, so that the collectives still match.
void TrainStep::empty_pass() {
  for (int i = 0; i < ctx_.model.num_layers(); ++i) strategy_.before_forward_layer(ctx_, i);
  zero_grads();
  backward_hooks();
}

}  // namespace syncopate
