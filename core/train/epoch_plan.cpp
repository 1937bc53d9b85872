// Planning one worker's epoch in the global or the block data order.
#include "core/train/epoch_plan.hpp"

#include <algorithm>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

// The global order: a per-epoch permutation of all samples, global batches of workers x b,
// this worker's strided share of each (DistributedSampler semantics).
std::vector<Step> plan_global_order(const Scenario& s, const Dataset& train, int worker,
                                    uint32_t epoch, bool cost_only) {
  std::vector<Step> steps;
  const int64_t b = s.batch_size;
  const int workers = s.workers;
  const int64_t n = train.size();
  const int64_t total = ddp_steps_per_epoch(n, workers, b);
  std::vector<int64_t> perm;
  if (!cost_only) perm = global_permutation(n, s.seed, epoch);
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

// The block order: this worker's ds-tensor blocks of the epoch, each cut into steps of b
// samples (the last one shorter), shuffled inside the block if the scenario says so.
std::vector<Step> plan_block_order(const Scenario& s, const DsTensor& ds, int worker,
                                   uint32_t epoch, bool cost_only) {
  std::vector<Step> steps;
  const int64_t b = s.batch_size;
  for (int64_t block : ds.blocks_of_worker(s.seed, epoch, worker, s.workers)) {
    std::vector<int64_t> samples;
    int64_t count = ds.row_range(block).size();
    if (!cost_only) samples = ds.samples_of_block(block, s.seed, epoch, s.data.shuffle_in_block);
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

}  // namespace

std::vector<Step> plan_epoch(const Scenario& s, const TrainData& data, int worker, int epoch,
                             bool cost_only) {
  const auto ep = static_cast<uint32_t>(epoch);
  if (s.data_order() == DataOrder::kGlobal)
    return plan_global_order(s, *data.train, worker, ep, cost_only);
  return plan_block_order(s, *data.blocks, worker, ep, cost_only);
}

}  // namespace syncopate
