// Timing the scenario's model on the host: each layer pass, the loss, the optimizer, the step.
#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "app/calibrate.hpp"
#include "core/data/data.hpp"
#include "core/nn/loss.hpp"
#include "core/nn/model.hpp"
#include "core/optim/optim.hpp"
#include "core/train/train_data.hpp"

namespace syncopate::app {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds `work` takes, appended to `series` when `keep`.
template <typename Work>
double timed(Series& series, bool keep, Work&& work) {
  const double start = now_s();
  work();
  const double seconds = now_s() - start;
  if (keep) series.seconds.push_back(seconds);
  return seconds;
}

ComputeSamples empty_samples(const Model& model, const Optimizer& optimizer) {
  ComputeSamples samples;
  samples.batch = model.batch();
  for (int i = 0; i < model.num_layers(); ++i) {
    Cost forward = model.forward_cost(i), backward = model.backward_cost(i);
    const Shape input(forward.layer.input.begin(), forward.layer.input.end());
    const Shape output(forward.layer.output.begin(), forward.layer.output.end());
    // The key's shapes view the model: keep only the pass beyond this function.
    forward.layer.input = forward.layer.output = backward.layer.input = backward.layer.output = {};
    samples.layers.push_back({std::string(model.layer(i).kind()),
                              input,
                              output,
                              {"forward", forward, {}},
                              {"backward", backward, {}}});
  }
  // A ReLU that the next layer absorbs (Model::relu_absorbed) runs inside that layer's passes:
  // its work is timed there, so its flops and bytes count there too, and its own passes (about
  // 0 s) feed no fallback speed.
  for (int i = 0; i + 1 < model.num_layers(); ++i) {
    if (!model.relu_absorbed(i)) continue;
    LayerSeries& relu = samples.layers[static_cast<size_t>(i)];
    LayerSeries& next = samples.layers[static_cast<size_t>(i) + 1];
    for (auto [from, to] :
         {std::pair{&relu.forward, &next.forward}, std::pair{&relu.backward, &next.backward}}) {
      to->cost.flops += from->cost.flops;
      to->cost.bytes += from->cost.bytes;
      from->cost.flops = from->cost.bytes = 0;
    }
  }
  // Likewise a backward pass that runs inside an earlier layer's (Model::backward_runs_in: a
  // pool streaming its input gradient into the convolution before it), with its ReLU's.
  for (int i = 0; i < model.num_layers(); ++i) {
    const int host = model.backward_runs_in(i);
    if (host == i || model.relu_absorbed(i)) continue;
    Series& from = samples.layers[static_cast<size_t>(i)].backward;
    Series& to = samples.layers[static_cast<size_t>(host)].backward;
    to.cost.flops += from.cost.flops;
    to.cost.bytes += from.cost.bytes;
    from.cost.flops = from.cost.bytes = 0;
  }
  samples.loss = {"loss", loss_cost(model.output().shape()), {}};
  samples.zero_grad = {
      "zero_grad",
      {.bytes = 4.0 * static_cast<double>(model.num_params()), .kind = OpKind::kElementwise},
      {}};
  samples.optimizer = {"optimizer", optimizer.cost(model.num_params()), {}};
  samples.overhead = {"step_overhead", {}, {}};
  samples.parts = {"step_compute", {}, {}};
  return samples;
}

}  // namespace

ComputeSamples time_compute(const Scenario& scenario, int repeats, double pace_window_s,
                            FunctionRef<void()> start_pace) {
  const auto model = make_model(scenario.model.name, Storage::kReal);
  model->init(scenario.seed);
  const auto optimizer = make_optimizer(scenario.optimizer, model->num_params());
  const bool classify = scenario.loss == LossKind::kCrossEntropy;
  model->set_batch(scenario.batch_size);
  // Every step gathers its batch from the scenario's training set in a shuffled order, as the
  // trainer does: the copy of samples from all over the set is part of the step's overhead.
  const TrainData data = prepare_data(scenario, false);
  // A set smaller than a batch (data.train_samples) repeats its samples within the batch.
  const std::vector<int64_t> order = global_permutation(data.train->size(), scenario.seed, 0);
  std::vector<int64_t> batch(static_cast<size_t>(scenario.batch_size));
  size_t next = 0;
  Tensor labels;
  ComputeSamples s = empty_samples(*model, *optimizer);
  StepContext ctx{.seed = scenario.seed};
  // One training step, every pass timed; the timings kept in the series when `keep`.
  const auto step = [&](int r, bool keep) {
    double parts = 0;
    for (int64_t& i : batch) i = order[next++ % order.size()];
    const double start = now_s();
    gather_batch(*data.train, batch, model->input(), labels);
    for (int i = 0; i < model->num_layers(); ++i)
      parts += timed(s.layers[static_cast<size_t>(i)].forward, keep,
                     [&] { model->forward_layer(i, ctx); });
    parts += timed(s.loss, keep, [&] {
      if (classify)
        softmax_cross_entropy(model->output(), labels, &model->output_grad());
      else
        mse(model->output(), labels, &model->output_grad());
    });
    parts += timed(s.zero_grad, keep, [&] { model->zero_grads(); });
    for (int i = model->num_layers() - 1; i >= 0; --i) {
      Series& backward = s.layers[static_cast<size_t>(i)].backward;
      if (backward.cost.layer.pass == Pass::kNone) {  // skipped: nothing upstream needs it
        if (keep) backward.seconds.push_back(0);
        continue;
      }
      parts += timed(backward, keep, [&] { model->backward_layer(i); });
    }
    parts += timed(s.optimizer, keep,
                   [&] { optimizer->step(model->params(), model->grads(), 1e-6f, r + 1); });
    if (keep) {
      s.overhead.seconds.push_back(std::max(0.0, now_s() - start - parts));
      s.parts.seconds.push_back(parts);
    }
  };
  const int warmup = std::max(3, repeats / 10);
  for (int r = 0; r < warmup + repeats; ++r) step(r, r >= warmup);
  // The rank's pace: whole steps, one after another as in training, for pace_window_s.
  if (pace_window_s > 0) {
    start_pace();
    const double begin = now_s();
    int steps = 0;
    do step(warmup + repeats + steps++, false);
    while (now_s() - begin < pace_window_s);
    s.pace_step_s = (now_s() - begin) / steps;
  }
  return s;
}

}  // namespace syncopate::app
