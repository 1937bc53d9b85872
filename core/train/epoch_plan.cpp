// Planning one worker's epoch in the global or the block data order, from the per-epoch deal
// (data.partition = iid) or from the worker's own partition.
#include "core/train/epoch_plan.hpp"

#include <algorithm>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

// The global order: a per-epoch permutation of all samples, global batches of workers x b,
// this worker's strided share of each (DistributedSampler semantics).
std::vector<PlannedStep> plan_global_order(const Scenario& s, const Dataset& train, int worker,
                                           uint32_t epoch, bool cost_only) {
  std::vector<PlannedStep> steps;
  const int64_t b = s.batch_size;
  const int workers = s.workers;
  const int64_t n = train.size();
  const int64_t total = ddp_steps_per_epoch(n, workers, b);
  std::vector<int64_t> perm;
  if (!cost_only) perm = global_permutation(n, s.seed, epoch);
  for (int64_t k = 0; k < total; ++k) {
    PlannedStep step;
    step.global = {std::min(b * workers, n - k * b * workers), workers, {}};
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

// The block order: this worker's ds-tensor blocks as dealt for epoch `deal` (the epoch itself,
// or 0 for a fixed partition), each cut into steps of b samples (the last one shorter),
// shuffled inside the block if the scenario says so.
std::vector<PlannedStep> plan_block_order(const Scenario& s, const DsTensor& ds, int worker,
                                          uint32_t epoch, uint32_t deal, bool cost_only) {
  std::vector<PlannedStep> steps;
  const int64_t b = s.batch_size;
  for (int64_t block : ds.blocks_of_worker(s.seed, deal, worker, s.workers)) {
    std::vector<int64_t> samples;
    int64_t count = ds.row_range(block).size();
    if (!cost_only) samples = ds.samples_of_block(block, s.seed, epoch, s.data.shuffle_in_block);
    for (int64_t start = 0; start < count; start += b) {
      PlannedStep step;
      step.size = std::min(b, count - start);
      step.block_begin = start == 0;
      if (!cost_only)
        step.samples.assign(samples.begin() + start, samples.begin() + start + step.size);
      steps.push_back(std::move(step));
    }
  }
  return steps;
}

// The global order over partitions: every worker takes b samples a step from its own
// partition (shuffled per epoch) until it runs out, then steps with none; the epoch has as
// many steps as the largest partition needs, so that every worker runs the same collectives.
std::vector<PlannedStep> plan_partition_global(const Scenario& s, const Partition& p, int worker,
                                               uint32_t epoch, bool cost_only) {
  const int64_t b = s.batch_size;
  int64_t largest = 0;
  for (const auto& samples : p.samples)
    largest = std::max(largest, static_cast<int64_t>(samples.size()));
  std::vector<int64_t> order;
  if (!cost_only) order = worker_epoch_order(p, worker, s.seed, epoch, true);
  std::vector<PlannedStep> steps;
  for (int64_t k = 0; k * b < largest; ++k) {
    PlannedStep step;
    step.global.workers = p.workers();
    for (const auto& samples : p.samples) {
      const int64_t left = static_cast<int64_t>(samples.size()) - k * b;
      step.global.counts.push_back(std::clamp<int64_t>(left, 0, b));
      step.global.size += step.global.counts.back();
    }
    step.size = step.global.count_of(worker);
    if (!cost_only && step.size > 0)
      step.samples.assign(order.begin() + k * b, order.begin() + k * b + step.size);
    steps.push_back(std::move(step));
  }
  return steps;
}

// The block order over a partition: the worker's partition (shuffled per epoch if
// data.shuffle_in_block) cut into as many nearly even blocks as the iid deal gives it (at least
// one, at most one per sample), each cut into steps of b samples (the last one shorter).
std::vector<PlannedStep> plan_partition_blocks(const Scenario& s, const Partition& p, int worker,
                                               uint32_t epoch, bool cost_only) {
  const std::vector<int64_t> order =
      worker_epoch_order(p, worker, s.seed, epoch, s.data.shuffle_in_block && !cost_only);
  const auto n = static_cast<int64_t>(order.size());
  const int64_t dealt = (s.row_blocks() - worker + s.workers - 1) / s.workers;
  const int64_t blocks = std::min(n, std::max<int64_t>(1, dealt));
  const int64_t b = s.batch_size;
  std::vector<PlannedStep> steps;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t begin = i * (n / blocks) + std::min(i, n % blocks);
    const int64_t count = n / blocks + (i < n % blocks ? 1 : 0);
    for (int64_t start = 0; start < count; start += b) {
      PlannedStep step;
      step.size = std::min(b, count - start);
      step.block_begin = start == 0;
      if (!cost_only) {
        const auto first = order.begin() + begin + start;
        step.samples.assign(first, first + step.size);
      }
      steps.push_back(std::move(step));
    }
  }
  return steps;
}

}  // namespace

std::vector<PlannedStep> plan_epoch(const Scenario& s, const TrainData& data, int worker, int epoch,
                                    bool cost_only) {
  const auto ep = static_cast<uint32_t>(epoch);
  const DataPartition partition = s.data.partition;
  const bool global = s.data_order() == DataOrder::kGlobal;
  if (partition == DataPartition::kIid) {
    if (global) return plan_global_order(s, *data.train, worker, ep, cost_only);
    return plan_block_order(s, *data.blocks, worker, ep, ep, cost_only);
  }
  if (partition == DataPartition::kFixed && !global)
    return plan_block_order(s, *data.blocks, worker, ep, 0, cost_only);
  SYNC_CHECK(data.partition != nullptr, "no partition for " << to_string(partition));
  if (global) return plan_partition_global(s, *data.partition, worker, ep, cost_only);
  return plan_partition_blocks(s, *data.partition, worker, ep, cost_only);
}

}  // namespace syncopate
