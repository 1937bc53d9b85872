#pragma once
// Strategies: which collectives run when. A strategy hooks the worker loop and only ever talks
// to the Communicator and Executor interfaces, so the same code runs on every backend.
#include <memory>
#include <vector>

#include "core/base/bytes.hpp"
#include "core/comm/comm.hpp"
#include "core/nn/model.hpp"
#include "core/optim/optim.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/recorder.hpp"

namespace syncopate {

// One step's global batch in the global data order: `size` samples dealt to `workers` workers
// strided (worker w holds positions w, w + W, ...), or, under a data.partition other than iid,
// counts[w] samples from worker w's own partition. size 0 in the block order.
struct GlobalBatch {
  int64_t size = 0;
  int workers = 1;
  std::vector<int64_t> counts;  // per worker; empty: strided
  int64_t count_of(int worker) const {
    if (!counts.empty()) return counts[static_cast<size_t>(worker)];
    return (size - worker + workers - 1) / workers;
  }
};

// What a strategy may touch. The communicator is already timed (see timed_comm.hpp).
struct WorkerContext {
  Model& model;
  Optimizer& optimizer;
  Communicator& comm;
  Executor& exec;
  Tracer& tracer;
  int epoch = 0;
  // Optimizer steps since the optimizer state was last reset (Adam's bias correction counts
  // from 1 after a reset). Strategies that reset the optimizer set it to 0.
  int64_t optimizer_steps = 0;
  // Cost-only runs have no parameter storage: collectives then use this scratch buffer.
  std::span<float> params, grads;
  // The passes run on an accelerator, which reads params whole after the before_forward_layer
  // hooks and keeps them page-locked: no page of them may be given back (release_pages).
  bool passes_on_accelerator = false;
};

// What the optimizer step updates: by default the worker's optimizer over all its parameters;
// a strategy that shards the optimizer state (zero) steps its own optimizer over its shard.
struct OptimizerTarget {
  Optimizer& optimizer;
  std::span<float> params;
  std::span<const float> grads;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual void on_train_begin(WorkerContext&) {}
  virtual void on_epoch_begin(WorkerContext&) {}
  // A new ds-tensor block starts (block data order only).
  virtual void on_block_begin(WorkerContext&) {}
  // Backward has just produced layer `layer`'s gradients (layers run last to first).
  virtual void after_backward_layer(WorkerContext&, int /*layer*/) {}
  // Layer `layer`'s forward, or its backward, is about to run: its parameters must be in
  // ctx.params when this returns (zero stage 3 gathers them). A pass on an accelerator calls
  // before_forward_layer for every layer before it, before_backward_layer (last to first) after.
  virtual void before_forward_layer(WorkerContext&, int /*layer*/) {}
  virtual void before_backward_layer(WorkerContext&, int /*layer*/) {}
  // Whether those two hooks change which pages of ctx.params are in memory (zero stage 3 with
  // strategy.give_back_memory gives back the pages of the units it has done with): a measured
  // step then reads the resident bytes after each of them (TrainStep::resident_param_bytes).
  virtual bool gives_back_parameters() const { return false; }
  // Whether after_backward_layer and before_step give back the pages of gradients that are done
  // with (zero stages 2 and 3: those of the buckets reduce-scattered): a measured step then reads
  // the gradients' resident bytes after each layer's backward (TrainStep::resident_grad_bytes).
  virtual bool gives_back_gradients() const { return false; }
  // Whether ctx.grads holds zeros only, as given back by before_step: the next pass then need not
  // zero them (which would bring every page back into memory at once).
  virtual bool gradients_zeroed() const { return false; }
  // The factor applied to this worker's mean-loss gradient before backward.
  virtual float gradient_scale(const WorkerContext&, const GlobalBatch&) const { return 1.0f; }
  // Between backward and the optimizer step: gradients must be final when this returns.
  virtual void before_step(WorkerContext&) {}
  // Asked right after before_step; the spans must stay valid until after_step.
  virtual OptimizerTarget optimizer_target(WorkerContext& ctx) {
    return {ctx.optimizer, ctx.params, ctx.grads};
  }
  // After the optimizer step; `step` counts this worker's steps from 1 over the whole run.
  virtual void after_step(WorkerContext&, int64_t /*step*/) {}
  virtual void on_epoch_end(WorkerContext&) {}
  // Leaves every worker holding the final model (a consensus of the replicas).
  virtual void on_train_end(WorkerContext&) {}
  // Steps between synchronisations that involve all workers: 1 for per-step gradient
  // averaging, H for local SGD, 0 when steps never synchronise (epoch-level strategies).
  // Used by the steady-state fast-forward.
  virtual int64_t sync_period(const WorkerContext&) const { return 0; }
  // Checkpoints (checkpoint.hpp): what the strategy carries from one epoch to the next beyond
  // the worker's parameters and optimizer, written at an epoch boundary; restore_state reads it
  // back after on_train_begin of a resumed run. On resume on_train_begin sees the parameters of
  // the worker checkpointed last (for epoch_async: the global model after the last merge).
  virtual void save_state(const WorkerContext&, ByteWriter&) const {}
  virtual void restore_state(WorkerContext&, ByteReader&) {}
};

std::unique_ptr<Strategy> make_strategy(const Scenario& scenario);

// Gradient buckets (ddp, hierarchical, zero stage 2): contiguous slices of the flat gradient
// buffer, formed from the last layer backwards so that each fills as backward proceeds, each
// closed once it holds bucket_mb MiB or reaches the first layer with parameters. A bucket is
// complete once backward has passed `first_layer`. Every worker builds the same buckets, so
// collectives match.
struct GradientBucket {
  size_t offset = 0, count = 0;
  int first_layer = 0;
};
std::vector<GradientBucket> gradient_buckets(const Model& model, double bucket_mb);

// The wire format of strategy.compression (fp32 for none and powersgd).
WireFormat wire_format(Compression compression);

// diloco (core/train/diloco.cpp).
std::unique_ptr<Strategy> make_diloco(const StrategySection& section);

}  // namespace syncopate
