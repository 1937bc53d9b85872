// ZeRO stages 1 to 3: reduce-scatter of the gradients, the optimizer over this worker's shard,
// allgather of the parameters (after the step, or per unit of layers before it is used), in fp32
// or in a 16-bit wire format (strategy.compression).
#include "core/train/zero.hpp"

#include <algorithm>
#include <deque>
#include <vector>

#include "core/base/check.hpp"
#include "core/base/resident_pages.hpp"

namespace syncopate {
namespace {

// Stages 2 and 3: the reduce-scatters that backward may have in flight. Starting another one
// first waits for the oldest (and, with strategy.give_back_memory, gives back the pages of its
// gradients): a worker then holds the bucket being reduced and the one that backward fills, as
// DeepSpeed's stage 2 double-buffers its reduction buckets (overlap_comm).
constexpr size_t kScattersInFlight = 1;

// A piece of the flat parameter vector that is reduce-scattered and allgathered as one: the
// whole vector (stage 1) or one gradient bucket (stages 2 and 3; in stage 3 the unit whose
// parameters are gathered together). This worker owns `block` of it, held at `shard_offset` of
// its shard buffers.
struct Piece {
  size_t offset = 0, count = 0;
  int first_layer = 0;  // backward completes the piece with this layer
  BlockRange block;
  size_t shard_offset = 0;
};

// The pieces of stages 2 and 3: ddp's gradient buckets (the last layers first).
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

// For every layer, the piece whose parameters it reads (-1: none): the one that holds its own,
// or for a tied output projection (tied_dense, GPT-2's), which has none, the embedding's, whose
// weights it reads. Stage 3 gathers that piece again for it, forward and backward, as FSDP
// gathers the unit that holds a shared weight wherever it is used.
std::vector<int> piece_of_layers(const Model& model, const std::vector<Piece>& pieces) {
  std::vector<int> piece_of(static_cast<size_t>(model.num_layers()), -1);
  int embedding = -1;
  for (int i = 0; i < model.num_layers(); ++i) {
    if (embedding < 0 && model.layer(i).kind() == "embedding") embedding = i;
    const BlockRange range = model.param_range(i);
    if (range.count == 0) continue;
    for (size_t k = 0; k < pieces.size(); ++k)
      if (range.offset >= pieces[k].offset && range.offset < pieces[k].offset + pieces[k].count)
        piece_of[static_cast<size_t>(i)] = static_cast<int>(k);
  }
  for (int i = 0; i < model.num_layers(); ++i)
    if (model.layer(i).kind() == "tied_dense") {
      SYNC_CHECK(embedding >= 0 && embedding < i, "tied_dense layer " << i << " without an "
                                                                      << "embedding before it");
      piece_of[static_cast<size_t>(i)] = piece_of[static_cast<size_t>(embedding)];
    }
  return piece_of;
}

// For every layer, the piece that the pass uses next after this layer's (-1: none): that of the
// first later layer (step +1, forward) or earlier one (step -1, backward) that reads another one.
std::vector<int> next_pieces(const std::vector<int>& piece_of, int step) {
  const int n = static_cast<int>(piece_of.size());
  const auto piece = [&](int i) { return piece_of[static_cast<size_t>(i)]; };
  std::vector<int> next(piece_of.size(), -1);
  for (int i = 0; i < n; ++i) {
    int j = i + step;
    while (j >= 0 && j < n && (piece(j) < 0 || piece(j) == piece(i))) j += step;
    if (j >= 0 && j < n) next[static_cast<size_t>(i)] = piece(j);
  }
  return next;
}

class Zero final : public Strategy {
 public:
  Zero(int stage, double bucket_mb, const OptimizerConfig& optimizer, GatherOptions gather,
       bool give_back_memory)
      : stage_(stage),
        bucket_mb_(bucket_mb),
        optimizer_config_(optimizer),
        gather_(gather),
        give_back_memory_(give_back_memory) {}

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
    const bool host_pages =
        give_back_memory_ && !ctx.exec.cost_only() && !ctx.passes_on_accelerator;
    // The first pass then finds the gradients zeroed too, with no page in memory.
    release_grads_ = stage_ >= 2 && host_pages;
    if (release_grads_) clear_pages(ctx.grads.data(), ctx.grads.size_bytes());
    grads_zeroed_ = release_grads_;
    if (stage_ == 3) {
      release_ = host_pages;
      whole_ = true;
      piece_of_layer_ = piece_of_layers(ctx.model, pieces_);
      forward_next_ = next_pieces(piece_of_layer_, +1);
      backward_next_ = next_pieces(piece_of_layer_, -1);
      gathers_.resize(pieces_.size());
    }
    if (keeps_master_shard() && !ctx.exec.cost_only()) copy_shard_from_model(ctx);
  }
  // This worker's share of the global batch: the reduce-scatter's sum is then the mean.
  float gradient_scale(const WorkerContext& ctx, const GlobalBatch& batch) const override {
    int64_t total = 0;
    for (int w = 0; w < ctx.comm.size(); ++w) total += batch.count_of(w);
    return total == 0 ? 0.0f
                      : static_cast<float>(static_cast<double>(batch.count_of(ctx.comm.rank())) /
                                           static_cast<double>(total));
  }
  // Stage 3: the unit of this layer gathered, the next one (in forward order) prefetched.
  void before_forward_layer(WorkerContext& ctx, int layer) override {
    if (stage_ != 3) return;
    if (layer == 0) {  // a new pass: every unit is gathered again
      active_ = -1;
      if (whole_) {
        for (size_t k = 0; k < pieces_.size(); ++k) give_back(ctx, static_cast<int>(k));
        whole_ = false;
        resident_ = -1;
      }
    }
    const int k = piece_of_layer_[static_cast<size_t>(layer)];
    if (k < 0 || k == active_) return;
    use_unit(ctx, k, forward_next_[static_cast<size_t>(layer)]);
  }
  // Stage 3: the same for backward, prefetching the unit before it.
  void before_backward_layer(WorkerContext& ctx, int layer) override {
    if (stage_ != 3) return;
    if (layer == ctx.model.num_layers() - 1) active_ = -1;
    const int k = piece_of_layer_[static_cast<size_t>(layer)];
    if (k < 0 || k == active_) return;
    use_unit(ctx, k, backward_next_[static_cast<size_t>(layer)]);
  }
  // Stages 2 and 3: each bucket reduce-scattered as soon as backward has filled it, at most
  // kScattersInFlight at once.
  void after_backward_layer(WorkerContext& ctx, int layer) override {
    if (stage_ == 1) return;
    grads_zeroed_ = false;
    for (size_t k = 0; k < pieces_.size(); ++k) {
      const Piece& piece = pieces_[k];
      if (piece.first_layer != layer) continue;
      if (scatters_.size() == kScattersInFlight) finish_scatter(ctx);
      scatters_.push_back(
          {ctx.comm.reduce_scatter_async(ctx.grads.subspan(piece.offset, piece.count),
                                         shard_of(grads_, piece), ReduceOp::kSum, gather_),
           k});
    }
  }
  void before_step(WorkerContext& ctx) override {
    if (stage_ == 1) reduce_scatter(ctx, pieces_.front());
    while (!scatters_.empty()) finish_scatter(ctx);
    grads_zeroed_ = release_grads_;
    if (keeps_master_shard() || ctx.exec.cost_only()) return;
    copy_shard_from_model(ctx);  // the allgather of the last step left the model whole
  }
  OptimizerTarget optimizer_target(WorkerContext&) override {
    return {*optimizer_, params_, grads_};
  }
  void after_step(WorkerContext& ctx, int64_t) override {
    if (stage_ != 3) gather_all(ctx);
  }
  // Stage 3: the whole model, for evaluation, checkpoints and the final model.
  void on_epoch_end(WorkerContext& ctx) override {
    if (stage_ == 3) gather_all(ctx);
  }
  bool gives_back_parameters() const override { return release_; }
  bool gives_back_gradients() const override { return release_grads_; }
  bool gradients_zeroed() const override { return grads_zeroed_; }
  int64_t sync_period(const WorkerContext&) const override { return 1; }
  // The optimizer state of this worker's shard, and the master shard when the checkpointed model
  // does not hold it: in a 16-bit wire format the gathered model is rounded, and in stage 3 a
  // mid-epoch model holds the units as gathered before the last step. Otherwise the model's
  // block is the shard bit for bit, and on_train_begin takes it from there.
  void save_state(const WorkerContext& ctx, ByteWriter& out) const override {
    out.put_span<float>(optimizer_->state());
    if (keeps_master_shard() && !ctx.exec.cost_only()) out.put_span<float>(params_);
  }
  void restore_state(WorkerContext& ctx, ByteReader& in) override {
    in.get_into<float>(optimizer_->state());
    if (keeps_master_shard() && !ctx.exec.cost_only()) in.get_into<float>(params_);
  }

 private:
  // Whether the shard is the master copy of this worker's parameters, taken from the model once
  // at the start: in stage 3 the model holds only gathered units; in a 16-bit wire format the
  // gathered model is rounded, and the optimizer must keep stepping the fp32 values (as mixed
  // precision keeps fp32 master weights). Otherwise the shard is copied from the model, which
  // the last allgather left whole and exact, before every step.
  bool keeps_master_shard() const { return stage_ == 3 || gather_.wire != WireFormat::kFp32; }
  static std::span<float> shard_of(std::span<float> buffer, const Piece& piece) {
    return buffer.subspan(piece.shard_offset, piece.block.count);
  }
  // Stages 2 and 3: the oldest reduce-scatter in flight completed; where gradients are given back
  // (release_grads_), the pages of its bucket then go back to the kernel and the bucket reads as
  // zeros (as the next backward expects it: the pass does not zero gradients left zeroed).
  void finish_scatter(WorkerContext& ctx) {
    scatters_.front().work->wait();
    const Piece& piece = pieces_[scatters_.front().piece];
    scatters_.pop_front();
    if (release_grads_) clear_pages(ctx.grads.data() + piece.offset, piece.count * sizeof(float));
  }
  void reduce_scatter(WorkerContext& ctx, const Piece& piece) {
    ctx.comm.reduce_scatter(ctx.grads.subspan(piece.offset, piece.count), shard_of(grads_, piece),
                            ReduceOp::kSum, gather_);
  }
  void gather_all(WorkerContext& ctx) {
    for (const Piece& piece : pieces_)
      ctx.comm.allgather(shard_of(params_, piece), ctx.params.subspan(piece.offset, piece.count),
                         gather_);
    whole_ = true;
  }
  void copy_shard_from_model(WorkerContext& ctx) {
    for (const Piece& piece : pieces_) {
      const auto first =
          ctx.params.begin() + static_cast<std::ptrdiff_t>(piece.offset + piece.block.offset);
      std::copy(first, first + static_cast<std::ptrdiff_t>(piece.block.count),
                shard_of(params_, piece).begin());
    }
  }
  // Stage 3: the pages of the unit done with given back, unit k's allgather started unless it is
  // in flight (prefetched), then unit `next`'s (when there is one) so that it overlaps this
  // unit's compute, then unit k's completed.
  void use_unit(WorkerContext& ctx, int k, int next) {
    if (resident_ >= 0 && resident_ != k) give_back(ctx, resident_);
    resident_ = k;
    start_gather(ctx, k);
    if (next >= 0 && next < static_cast<int>(pieces_.size())) start_gather(ctx, next);
    WorkPtr& work = gathers_[static_cast<size_t>(k)];
    work->wait();
    work.reset();
    active_ = k;
  }
  // Stage 3 on the host: unit k's whole pages of the model go back to the kernel (its edges may
  // share a page with a neighbour). Its allgather writes them again when it is next used.
  void give_back(WorkerContext& ctx, int k) {
    if (!release_) return;
    const Piece& piece = pieces_[static_cast<size_t>(k)];
    release_pages(ctx.params.data() + piece.offset, piece.count * sizeof(float));
  }
  void start_gather(WorkerContext& ctx, int k) {
    WorkPtr& work = gathers_[static_cast<size_t>(k)];
    if (work) return;
    const Piece& piece = pieces_[static_cast<size_t>(k)];
    work = ctx.comm.allgather_async(shard_of(params_, piece),
                                    ctx.params.subspan(piece.offset, piece.count), gather_);
  }

  int stage_;
  double bucket_mb_;
  OptimizerConfig optimizer_config_;
  GatherOptions gather_;   // the wire format and the algorithm (ring or hierarchical)
  bool give_back_memory_;  // strategy.give_back_memory
  std::vector<Piece> pieces_;
  std::vector<float> storage_;
  std::span<float> params_, grads_;  // this worker's shard: its parameters and summed gradients
  std::unique_ptr<Optimizer> optimizer_;
  // Stages 2 and 3: the reduce-scatters in flight (oldest first) and their pieces; whether the
  // gradients' pages are given back once reduce-scattered (as for stage 3's units, below),
  // and whether ctx.grads holds zeros only (every bucket given back since the last backward).
  struct Scatter {
    WorkPtr work;
    size_t piece = 0;
  };
  std::deque<Scatter> scatters_;
  bool release_grads_ = false, grads_zeroed_ = false;
  // Stage 3: each layer's unit and the unit that each pass uses after it (prefetched), each
  // unit's allgather in flight, the unit in use (-1: none).
  std::vector<int> piece_of_layer_, forward_next_, backward_next_;
  std::vector<WorkPtr> gathers_;
  int active_ = -1;
  // Stage 3: whether units are given back once done with (with strategy.give_back_memory, not in
  // cost-only runs, which hold no parameters, nor for an accelerator's passes), whether the model
  // is whole (after on_train_begin and each gather_all: given back at the next pass's start), and
  // the unit whose pages are in memory (-1: none, or the whole model).
  bool release_ = false, whole_ = false;
  int resident_ = -1;
};

}  // namespace

std::unique_ptr<Strategy> make_zero(const Scenario& scenario) {
  const StrategySection& s = scenario.strategy;
  SYNC_CHECK(s.stage >= 1 && s.stage <= 3, "zero stage " << s.stage << " (refused at parsing)");
  return std::make_unique<Zero>(s.stage, s.bucket_mb, scenario.optimizer,
                                GatherOptions(wire_format(s.compression), s.algorithm),
                                s.give_back_memory);
}

}  // namespace syncopate
