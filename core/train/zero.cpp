// ZeRO stages 1 and 2: reduce-scatter of the gradients, the optimizer over this worker's shard,
// allgather of the parameters.
#include "core/train/zero.hpp"

#include <algorithm>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

// A piece of the flat parameter vector that is reduce-scattered and allgathered as one: the
// whole vector (stage 1) or one gradient bucket (stage 2). This worker owns `block` of it,
// held at `shard_offset` of its shard buffers.
struct Piece {
  size_t offset = 0, count = 0;
  int first_layer = 0;  // backward completes the piece with this layer
  BlockRange block;
  size_t shard_offset = 0;
};

// The pieces of stage 2: ddp's gradient buckets.
std::vector<Piece> bucket_pieces(const Model& model, double bucket_mb) {
  std::vector<Piece> pieces;
  for (const GradientBucket& b : gradient_buckets(model, bucket_mb))
    pieces.push_back({.offset = b.offset,
                      .count = b.count,
                      .first_layer = b.first_layer,
                      .block = {},
                      .shard_offset = 0});
  return pieces;
}

class Zero final : public Strategy {
 public:
  Zero(int stage, double bucket_mb, const OptimizerConfig& optimizer)
      : stage_(stage), bucket_mb_(bucket_mb), optimizer_config_(optimizer) {}

  void on_train_begin(WorkerContext& ctx) override {
    const auto n = static_cast<size_t>(ctx.model.num_params());
    pieces_ = stage_ == 1 ? std::vector<Piece>{{.offset = 0,
                                                .count = n,
                                                .first_layer = 0,
                                                .block = {},
                                                .shard_offset = 0}}
                          : bucket_pieces(ctx.model, bucket_mb_);
    size_t shard = 0;
    for (Piece& piece : pieces_) {
      piece.block = block_of(piece.count, ctx.comm.size(), ctx.comm.rank());
      piece.shard_offset = shard;
      shard += piece.block.count;
    }
    // Cost-only runs move no data: the shard is then a view of the scratch buffers (1,024
    // simulated workers of a 1.5-billion-parameter model would otherwise hold 12 GB of shards).
    if (ctx.exec.cost_only()) {
      params_ = ctx.params.first(shard);
      grads_ = ctx.grads.first(shard);
    } else {
      storage_.assign(2 * shard, 0.0f);
      params_ = std::span(storage_).first(shard);
      grads_ = std::span(storage_).last(shard);
    }
    // Cost-only runs hold no optimizer state, as the worker's own optimizer (trainer.cpp).
    optimizer_ = make_optimizer(optimizer_config_, ctx.exec.cost_only() ? 0 : shard);
  }
  // This worker's share of the global batch: the reduce-scatter's sum is then the mean.
  float gradient_scale(const WorkerContext& ctx, const GlobalBatch& batch) const override {
    int64_t total = 0;
    for (int w = 0; w < ctx.comm.size(); ++w) total += batch.count_of(w);
    return total == 0 ? 0.0f
                      : static_cast<float>(static_cast<double>(batch.count_of(ctx.comm.rank())) /
                                           static_cast<double>(total));
  }
  void after_backward_layer(WorkerContext& ctx, int layer) override {
    if (stage_ == 1) return;
    for (const Piece& piece : pieces_)
      if (piece.first_layer == layer) reduce_scatter(ctx, piece);
  }
  void before_step(WorkerContext& ctx) override {
    if (stage_ == 1) reduce_scatter(ctx, pieces_.front());
    if (ctx.exec.cost_only()) return;
    for (const Piece& piece : pieces_) {
      const auto first =
          ctx.params.begin() + static_cast<std::ptrdiff_t>(piece.offset + piece.block.offset);
      std::copy(first, first + static_cast<std::ptrdiff_t>(piece.block.count),
                shard_of(params_, piece).begin());
    }
  }
  OptimizerTarget optimizer_target(WorkerContext&) override {
    return {*optimizer_, params_, grads_};
  }
  void after_step(WorkerContext& ctx, int64_t) override {
    for (const Piece& piece : pieces_)
      ctx.comm.allgather(shard_of(params_, piece), ctx.params.subspan(piece.offset, piece.count));
  }
  int64_t sync_period(const WorkerContext&) const override { return 1; }
  // The optimizer state of this worker's shard (the parameters are the worker's own).
  void save_state(const WorkerContext&, ByteWriter& out) const override {
    out.put_span<float>(optimizer_->state());
  }
  void restore_state(WorkerContext&, ByteReader& in) override {
    in.get_into<float>(optimizer_->state());
  }

 private:
  static std::span<float> shard_of(std::span<float> buffer, const Piece& piece) {
    return buffer.subspan(piece.shard_offset, piece.block.count);
  }
  void reduce_scatter(WorkerContext& ctx, const Piece& piece) {
    ctx.comm.reduce_scatter(ctx.grads.subspan(piece.offset, piece.count), shard_of(grads_, piece),
                            ReduceOp::kSum);
  }

  int stage_;
  double bucket_mb_;
  OptimizerConfig optimizer_config_;
  std::vector<Piece> pieces_;
  std::vector<float> storage_;
  std::span<float> params_, grads_;  // this worker's shard: its parameters and summed gradients
  std::unique_ptr<Optimizer> optimizer_;
};

}  // namespace

std::unique_ptr<Strategy> make_zero(const Scenario& scenario) {
  const StrategySection& s = scenario.strategy;
  SYNC_CHECK(s.stage == 1 || s.stage == 2, "zero stage " << s.stage << " (refused at parsing)");
  return std::make_unique<Zero>(s.stage, s.bucket_mb, scenario.optimizer);
}

}  // namespace syncopate
