// The strategies: serial, ddp, epoch_sync, epoch_async, local_sgd and hierarchical (diloco is in
// diloco.cpp, zero in zero.cpp).
#include <optional>

#include "core/base/check.hpp"
#include "core/train/powersgd.hpp"
#include "core/train/strategy.hpp"
#include "core/train/zero.hpp"

namespace syncopate {
namespace {

// Records a synchronisation span in the trace.
template <typename F>
void traced(WorkerContext& ctx, const char* name, F&& f) {
  const double start = ctx.exec.now();
  f();
  ctx.tracer.span(name, "sync", start, ctx.exec.now());
}

void reset_optimizer(WorkerContext& ctx) {
  ctx.optimizer.reset();
  ctx.optimizer_steps = 0;
}

// Averages the weights, and the optimizer state with them under `policy` kAverage.
// The weights travel in `wire`; the optimizer state in fp32 (Adam's second moments underflow
// fp16).
void average_params(WorkerContext& ctx, Communicator& comm, Algorithm algorithm,
                    OptimizerStatePolicy policy, WireFormat wire) {
  comm.allreduce(ctx.params, {.op = ReduceOp::kAvg, .algorithm = algorithm, .wire = wire});
  if (policy == OptimizerStatePolicy::kAverage && !ctx.exec.cost_only())
    comm.allreduce(ctx.optimizer.state(), {ReduceOp::kAvg, algorithm});
}

// ddp's buckets (gradient_buckets) and their allreduces in flight.
class Buckets {
 public:
  void build(const Model& model, double bucket_mb) {
    buckets_ = gradient_buckets(model, bucket_mb);
  }
  // Starts the allreduce of every bucket completed by layer `layer`'s backward. The last bucket
  // (the first layers') has no backward left to overlap with: it is waited for at once
  // (allreduce_waited, accounted alike), which on MPI runs it on the calling thread when the
  // buckets before it are done, without the hand-off to the helper thread.
  void launch(int layer, std::span<float> grads, Communicator& comm, Algorithm algorithm,
              WireFormat wire) {
    for (const GradientBucket& b : buckets_) {
      if (b.first_layer != layer) continue;
      const CollectiveOptions options{.op = ReduceOp::kSum, .algorithm = algorithm, .wire = wire};
      if (&b == &buckets_.back())
        comm.allreduce(grads.subspan(b.offset, b.count), options);
      else
        inflight_.push_back(comm.allreduce_async(grads.subspan(b.offset, b.count), options));
    }
  }
  void wait_all() {
    for (auto& work : inflight_) work->wait();
    inflight_.clear();
  }
  size_t size() const { return buckets_.size(); }

 private:
  std::vector<GradientBucket> buckets_;
  std::vector<WorkPtr> inflight_;
};

// Fraction of a step's global batch this worker holds among `members`: the scale that turns
// its mean-loss gradient into its share of their mean gradient (exact for uneven last batches).
float share_of_total(const GlobalBatch& batch, int rank, int64_t total) {
  return total == 0 ? 0.0f
                    : static_cast<float>(static_cast<double>(batch.count_of(rank)) /
                                         static_cast<double>(total));
}

float share(const GlobalBatch& batch, int rank, std::span<const int> members) {
  int64_t total = 0;
  for (int member : members) total += batch.count_of(member);
  return share_of_total(batch, rank, total);
}

// The same among workers 0 .. workers - 1, without a list of them (one per worker would be
// O(workers^2) memory: 17 GB at 65,536 workers).
float share_of_all(const GlobalBatch& batch, int rank, int workers) {
  int64_t total = 0;
  for (int member = 0; member < workers; ++member) total += batch.count_of(member);
  return share_of_total(batch, rank, total);
}

class Serial final : public Strategy {};

class Ddp final : public Strategy {
 public:
  Ddp(double bucket_mb, Algorithm algorithm, WireFormat wire,
      std::optional<PowerSgdSettings> powersgd = std::nullopt)
      : bucket_mb_(bucket_mb), algorithm_(algorithm), wire_(wire), settings_(std::move(powersgd)) {}
  void on_train_begin(WorkerContext& ctx) override {
    if (settings_ && ctx.comm.size() > 1)  // one worker: no collective, nothing to compress
      powersgd_ = std::make_unique<PowerSgd>(param_tensors(settings_->spec, ctx.model),
                                             settings_->rank, settings_->seed);
    buckets_.build(ctx.model, bucket_mb_);
    workers_ = ctx.comm.size();
  }
  float gradient_scale(const WorkerContext& ctx, const GlobalBatch& batch) const override {
    // Strided over every worker, the shares add up to the batch: no O(workers) sum per step.
    if (batch.counts.empty() && batch.workers == workers_)
      return batch.size == 0
                 ? 0.0f
                 : static_cast<float>(static_cast<double>(batch.count_of(ctx.comm.rank())) /
                                      static_cast<double>(batch.size));
    return share_of_all(batch, ctx.comm.rank(), workers_);
  }
  void after_backward_layer(WorkerContext& ctx, int layer) override {
    if (!powersgd_) buckets_.launch(layer, ctx.grads, ctx.comm, algorithm_, wire_);
  }
  // PowerSGD compresses the whole gradient once backward is done (no overlap with it).
  void before_step(WorkerContext& ctx) override {
    if (powersgd_) powersgd_->reduce(ctx.grads, ctx.comm, ctx.exec, algorithm_, ctx.grads);
    buckets_.wait_all();
  }
  int64_t sync_period(const WorkerContext&) const override { return 1; }
  // PowerSGD's error feedback and Q carry from step to step.
  void save_state(const WorkerContext&, ByteWriter& out) const override {
    if (powersgd_) powersgd_->save_state(out);
  }
  void restore_state(WorkerContext&, ByteReader& in) override {
    if (powersgd_) powersgd_->restore_state(in);
  }

 private:
  double bucket_mb_;
  Algorithm algorithm_;
  WireFormat wire_;
  std::optional<PowerSgdSettings> settings_;
  std::unique_ptr<PowerSgd> powersgd_;
  Buckets buckets_;
  int workers_ = 0;
};

// Weights averaged every `every` epochs and after the last one (of `epochs`), by `algorithm`
// (kMaster for the paper's gather-to-master aggregation).
class EpochSync final : public Strategy {
 public:
  EpochSync(int every, int epochs, Algorithm algorithm, OptimizerStatePolicy policy,
            WireFormat wire)
      : every_(every), epochs_(epochs), algorithm_(algorithm), policy_(policy), wire_(wire) {}
  void on_block_begin(WorkerContext& ctx) override {
    if (policy_ == OptimizerStatePolicy::kReset) reset_optimizer(ctx);
  }
  void on_epoch_end(WorkerContext& ctx) override {
    const bool last = ctx.epoch + 1 == epochs_;
    if ((ctx.epoch + 1) % every_ != 0 && !last) return;
    traced(ctx, "average", [&] { average_params(ctx, ctx.comm, algorithm_, policy_, wire_); });
  }

 private:
  int every_, epochs_;
  Algorithm algorithm_;
  OptimizerStatePolicy policy_;
  WireFormat wire_;
};

class EpochAsync final : public Strategy {
 public:
  EpochAsync(double merge_local_weight, Algorithm algorithm, OptimizerStatePolicy policy,
             GlobalModelPlacement placement)
      : merge_local_weight_(merge_local_weight),
        algorithm_(algorithm),
        policy_(policy),
        placement_(placement) {}
  void on_train_begin(WorkerContext& ctx) override {
    global_ = ctx.comm.create_shared_model(ctx.params, placement_);
  }
  void on_block_begin(WorkerContext& ctx) override {
    if (policy_ == OptimizerStatePolicy::kReset) reset_optimizer(ctx);
  }
  void on_epoch_end(WorkerContext& ctx) override {
    traced(ctx, "merge", [&] {
      const double w = merge_local_weight_;
      global_->merge(ctx.params, {static_cast<float>(1.0 - w), static_cast<float>(w)});
    });
  }
  // The final model is the mean of the workers' last snapshots.
  void on_train_end(WorkerContext& ctx) override {
    traced(ctx, "average", [&] { ctx.comm.allreduce(ctx.params, {ReduceOp::kAvg, algorithm_}); });
  }

 private:
  double merge_local_weight_;
  Algorithm algorithm_;
  OptimizerStatePolicy policy_;
  GlobalModelPlacement placement_;
  std::unique_ptr<SharedModel> global_;
};

// Local SGD (Lin et al. 2020): weights averaged every H steps; the first k epochs may run as
// ddp (post-local SGD).
class LocalSgd final : public Strategy {
 public:
  LocalSgd(int every, int warmup_epochs, double bucket_mb, Algorithm algorithm,
           OptimizerStatePolicy policy, WireFormat wire)
      : every_(every),
        warmup_epochs_(warmup_epochs),
        algorithm_(algorithm),
        policy_(policy),
        wire_(wire),
        warmup_(bucket_mb, algorithm, wire) {}
  void on_train_begin(WorkerContext& ctx) override { warmup_.on_train_begin(ctx); }
  float gradient_scale(const WorkerContext& ctx, const GlobalBatch& batch) const override {
    return warming_up(ctx) ? warmup_.gradient_scale(ctx, batch) : 1.0f;
  }
  void after_backward_layer(WorkerContext& ctx, int layer) override {
    if (warming_up(ctx)) warmup_.after_backward_layer(ctx, layer);
  }
  void before_step(WorkerContext& ctx) override { warmup_.before_step(ctx); }
  void after_step(WorkerContext& ctx, int64_t) override {
    if (warming_up(ctx)) return;
    if (++local_steps_ % every_ == 0)
      traced(ctx, "average", [&] { average_params(ctx, ctx.comm, algorithm_, policy_, wire_); });
  }
  void on_train_end(WorkerContext& ctx) override {
    traced(ctx, "average", [&] { average_params(ctx, ctx.comm, algorithm_, policy_, wire_); });
  }
  int64_t sync_period(const WorkerContext& ctx) const override {
    return warming_up(ctx) ? 1 : every_;
  }
  void save_state(const WorkerContext&, ByteWriter& out) const override {
    out.put<int64_t>(local_steps_);
  }
  void restore_state(WorkerContext&, ByteReader& in) override { local_steps_ = in.get<int64_t>(); }

 private:
  bool warming_up(const WorkerContext& ctx) const { return ctx.epoch < warmup_epochs_; }
  int every_, warmup_epochs_;
  Algorithm algorithm_;
  OptimizerStatePolicy policy_;
  WireFormat wire_;
  Ddp warmup_;
  int64_t local_steps_ = 0;
};

// Gradients every step inside a node (fast links), weights every epoch across nodes; both by
// `algorithm`.
class Hierarchical final : public Strategy {
 public:
  Hierarchical(double bucket_mb, Algorithm algorithm, OptimizerStatePolicy policy, WireFormat wire)
      : bucket_mb_(bucket_mb), algorithm_(algorithm), policy_(policy), wire_(wire) {}
  void on_train_begin(WorkerContext& ctx) override {
    node_comm_ = ctx.comm.split(ctx.comm.node(), ctx.comm.rank());
    buckets_.build(ctx.model, bucket_mb_);
    // Which world ranks share my node: gather every rank's node id.
    const int p = ctx.comm.size();
    std::vector<float> mine(block_of(static_cast<size_t>(p), p, ctx.comm.rank()).count,
                            static_cast<float>(ctx.comm.node()));
    std::vector<float> nodes(static_cast<size_t>(p));
    ctx.comm.allgather(mine, nodes, WireFormat::kFp32);
    for (int r = 0; r < p; ++r)
      if (static_cast<int>(nodes[static_cast<size_t>(r)]) == ctx.comm.node())
        node_members_.push_back(r);
  }
  float gradient_scale(const WorkerContext& ctx, const GlobalBatch& batch) const override {
    return share(batch, ctx.comm.rank(), node_members_);
  }
  void after_backward_layer(WorkerContext& ctx, int layer) override {
    buckets_.launch(layer, ctx.grads, *node_comm_, algorithm_, wire_);
  }
  void before_step(WorkerContext&) override { buckets_.wait_all(); }
  void on_epoch_end(WorkerContext& ctx) override {
    traced(ctx, "average", [&] { average_params(ctx, ctx.comm, algorithm_, policy_, wire_); });
  }
  int64_t sync_period(const WorkerContext&) const override { return 1; }

 private:
  double bucket_mb_;
  Algorithm algorithm_;
  OptimizerStatePolicy policy_;
  WireFormat wire_;
  std::unique_ptr<Communicator> node_comm_;
  Buckets buckets_;
  std::vector<int> node_members_;
};

}  // namespace

std::vector<GradientBucket> gradient_buckets(const Model& model, double bucket_mb) {
  int first = 0;  // the first layer with parameters
  while (first < model.num_layers() - 1 && model.param_range(first).count == 0) ++first;
  std::vector<GradientBucket> buckets;
  const double limit = bucket_mb * 1024 * 1024;
  size_t end = static_cast<size_t>(model.num_params());
  double bytes = 0;
  for (int i = model.num_layers() - 1; i >= 0; --i) {
    const BlockRange range = model.param_range(i);
    if (range.count == 0) continue;
    bytes += 4.0 * static_cast<double>(range.count);
    if (bytes >= limit || i == first) {
      buckets.push_back({.offset = range.offset, .count = end - range.offset, .first_layer = i});
      end = range.offset;
      bytes = 0;
    }
  }
  return buckets;
}

WireFormat wire_format(Compression compression) {
  switch (compression) {
    case Compression::kFp16:
      return WireFormat::kFp16;
    case Compression::kBf16:
      return WireFormat::kBf16;
    case Compression::kNone:
    case Compression::kPowerSgd:
      return WireFormat::kFp32;
  }
  SYNC_CHECK(false, "unknown compression " << static_cast<int>(compression));
}

std::unique_ptr<Strategy> make_strategy(const Scenario& scenario) {
  const StrategySection& s = scenario.strategy;
  const WireFormat wire = wire_format(s.compression);
  switch (s.kind) {
    case StrategyKind::kSerial:
      return std::make_unique<Serial>();
    case StrategyKind::kDdp:
      if (s.compression == Compression::kPowerSgd)
        return std::make_unique<Ddp>(
            s.bucket_mb, s.algorithm, wire,
            PowerSgdSettings{scenario.model.spec(), s.powersgd_rank, scenario.seed});
      return std::make_unique<Ddp>(s.bucket_mb, s.algorithm, wire);
    case StrategyKind::kEpochSync:
      return std::make_unique<EpochSync>(
          s.every, scenario.epochs,
          s.aggregation == Aggregation::kMaster ? Algorithm::kMaster : s.algorithm,
          s.optimizer_state, wire);
    case StrategyKind::kEpochAsync:
      return std::make_unique<EpochAsync>(s.merge_local_weight, s.algorithm, s.optimizer_state,
                                          s.global_model);
    case StrategyKind::kLocalSgd:
      return std::make_unique<LocalSgd>(s.every, s.warmup_epochs, s.bucket_mb, s.algorithm,
                                        s.optimizer_state, wire);
    case StrategyKind::kHierarchical:
      return std::make_unique<Hierarchical>(s.bucket_mb, s.algorithm, s.optimizer_state, wire);
    case StrategyKind::kDiloco:
      return make_diloco(s);
    case StrategyKind::kZero:
      return make_zero(scenario);
  }
  SYNC_CHECK(false, "unknown strategy");
}

}  // namespace syncopate
