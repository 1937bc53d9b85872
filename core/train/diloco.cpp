// DiLoCo (Douillard et al. 2023, arXiv 2311.08105), optionally streaming (Douillard et al.
// 2025): H local steps of the scenario's optimizer, then an outer SGD step on the averaged
// pseudo-gradient (the global model minus the mean of the local ones).
#include <vector>

#include "core/base/check.hpp"
#include "core/train/strategy.hpp"

namespace syncopate {
namespace {

// Every worker keeps the global model and the outer momentum buffer; the allreduce is
// deterministic, so they stay identical on every worker.
//
// One outer step on a fragment [offset, offset + count):
//   mean = allreduce_avg(local)              (the same call, bytes and sum as local_sgd's)
//   d    = global - mean                     (the averaged pseudo-gradient)
//   buf  = mu * buf + d
//   u    = nesterov ? d + mu * buf : buf
//   global = local = mean - (lr * u - d)     (= global - lr * u, written from the mean)
// Written from the mean, lr 1 and mu 0 give u = d, lr * u - d = +0 exactly and the new model
// is the mean itself, bit for bit local_sgd's; otherwise it differs from global - lr * u by
// rounding only.
//
// Fragments (streaming): the flat parameter buffer is cut into F contiguous slices
// (block_of(n, F, f), which may cut through a layer); fragment f synchronises after the steps
// where (step + f * (H / F)) % H == 0. F = 1 is plain DiLoCo.
class Diloco final : public Strategy {
 public:
  explicit Diloco(const StrategySection& s)
      : every_(s.every),
        fragments_(s.fragments),
        lr_(static_cast<float>(s.outer_lr)),
        momentum_(static_cast<float>(s.outer_momentum)),
        nesterov_(s.outer_nesterov),
        algorithm_(s.algorithm),
        wire_(wire_format(s.compression)) {}

  void on_train_begin(WorkerContext& ctx) override {
    pending_.assign(static_cast<size_t>(fragments_), false);
    // Cost-only runs have no values to keep (and their parameters are one scratch buffer for
    // every worker): only the allreduces are timed.
    if (ctx.exec.cost_only()) return;
    global_.assign(ctx.params.begin(), ctx.params.end());
    momentum_buffer_.assign(ctx.params.size(), 0.0f);
  }
  void after_step(WorkerContext& ctx, int64_t step) override {
    const int64_t stagger = every_ / fragments_;
    for (int f = 0; f < fragments_; ++f) {
      pending_[static_cast<size_t>(f)] = true;
      if ((step + f * stagger) % every_ == 0) outer_step(ctx, f);
    }
  }
  // Fragments with local steps since their last synchronisation take a last outer step, so
  // that every worker ends with the global model.
  void on_train_end(WorkerContext& ctx) override {
    for (int f = 0; f < fragments_; ++f)
      if (pending_[static_cast<size_t>(f)]) outer_step(ctx, f);
  }
  int64_t sync_period(const WorkerContext&) const override { return every_; }
  void save_state(const WorkerContext&, ByteWriter& out) const override {
    out.put_span<float>(global_);
    out.put_span<float>(momentum_buffer_);
    for (const bool pending : pending_) out.put<uint8_t>(pending ? 1 : 0);
  }
  void restore_state(WorkerContext&, ByteReader& in) override {
    in.get_into<float>(global_);
    in.get_into<float>(momentum_buffer_);
    for (size_t f = 0; f < pending_.size(); ++f) pending_[f] = in.get<uint8_t>() != 0;
  }

 private:
  void outer_step(WorkerContext& ctx, int f) {
    const BlockRange r = block_of(ctx.params.size(), fragments_, f);
    const double start = ctx.exec.now();
    const std::span<float> local = ctx.params.subspan(r.offset, r.count);
    ctx.comm.allreduce(local, {.op = ReduceOp::kAvg, .algorithm = algorithm_, .wire = wire_});
    ctx.exec.compute(outer_update_cost(r.count), [&] { apply_outer_update(r, local); });
    pending_[static_cast<size_t>(f)] = false;
    ctx.tracer.span("outer_step", "sync", start, ctx.exec.now());
  }
  // apply_outer_update over `count` parameters: per parameter 6 flops (8 with Nesterov); it
  // reads the global model, the momentum buffer and the mean, and writes all three: an
  // optimizer's pass, as the simulator charges it (outside the step's compute phase, as a real
  // run spends it).
  Cost outer_update_cost(size_t count) const {
    const double n = static_cast<double>(count);
    return {n * (nesterov_ ? 8 : 6), n * 6 * sizeof(float), OpKind::kOptimizer};
  }
  // `mean` holds the workers' mean of fragment `r`; it becomes the new global model there. No
  // std::fma: in the default build (generic x86-64, no FMA instructions) each call is a libm
  // call and the loop does not vectorise (README, "Validation against this machine").
  void apply_outer_update(const BlockRange& r, std::span<float> mean) {
    for (size_t i = 0; i < r.count; ++i) {
      float& global = global_[r.offset + i];
      float& buf = momentum_buffer_[r.offset + i];
      const float d = global - mean[i];
      buf = momentum_ * buf + d;
      const float u = nesterov_ ? d + momentum_ * buf : buf;
      mean[i] -= lr_ * u - d;
      global = mean[i];
    }
  }

  int every_, fragments_;
  float lr_, momentum_;
  bool nesterov_;
  Algorithm algorithm_;
  WireFormat wire_;
  std::vector<float> global_, momentum_buffer_;
  std::vector<bool> pending_;
};

}  // namespace

std::unique_ptr<Strategy> make_diloco(const StrategySection& section) {
  return std::make_unique<Diloco>(section);
}

}  // namespace syncopate
