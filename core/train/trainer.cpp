#include "core/train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/base/check.hpp"
#include "core/comm/timed_comm.hpp"
#include "core/nn/loss.hpp"
#include "core/nn/model.hpp"
#include "core/optim/optim.hpp"
#include "core/train/strategy.hpp"

namespace syncopate {
namespace {

// Prefix of a dataset (copies the first n samples).
Dataset head(const Dataset& data, int64_t n) {
  if (n <= 0 || n >= data.size()) return data;
  std::vector<int64_t> indices(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) indices[static_cast<size_t>(i)] = i;
  Dataset out;
  out.name = data.name;
  out.num_classes = data.num_classes;
  gather_batch(data, indices, out.x, out.y);
  return out;
}

// The first n_train samples for training, the rest for testing.
std::pair<Dataset, Dataset> split(const Dataset& all, int64_t n_train) {
  std::vector<int64_t> first(static_cast<size_t>(n_train)),
      rest(static_cast<size_t>(all.size() - n_train));
  for (int64_t i = 0; i < all.size(); ++i)
    (i < n_train ? first[static_cast<size_t>(i)] : rest[static_cast<size_t>(i - n_train)]) = i;
  std::pair<Dataset, Dataset> parts;
  parts.first.name = parts.second.name = all.name;
  parts.first.num_classes = parts.second.num_classes = all.num_classes;
  gather_batch(all, first, parts.first.x, parts.first.y);
  gather_batch(all, rest, parts.second.x, parts.second.y);
  return parts;
}

// The scenario's training and test sets, shaped for a model taking `sample` and giving
// `outputs` values. Synthetic sets are one draw split in two (train and test share the classes).
std::pair<Dataset, Dataset> load_datasets(const Scenario& s, const Shape& sample, int64_t outputs) {
  const DatasetKind kind = s.data.dataset;
  if (kind == DatasetKind::kFashionMnist) {
    const std::string dir = s.data.dir.empty() ? default_fashion_mnist_dir() : s.data.dir;
    return {load_fashion_mnist(dir, true), load_fashion_mnist(dir, false)};
  }
  const int64_t n = s.data.train_samples > 0 ? s.data.train_samples : 10000;
  const int64_t nt = s.data.test_samples > 0 ? s.data.test_samples : n / 5;
  if (kind == DatasetKind::kSynthetic)
    return split(make_synthetic_classification(n + nt, sample, static_cast<int>(outputs), s.seed),
                 n);
  if (kind == DatasetKind::kSyntheticRegression) {
    Dataset all = make_synthetic_regression(n + nt, numel(sample), outputs, s.seed, s.data.noise);
    Shape x_shape{n + nt};
    x_shape.insert(x_shape.end(), sample.begin(), sample.end());
    all.x.reshape(x_shape);
    return split(all, n);
  }
  Dataset all = load_csv_regression(s.data.path, s.data.targets);  // csv: the last fifth tests
  if (all.sample_numel() != numel(sample))
    throw UserError(s.data.path + ": " + std::to_string(all.sample_numel()) +
                    " feature columns, model " + s.model.name + " takes " +
                    std::to_string(numel(sample)));
  return split(all, all.size() - std::max<int64_t>(1, all.size() / 5));
}

// Parameter/gradient stand-ins for cost-only runs: the collectives need buffers of the right
// length but move no data. One buffer per process, shared by every simulated worker.
std::span<float> cost_only_scratch(size_t n) {
  static std::mutex mutex;
  static std::vector<float> scratch;
  std::lock_guard lock(mutex);
  if (scratch.size() < n) scratch.resize(n);
  return {scratch.data(), n};
}

// One step's worth of work for one worker.
struct Step {
  std::vector<int64_t> samples;  // dataset indices (empty in cost-only runs)
  int64_t size = 0;              // samples in this step
  bool block_begin = false;      // first step of a ds-tensor block
  GlobalBatch global;            // the step's global batch (global order only)
};

// The steps of one epoch for one worker.
std::vector<Step> plan_epoch(const Scenario& s, const TrainData& data, int worker, int epoch,
                             bool cost_only) {
  std::vector<Step> steps;
  const int64_t b = s.batch_size;
  const int workers = s.workers;
  const auto ep = static_cast<uint32_t>(epoch);
  if (s.data_order() == DataOrder::kGlobal) {
    const int64_t n = data.train->size();
    const int64_t total = ddp_steps_per_epoch(n, workers, b);
    std::vector<int64_t> perm;
    if (!cost_only) perm = global_permutation(n, s.seed, ep);
    for (int64_t k = 0; k < total; ++k) {
      Step step;
      step.global = {std::min(b * workers, n - k * b * workers), workers};
      step.size = step.global.count_of(worker);
      if (!cost_only) {
        step.samples = ddp_worker_indices(perm, worker, workers, b, k);
        SYNC_CHECK(static_cast<int64_t>(step.samples.size()) == step.size,
                   step.samples.size() << " vs " << step.size);
      }
      steps.push_back(std::move(step));
    }
    return steps;
  }
  const DsTensor& ds = *data.blocks;
  for (int64_t block : ds.blocks_of_worker(s.seed, ep, worker, workers)) {
    std::vector<int64_t> samples;
    int64_t count = ds.row_range(block).size();
    if (!cost_only) samples = ds.samples_of_block(block, s.seed, ep, s.data.shuffle_in_block);
    for (int64_t start = 0; start < count; start += b) {
      Step step;
      step.size = std::min(b, count - start);
      step.block_begin = start == 0;
      if (!cost_only)
        step.samples.assign(samples.begin() + start, samples.begin() + start + step.size);
      steps.push_back(std::move(step));
    }
  }
  return steps;
}

// Everything a step changes in the records, to detect and extrapolate steady state.
struct StepDelta {
  double time = 0, compute = 0, comm = 0, idle = 0;
  uint64_t sent = 0, recv = 0;
  bool same_as(const StepDelta& o) const {
    const auto close = [](double a, double b) {
      return std::abs(a - b) <= 1e-9 * std::max({std::abs(a), std::abs(b), 1e-12});
    };
    return close(time, o.time) && close(compute, o.compute) && close(comm, o.comm) &&
           close(idle, o.idle) && sent == o.sent && recv == o.recv;
  }
};

}  // namespace

TrainData prepare_data(const Scenario& s, bool cost_only) {
  TrainData data;
  auto model = make_model(s.model.name, Storage::kShapeOnly);
  const Shape sample = model->sample_shape();
  const int64_t outputs = model->output_shape(1).back();
  if (cost_only) {
    int64_t n = s.sim.cost_only_train_samples;
    if (n <= 0) n = s.data.train_samples > 0 ? s.data.train_samples : 60000;
    Dataset shapes;
    shapes.name = "cost-only";
    Shape x_shape{n};
    x_shape.insert(x_shape.end(), sample.begin(), sample.end());
    shapes.x = Tensor::shape_only(x_shape);
    shapes.y = Tensor::shape_only({n});
    shapes.num_classes = static_cast<int>(outputs);
    data.train = std::make_shared<const Dataset>(std::move(shapes));
  } else {
    auto [train, test] = load_datasets(s, sample, outputs);
    train = head(train, s.data.train_samples);
    test = head(test, s.data.test_samples);
    if (s.data.normalize) {
      const Normalizer norm = fit_normalizer(train, false);
      apply(norm, train);
      apply(norm, test);
    }
    data.train = std::make_shared<const Dataset>(std::move(train));
    data.test = std::make_shared<const Dataset>(std::move(test));
  }
  if (s.data_order() == DataOrder::kBlocks) {
    const int64_t blocks = s.row_blocks();
    if (blocks > data.train->size())
      throw UserError(s.source + ": data.blocks: " + std::to_string(blocks) + " blocks for " +
                      std::to_string(data.train->size()) + " samples");
    data.blocks = DsTensor::from_dataset(data.train, blocks);
  }
  return data;
}

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

namespace {

void check_loss(const LossResult& r, int rank, int epoch, size_t step) {
  if (std::isfinite(r.loss)) return;
  std::ostringstream message;
  message << "worker " << rank << ", epoch " << epoch << ", step " << step
          << ": the training loss is " << r.loss
          << "; stopping (lower schedule.lr or check the data)";
  throw UserError(message.str());
}

// Steady-state fast-forward of cost-only runs. Every step's cost is recorded; once the last
// two periods (of sync_period steps, the strategy's synchronisation period) cost exactly the
// same, whole periods are skipped: the clock advances by their time and the records by their
// amounts. Never skipped: a step of another batch size, a block's first step (its hooks run),
// and the epoch's last step. Workers that synchronise every period decide together
// (Executor::all_agree, at the same step on every worker); others decide alone.
class FastForward {
 public:
  void record(const StepDelta& delta) { history_.push_back(delta); }

  // Called after step k; returns how many of the following steps were skipped.
  size_t try_skip(size_t k, const std::vector<Step>& steps, int64_t sync, Executor& exec,
                  StepDelta& skipped) {
    const size_t period = static_cast<size_t>(std::max<int64_t>(sync, 1));
    if (history_.size() % period != 0) return 0;
    const auto periods = static_cast<int64_t>(history_.size() / period);
    // Tries after 3..8 periods of steady state, then at powers of two: soon, and cheaply.
    if (periods < 3 || (periods > 8 && (periods & (periods - 1)) != 0)) return 0;
    size_t limit = k + 1;  // the first step that must run
    while (limit + 1 < steps.size() && steps[limit].size == steps[k].size &&
           !steps[limit].block_begin)
      ++limit;
    const size_t remaining = (limit - (k + 1)) / period;
    const StepDelta last = sum(history_.size() - period, history_.size());
    const StepDelta before = sum(history_.size() - 2 * period, history_.size() - period);
    const bool vote = remaining > 0 && last.same_as(before);
    if (!(sync > 0 ? exec.all_agree(vote) : vote)) return 0;
    const double r = static_cast<double>(remaining);
    exec.advance(r * last.time);
    skipped.time += r * last.time;
    skipped.compute += r * last.compute;
    skipped.comm += r * last.comm;
    skipped.idle += r * last.idle;
    skipped.sent += remaining * last.sent;
    skipped.recv += remaining * last.recv;
    history_.clear();
    return remaining * period;
  }

 private:
  StepDelta sum(size_t from, size_t to) const {
    StepDelta d;
    for (size_t i = from; i < to; ++i) {
      d.time += history_[i].time;
      d.compute += history_[i].compute;
      d.comm += history_[i].comm;
      d.idle += history_[i].idle;
      d.sent += history_[i].sent;
      d.recv += history_[i].recv;
    }
    return d;
  }
  std::vector<StepDelta> history_;
};

}  // namespace

WorkerReport train_worker(const Scenario& s, const TrainData& data, Communicator& raw_comm,
                          Executor& exec, const AcceleratorFactory& accelerator_factory) {
  const bool cost_only = exec.cost_only();
  const bool classify = s.loss == LossKind::kCrossEntropy;
  auto model = make_model(s.model.name, cost_only ? Storage::kShapeOnly : Storage::kReal);
  if (!cost_only) model->init(s.seed);
  const std::unique_ptr<Accelerator> accelerator =
      accelerator_factory && !cost_only ? accelerator_factory(*model) : nullptr;
  auto optimizer = make_optimizer(s.optimizer, cost_only ? 0 : model->num_params());
  const ScheduleConfig& sc = s.schedule;

  PhaseTimes phases;
  TimedCommunicator comm(raw_comm, exec, phases);
  const int rank = comm.rank();
  WorkerReport report;
  report.worker = rank;
  const auto n_params = static_cast<size_t>(model->num_params());
  std::span<float> params = cost_only ? cost_only_scratch(n_params) : model->params();
  std::span<float> grads = cost_only ? cost_only_scratch(n_params) : model->grads();
  WorkerContext ctx{s, *model, *optimizer, comm, exec, report.trace, 0, 0, params, grads};
  auto strategy = make_strategy(s);
  strategy->on_train_begin(ctx);

  const auto compute = [&](const Cost& cost, auto&& math) {
    const double t = exec.now();
    exec.compute(cost, math);
    phases.compute_s += exec.now() - t;
  };
  const Cost zero_cost{0, 4.0 * static_cast<double>(n_params), OpKind::kElementwise};
  const Cost step_cost = optimizer->cost(model->num_params());
  StepContext step_ctx{Mode::kTrain, s.seed, static_cast<uint32_t>(rank), 0, 0};
  Tensor labels;
  int64_t global_step = 0;

  // One batch's forward, loss and backward on the host, layer by layer: each layer's cost is
  // accounted, and each bucket's allreduce starts as soon as backward has filled it.
  const auto host_pass = [&](float scale) {
    for (int i = 0; i < model->num_layers(); ++i)
      compute(model->forward_cost(i), [&] { model->forward_layer(i, step_ctx); });
    LossResult r{};
    compute(loss_cost(model->output().shape()), [&] {
      Tensor& dout = model->output_grad();
      r = classify ? softmax_cross_entropy(model->output(), labels, &dout)
                   : mse(model->output(), labels, &dout);
      if (scale != 1.0f)
        for (float& g : dout.span()) g *= scale;
    });
    compute(zero_cost, [&] { model->zero_grads(); });
    for (int i = model->num_layers() - 1; i >= 0; --i) {
      compute(model->backward_cost(i), [&] { model->backward_layer(i); });
      strategy->after_backward_layer(ctx, i);
    }
    return r;
  };
  // The same on the accelerator, as one piece; the buckets start when the gradients are back.
  const auto device_pass = [&](int64_t batch, float scale) {
    Cost pass = loss_cost(model->output_shape(batch));
    for (int i = 0; i < model->num_layers(); ++i) {
      pass.flops += model->forward_cost(i).flops + model->backward_cost(i).flops;
      pass.bytes += model->forward_cost(i).bytes + model->backward_cost(i).bytes;
    }
    LossResult r{};
    compute(pass, [&] {
      r = accelerator->forward_backward(params, model->input(), labels, classify, scale, step_ctx,
                                        grads);
    });
    for (int i = model->num_layers() - 1; i >= 0; --i) strategy->after_backward_layer(ctx, i);
    return r;
  };

  for (int epoch = 0; epoch < s.epochs; ++epoch) {
    ctx.epoch = epoch;
    const std::vector<Step> steps = plan_epoch(s, data, rank, epoch, cost_only);
    strategy->on_epoch_begin(ctx);
    const PhaseTimes at_start = phases;
    const CommCounters counters_at_start = comm.counters();
    const double start = exec.now();
    double loss_sum = 0, lr = 0;
    int64_t correct = 0, seen = 0;
    StepDelta skipped;  // what fast-forwarded steps would have added
    std::optional<FastForward> fast_forward;
    if (cost_only && s.sim.fast_forward) fast_forward.emplace();

    for (size_t k = 0; k < steps.size(); ++k) {
      const Step& st = steps[k];
      const double t0 = exec.now();
      const PhaseTimes p0 = phases;
      const CommCounters c0 = comm.counters();
      if (st.block_begin) strategy->on_block_begin(ctx);
      lr = learning_rate(sc, epoch + static_cast<double>(k) / static_cast<double>(steps.size()));
      step_ctx.epoch = static_cast<uint32_t>(epoch);
      step_ctx.step = static_cast<uint32_t>(global_step);
      if (st.size > 0) {
        model->set_batch(st.size);
        if (!cost_only) gather_batch(*data.train, st.samples, model->input(), labels);
        const float scale = strategy->gradient_scale(ctx, st.global);
        const LossResult r = accelerator ? device_pass(st.size, scale) : host_pass(scale);
        if (!cost_only) check_loss(r, rank, epoch, k);
        loss_sum += r.loss * static_cast<double>(st.size);
        correct += r.correct;
        seen += st.size;
      } else {  // no samples this step (uneven last global batch): contribute zeros
        compute(zero_cost, [&] { model->zero_grads(); });
        for (int i = model->num_layers() - 1; i >= 0; --i) strategy->after_backward_layer(ctx, i);
      }
      strategy->before_step(ctx);
      compute(step_cost, [&] {
        optimizer->step(params, grads, static_cast<float>(lr), ++ctx.optimizer_steps);
      });
      ++global_step;
      strategy->after_step(ctx, global_step);

      const CommCounters c1 = comm.counters();
      if (!fast_forward) continue;
      fast_forward->record({exec.now() - t0, phases.compute_s - p0.compute_s,
                            phases.comm_s - p0.comm_s, phases.idle_s - p0.idle_s,
                            c1.bytes_sent - c0.bytes_sent, c1.bytes_recv - c0.bytes_recv});
      const size_t n = fast_forward->try_skip(k, steps, strategy->sync_period(ctx), exec, skipped);
      k += n;
      global_step += static_cast<int64_t>(n);
      ctx.optimizer_steps += static_cast<int64_t>(n);
    }

    strategy->on_epoch_end(ctx);
    if (epoch + 1 == s.epochs) strategy->on_train_end(ctx);
    const double end = exec.now();
    report.trace.push_back({"epoch " + std::to_string(epoch), "epoch", rank, start, end - start});

    EpochMetrics m;
    m.worker = rank;
    m.epoch = epoch;
    m.start_s = start;
    m.end_s = end;
    m.compute_s = phases.compute_s - at_start.compute_s + skipped.compute;
    m.comm_s = phases.comm_s - at_start.comm_s + skipped.comm;
    m.idle_s = phases.idle_s - at_start.idle_s + skipped.idle;
    // Whatever is neither compute nor communication (host-side work, data loading) is idle.
    // (A residue below 1e-9 of the epoch is rounding in the subtraction, not time.)
    const double rest = (end - start) - m.compute_s - m.comm_s - m.idle_s;
    if (rest > 1e-9 * (end - start)) m.idle_s += rest;
    const CommCounters counters = comm.counters();
    m.bytes_sent = counters.bytes_sent - counters_at_start.bytes_sent + skipped.sent;
    m.bytes_recv = counters.bytes_recv - counters_at_start.bytes_recv + skipped.recv;
    m.train_loss = seen > 0 ? loss_sum / static_cast<double>(seen) : 0.0;
    m.train_accuracy = seen > 0 && classify ? static_cast<double>(correct) / seen : 0.0;
    m.lr = lr;
    if (!cost_only && s.eval_every_epoch && data.test)
      m.test_accuracy = evaluate(*model, *data.test, s.loss).accuracy;
    report.epochs.push_back(m);
  }
  report.steps = static_cast<uint64_t>(global_step);
  if (!cost_only) {
    if (rank == 0 && data.test) {
      const Evaluation final_eval = evaluate(*model, *data.test, s.loss);
      report.final_test_accuracy = final_eval.accuracy;
      report.final_test_loss = final_eval.loss;
    }
    report.final_params.assign(params.begin(), params.end());
  }
  return report;
}

}  // namespace syncopate
