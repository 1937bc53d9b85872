// The worker loop: the worker's model, optimizer and strategy, then per epoch: plan the steps,
// run them (skipping the steady state of cost-only runs), meter the epoch and evaluate.
#include "core/train/trainer.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "core/comm/timed_comm.hpp"
#include "core/nn/model.hpp"
#include "core/optim/optim.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/epoch_meter.hpp"
#include "core/train/epoch_plan.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/fast_forward.hpp"
#include "core/train/rescale.hpp"
#include "core/train/run_files.hpp"
#include "core/train/strategy.hpp"
#include "core/train/train_step.hpp"

namespace syncopate {
namespace {

// Parameter/gradient stand-ins for cost-only runs: the collectives need buffers of the right
// length but move no data. One buffer per process, shared by every simulated worker. It is
// never written, so it is left uninitialised: the pages of a model of billions of parameters
// are then never touched.
std::span<float> cost_only_scratch(size_t n) {
  static std::mutex mutex;
  static std::unique_ptr<float[]> scratch;
  static size_t size = 0;
  std::lock_guard lock(mutex);
  if (size < n) {
    scratch = std::make_unique_for_overwrite<float[]>(n);
    size = n;
  }
  return {scratch.get(), n};
}

// The worker's model (initialised from the seed unless cost-only), the accelerator its passes
// run on (none: the host) and its optimizer.
struct WorkerModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Accelerator> accelerator;
  std::unique_ptr<Optimizer> optimizer;
};

WorkerModel make_worker_model(const Scenario& s, bool cost_only,
                              const AcceleratorFactory& accelerator_factory) {
  WorkerModel w;
  const ModelSpec spec = s.model.spec();
  if (const int i = first_cost_only_layer(spec); i >= 0 && !cost_only) {
    throw UserError(s.source + ": model " + spec.name + ": layer " + std::to_string(i) + " (" +
                    std::string(to_string(spec.layers[static_cast<size_t>(i)].kind)) +
                    ") has no math, only costs; run it cost-only (backend = \"sim\", "
                    "sim.mode = \"cost_only\")");
  }
  w.model = make_model(spec, cost_only ? Storage::kShapeOnly : Storage::kReal);
  if (!cost_only) w.model->init(s.seed);
  if (accelerator_factory && !cost_only) w.accelerator = accelerator_factory(*w.model);
  // zero holds the optimizer state of its shard only (zero.cpp).
  const bool own_state = !cost_only && s.strategy.kind != StrategyKind::kZero;
  w.optimizer = make_optimizer(s.optimizer, own_state ? w.model->num_params() : 0);
  return w;
}

// The final model: every worker's parameters, and rank 0's evaluation of them. Rank 0 is worker
// 0, or, once an elastic run lost worker 0, the lowest-ranked survivor: its model is the run's.
void record_final_model(WorkerReport& report, int rank, Model& model, std::span<const float> params,
                        const TrainData& data, const Scenario& s, Accelerator* accelerator) {
  report.run_model = rank == 0;
  if (report.run_model && data.test) {
    const Evaluation final_eval = evaluate(model, *data.test, {s.loss, s.huber_delta}, accelerator);
    report.final_test_accuracy = final_eval.accuracy;
    report.final_test_loss = final_eval.loss;
    report.final_test_errors = final_eval.errors;
  }
  report.final_params.assign(params.begin(), params.end());
}

// Where the epoch stands after its k-th step, for the progress display.
Progress step_progress(const LossTally& tally, bool classify, int epoch, int epochs, size_t k,
                       const std::vector<PlannedStep>& steps, const Executor& exec) {
  const bool seen = tally.seen > 0 && !exec.cost_only();
  const double n = static_cast<double>(tally.seen);
  return {.epoch = epoch,
          .epochs = epochs,
          .step = k,
          .steps = steps.size(),
          .loss = seen ? tally.loss_sum / n : -1,
          .accuracy = seen && classify ? static_cast<double>(tally.correct) / n : -1,
          .time_s = exec.now()};
}

// What the worker loop carries from epoch to epoch besides the model and the strategy.
struct LoopState {
  int first_epoch = 0;
  int64_t global_step = 0;
  int64_t first_step = 0;   // > 0: first_epoch continues there (a mid-epoch checkpoint)
  std::string epoch_state;  // then: its meters so far (epoch_state_of)
};

// The meters of an epoch cut by a mid-epoch checkpoint: its start reading, whose byte counters
// are kept as an offset from their values `now` (a resumed communicator counts from 0), and the
// loss tally so far.
std::string epoch_state_of(const EpochMeter& meter, const LossTally& tally,
                           const MeterReading& now) {
  const MeterReading& start = meter.start_reading();
  ByteWriter w;
  for (const double v : {start.time, start.phases.compute_s, start.phases.comm_s,
                         start.phases.idle_s, start.phases.comm_total_s})
    w.put<double>(v);
  w.put<uint64_t>(start.counters.bytes_sent - now.counters.bytes_sent);  // modulo 2^64
  w.put<uint64_t>(start.counters.bytes_recv - now.counters.bytes_recv);
  w.put<double>(tally.loss_sum);
  w.put<int64_t>(tally.correct);
  w.put<int64_t>(tally.seen);
  w.put<double>(tally.lr);
  return w.bytes();
}

// An epoch's start reading and loss tally: fresh, or as a mid-epoch checkpoint left them.
struct EpochStart {
  MeterReading start;
  LossTally tally;
};
EpochStart begin_epoch(const LoopState& loop, int epoch, const MeterReading& now) {
  if (epoch != loop.first_epoch || loop.first_step == 0) return {now, {}};
  ByteReader r(loop.epoch_state, "checkpoint: the meters of epoch " + std::to_string(epoch));
  EpochStart e;
  for (double* v : {&e.start.time, &e.start.phases.compute_s, &e.start.phases.comm_s,
                    &e.start.phases.idle_s, &e.start.phases.comm_total_s})
    *v = r.get<double>();
  e.start.counters.bytes_sent = r.get<uint64_t>() + now.counters.bytes_sent;
  e.start.counters.bytes_recv = r.get<uint64_t>() + now.counters.bytes_recv;
  e.tally.loss_sum = r.get<double>();
  e.tally.correct = r.get<int64_t>();
  e.tally.seen = r.get<int64_t>();
  e.tally.lr = r.get<double>();
  if (!r.done())
    throw UserError("checkpoint: the meters of epoch " + std::to_string(epoch) +
                    " are longer than expected");
  return e;
}

// On resume: the parameters of the worker checkpointed last (the latest clock), which every
// worker's on_train_begin then sees (epoch_async: the global model after the last merge).
std::vector<float> resume_start_params(const std::vector<WorkerCheckpoint>& set) {
  const WorkerCheckpoint* latest = &set.front();
  for (const WorkerCheckpoint& c : set)
    if (c.clock.at(0) > latest->clock.at(0)) latest = &c;
  return latest->params;
}

void copy_checked(std::span<const float> from, std::span<float> to, const std::string& what) {
  if (from.size() != to.size())
    throw UserError(what + ": " + std::to_string(from.size()) + " values where the scenario has " +
                    std::to_string(to.size()));
  std::copy(from.begin(), from.end(), to.begin());
}

// A worker's state at the end of an epoch, as a checkpoint.
WorkerCheckpoint checkpoint_of(const WorkerContext& ctx, const Strategy& strategy,
                               const PhaseTimes& phases, const WorkerReport& report,
                               const LoopState& loop, bool cost_only) {
  WorkerCheckpoint c;
  c.worker = ctx.comm.rank();
  c.workers = ctx.comm.size();
  c.next_epoch = loop.first_epoch;
  c.next_step = loop.first_step;
  c.epoch_state = loop.epoch_state;
  c.global_step = loop.global_step;
  c.optimizer_steps = ctx.optimizer_steps;
  c.clock = ctx.exec.clock_state();
  c.phases = phases;
  if (!cost_only) {
    c.params.assign(ctx.params.begin(), ctx.params.end());
    const std::span<float> state = ctx.optimizer.state();
    c.optimizer_state.assign(state.begin(), state.end());
  }
  ByteWriter strategy_state;
  strategy.save_state(ctx, strategy_state);
  c.strategy_state = strategy_state.bytes();
  c.report = serialize_report(report);
  c.resizes = report.resizes;
  return c;
}

// Puts a worker back where its checkpoint left it (after on_train_begin). A resized run's
// strategy starts afresh (rescale.hpp): its state is not restored.
void restore_worker(const WorkerCheckpoint& c, WorkerContext& ctx, Strategy& strategy,
                    PhaseTimes& phases, WorkerReport& report, LoopState& loop, bool cost_only,
                    bool resized) {
  const std::string what = "checkpoint of worker " + std::to_string(c.worker);
  if (!cost_only) {
    copy_checked(c.params, ctx.params, what + ": parameters");
    copy_checked(c.optimizer_state, ctx.optimizer.state(), what + ": optimizer state");
  }
  ByteReader strategy_state(c.strategy_state, what + ": strategy state");
  if (!resized) strategy.restore_state(ctx, strategy_state);
  if (!strategy_state.done()) throw UserError(what + ": strategy state longer than expected");
  ctx.optimizer_steps = c.optimizer_steps;
  loop = {.first_epoch = c.next_epoch,
          .global_step = c.global_step,
          .first_step = c.next_step,
          .epoch_state = c.epoch_state};
  WorkerReport saved = deserialize_report(c.report);
  report.epochs = std::move(saved.epochs);
  report.trace = std::move(saved.trace);
  report.resizes = c.resizes;
  phases = c.phases;
  ctx.exec.restore_clock(c.clock);
}

// What checkpoints save and restore of a worker, and where a signal stops it.
struct Resumable {
  WorkerContext& ctx;
  Strategy& strategy;
  PhaseTimes& phases;
  WorkerReport& report;
  LoopState& loop;
  bool cost_only;
  bool step_stops;  // at a step boundary (mid_epoch_checkpoint_refusal is empty), else an epoch's
};

// True when a signalled stop falls on this boundary (StopLatch).
bool stops_here(const CheckpointPlan& plan, StopUnit unit, int64_t done, int workers) {
  StopLatch& latch = plan.stop_latch != nullptr ? *plan.stop_latch : process_stop_latch();
  return latch.latch(unit, done, workers, stop_signalled()) == done;
}

// Whether the epoch just finished (`done` epochs so far) ends with a checkpoint, and whether the
// run stops there.
struct EpochEnd {
  bool checkpoint = false, stop = false;
};
EpochEnd epoch_end(const CheckpointPlan& plan, int done, int epochs, const Resumable& w) {
  if (plan.dir.empty() || done >= epochs) return {};
  const int workers = w.ctx.comm.size();
  bool stop = plan.stop_after_epochs > 0 && done >= plan.stop_after_epochs;
  if (w.step_stops)  // the latched step may be this one, the epoch's last
    stop = stops_here(plan, StopUnit::kStep, w.loop.global_step, workers) || stop;
  else
    stop = stops_here(plan, StopUnit::kEpoch, done, workers) || stop;
  return {.checkpoint = stop || (plan.every > 0 && done % plan.every == 0), .stop = stop};
}

// This worker's checkpoint from the resume set: its own, or at another worker count the one
// rescale.hpp makes (rank 0 then also rewrites the run's scenario.toml and drops the epoch files
// of workers that are gone, whose rows it carries).
WorkerCheckpoint my_checkpoint(const std::vector<WorkerCheckpoint>& set, const CheckpointPlan& plan,
                               const Scenario& s, int rank) {
  const auto from = static_cast<int>(set.size());
  if (from == s.workers) return set[static_cast<size_t>(rank)];
  WorkerCheckpoint mine = resized_checkpoint(set, s, rank);
  if (rank == 0) {
    write_run_scenario(plan.dir, s);
    if (!plan.shared_rows)  // a shared file was emptied when the resumed run began
      for (int w = s.workers; w < from; ++w)
        std::filesystem::remove(std::filesystem::path(plan.dir) / "epochs" /
                                ("worker-" + std::to_string(w) + ".csv"));
  }
  return mine;
}

// A finished epoch's row on disk: in the process's shared file, or in the worker's own.
void write_epoch_row(const CheckpointPlan& plan, const EpochMetrics& row) {
  if (plan.shared_rows)
    plan.shared_rows->append(row);
  else
    append_epoch_row(plan.dir, row);
}

// This worker's checkpoint on disk: in the process's set, or in the worker's own file.
void save_checkpoint(const CheckpointPlan& plan, const Scenario& s, const Resumable& w) {
  const WorkerCheckpoint c =
      checkpoint_of(w.ctx, w.strategy, w.phases, w.report, w.loop, w.cost_only);
  if (plan.shared_checkpoints)
    plan.shared_checkpoints->add(s, c);
  else
    write_worker_checkpoint(plan.dir, s, c);
}

// Continues from the run's checkpoints: on_train_begin sees the start parameters, then the
// worker's own state comes back.
void resume(const CheckpointPlan& plan, const Scenario& s, const Resumable& w) {
  const std::shared_ptr<const std::vector<WorkerCheckpoint>> set =
      plan.shared_checkpoints
          ? plan.shared_checkpoints->resume_set(s)
          : std::make_shared<const std::vector<WorkerCheckpoint>>(read_resume_set(plan.dir, s));
  const bool resized = set->size() != static_cast<size_t>(s.workers);
  const std::vector<float> start = resized ? std::vector<float>{} : resume_start_params(*set);
  const WorkerCheckpoint mine = my_checkpoint(*set, plan, s, w.ctx.comm.rank());
  if (!w.cost_only)
    copy_checked(resized ? mine.params : start, w.ctx.params, "checkpointed parameters");
  w.ctx.comm.barrier();  // every worker has read the checkpoints before any writes the next ones
  w.strategy.on_train_begin(w.ctx);
  restore_worker(mine, w.ctx, w.strategy, w.phases, w.report, w.loop, w.cost_only, resized);
  // The epochs kept while it ran are those of the checkpoint: later ones run again.
  if (!plan.shared_rows)
    std::filesystem::remove(std::filesystem::path(plan.dir) / "epochs" /
                            ("worker-" + std::to_string(w.ctx.comm.rank()) + ".csv"));
  for (const EpochMetrics& row : w.report.epochs) write_epoch_row(plan, row);
}

// After epoch `epoch`: its row on disk, and a checkpoint when one is due. True when the run
// stops there (the report is then marked interrupted).
bool after_epoch(const CheckpointPlan& plan, const Scenario& s, int epoch, const Resumable& w) {
  const int rank = w.ctx.comm.rank();
  write_epoch_row(plan, w.report.epochs.back());
  if (plan.kill_after_epochs == epoch + 1 && plan.kill_worker == rank) std::raise(SIGKILL);
  const EpochEnd end = epoch_end(plan, epoch + 1, s.epochs, w);
  if (!end.checkpoint) return false;
  w.loop.first_epoch = epoch + 1;
  w.loop.first_step = 0;
  w.loop.epoch_state.clear();
  // After a lost worker (the simulator's elastic runs) the survivors' ranks no longer name the
  // scenario's workers: no checkpoint set is written from then on.
  if (w.ctx.comm.size() == s.workers) save_checkpoint(plan, s, w);
  if (!end.stop) return false;
  w.report.interrupted = true;
  w.report.steps = static_cast<uint64_t>(w.loop.global_step);
  return true;
}

// The epoch's steps. Once a worker failed (the communicator holds fewer members than the
// scenario's workers: the simulator's elastic epoch_sync and epoch_async), sim.fault_blocks =
// "redeal" deals the data over the survivors by their rank among them; "drop", and partitions
// other than iid or fixed blocks, keep each survivor's own share.
std::vector<PlannedStep> epoch_steps(const Scenario& s, const TrainData& data,
                                     const Communicator& comm, int worker, int epoch,
                                     bool cost_only) {
  const bool dealt =
      s.data.partition == DataPartition::kIid ||
      (s.data.partition == DataPartition::kFixed && s.data_order() == DataOrder::kBlocks);
  if (comm.size() >= s.workers || s.sim.fault_blocks != FaultBlocks::kRedeal || !dealt)
    return plan_epoch(s, data, worker, epoch, cost_only);
  Scenario survivors = s;
  survivors.workers = comm.size();
  return plan_epoch(survivors, data, comm.rank(), epoch, cost_only);
}

// With `done` steps of the epoch run (of `steps`): a mid-epoch checkpoint when one is due
// (checkpoint.every_steps) or when a signalled stop latched this step. True when the run stops
// there (the signal, or --test-hook stop_after_steps at a checkpoint that was due).
bool after_step(const CheckpointPlan& plan, const Scenario& s, size_t done, size_t steps,
                const EpochMeter& meter, const LossTally& tally, const Resumable& w) {
  if (plan.dir.empty()) return false;
  const int64_t run_steps = w.loop.global_step;
  if (plan.term_after_steps == run_steps && w.ctx.comm.rank() == 0) std::raise(SIGTERM);
  if (done >= steps) return false;
  const auto every = static_cast<size_t>(plan.every_steps);
  const bool due = every > 0 && done % every == 0;
  const bool stop =
      (w.step_stops && stops_here(plan, StopUnit::kStep, run_steps, w.ctx.comm.size())) ||
      (due && plan.stop_after_steps > 0 && run_steps >= plan.stop_after_steps);
  if (!due && !stop) return false;
  w.loop.first_epoch = w.ctx.epoch;
  w.loop.first_step = static_cast<int64_t>(done);
  w.loop.epoch_state = epoch_state_of(meter, tally, read_meters(w.ctx.exec, w.phases, w.ctx.comm));
  // After a lost worker the ranks no longer name the scenario's workers (after_epoch).
  if (w.ctx.comm.size() == s.workers) save_checkpoint(plan, s, w);
  if (!stop) return false;
  w.report.interrupted = true;
  w.report.steps = static_cast<uint64_t>(run_steps);
  w.report.stopped_at_step = static_cast<int64_t>(done);
  return true;
}

}  // namespace

WorkerReport train_worker(const Scenario& s, const TrainData& data, Communicator& raw_comm,
                          Executor& exec, const AcceleratorFactory& accelerator_factory,
                          const ProgressFn& progress, const CheckpointPlan& plan,
                          WorkerReport* so_far) {
  const bool cost_only = exec.cost_only();
  const bool classify = s.loss == LossKind::kCrossEntropy;
  WorkerModel worker = make_worker_model(s, cost_only, accelerator_factory);
  Model& model = *worker.model;
  PhaseTimes phases;
  WorkerReport report;
  report.worker = raw_comm.rank();
  if (so_far != nullptr) so_far->worker = report.worker;
  Tracer tracer(report.trace, report.worker, s.trace);
  TimedCommunicator comm(raw_comm, exec, phases, &tracer);
  const int rank = comm.rank();
  const auto n_params = static_cast<size_t>(model.num_params());
  WorkerContext ctx{.model = model,
                    .optimizer = *worker.optimizer,
                    .comm = comm,
                    .exec = exec,
                    .tracer = tracer,
                    .params = cost_only ? cost_only_scratch(n_params) : model.params(),
                    .grads = cost_only ? cost_only_scratch(n_params) : model.grads(),
                    .passes_on_accelerator = worker.accelerator != nullptr};
  auto strategy = make_strategy(s);
  LoopState loop;
  const Resumable state{
      ctx, *strategy, phases, report, loop, cost_only, mid_epoch_checkpoint_refusal(s).empty()};
  if (plan.resume)
    resume(plan, s, state);
  else
    strategy->on_train_begin(ctx);
  if (exec.now() < plan.start_s) exec.advance(plan.start_s - exec.now());  // a relaunched job
  const StepContext step_ctx{.seed = s.seed, .worker = static_cast<uint32_t>(rank)};
  TrainStep train_step(ctx, *strategy, phases, *data.train, {s.loss, s.huber_delta}, step_ctx,
                       std::move(worker.accelerator));

  int64_t& global_step = loop.global_step;
  for (int epoch = loop.first_epoch; epoch < s.epochs; ++epoch) {
    ctx.epoch = epoch;
    const std::vector<PlannedStep> steps = epoch_steps(s, data, comm, rank, epoch, cost_only);
    const size_t first = epoch == loop.first_epoch ? static_cast<size_t>(loop.first_step) : 0;
    if (first >= steps.size() && first > 0)
      throw UserError("checkpoint of worker " + std::to_string(rank) + ": step " +
                      std::to_string(first) + " of epoch " + std::to_string(epoch) +
                      ", which has " + std::to_string(steps.size()));
    if (first == 0) strategy->on_epoch_begin(ctx);
    EpochStart begun = begin_epoch(loop, epoch, read_meters(exec, phases, comm));
    EpochMeter meter(begun.start);
    LossTally& tally = begun.tally;
    FastForward fast_forward(cost_only && s.sim.fast_forward ? FastForward::Use::kOn
                                                             : FastForward::Use::kOff);
    for (size_t k = first; k < steps.size();) {  // the cursor moves at the end of the body only
      const MeterReading before = read_meters(exec, phases, comm);
      const double lr = learning_rate(
          s.schedule, epoch + static_cast<double>(k) / static_cast<double>(steps.size()));
      tracer.begin_step(k);
      const StepOutcome outcome = train_step.run(
          steps[k],
          {.epoch = epoch, .index = k, .global = global_step, .measure_memory = k == first}, lr);
      report.resident_param_bytes =
          std::max<uint64_t>(report.resident_param_bytes, train_step.resident_param_bytes());
      report.resident_grad_bytes =
          std::max<uint64_t>(report.resident_grad_bytes, train_step.resident_grad_bytes());
      if (tracer.detail_on())
        tracer.span("step " + std::to_string(k), "step", before.time, exec.now());
      tally.add(outcome.loss, outcome.samples, lr);
      const Skip skip = fast_forward.after_step(read_meters(exec, phases, comm) - before, k, steps,
                                                strategy->sync_period(ctx), exec);
      if (skip.steps > 0) {  // the skipped steps' time and records, and below their counts
        exec.advance(skip.delta.time);
        meter.add_skipped(skip.delta);
      }
      k += 1 + skip.steps;
      global_step += 1 + static_cast<int64_t>(skip.steps);
      ctx.optimizer_steps += static_cast<int64_t>(skip.steps);
      if (progress && rank == 0)
        progress(step_progress(tally, classify, epoch, s.epochs, k, steps, exec));
      if (after_step(plan, s, k, steps.size(), meter, tally, state)) return report;
    }
    tracer.end_steps();
    strategy->on_epoch_end(ctx);
    if (epoch + 1 == s.epochs) strategy->on_train_end(ctx);
    const MeterReading end = read_meters(exec, phases, comm);
    tracer.span("epoch " + std::to_string(epoch), "epoch", meter.start(), end.time);
    report.epochs.push_back(meter.finish(end, rank, epoch, tally, classify));
    if (cost_only) report.epochs.back().train_loss = report.epochs.back().train_accuracy = -1;
    if (!cost_only && s.eval_every_epoch && data.test) {
      const Evaluation eval =
          evaluate(model, *data.test, {s.loss, s.huber_delta}, train_step.accelerator());
      report.epochs.back().test_accuracy = eval.accuracy;
      report.epochs.back().test_errors = eval.errors;
    }
    if (so_far != nullptr) so_far->epochs.push_back(report.epochs.back());
    if (!plan.dir.empty() && after_epoch(plan, s, epoch, state)) return report;
  }
  report.steps = static_cast<uint64_t>(global_step);
  if (!cost_only)
    record_final_model(report, comm.rank(), model, ctx.params, data, s, train_step.accelerator());
  return report;
}

}  // namespace syncopate
