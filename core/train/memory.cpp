// Per-GPU memory of a run: parameters, gradients, optimizer state and activations.
#include "core/train/memory.hpp"

#include <algorithm>
#include <memory>

#include "core/comm/comm.hpp"
#include "core/nn/model_summary.hpp"
#include "core/train/powersgd.hpp"

namespace syncopate {
namespace {

// Optimizer state in floats per parameter.
uint64_t state_floats(const OptimizerConfig& optimizer) {
  if (optimizer.kind != OptimizerKind::kSgd) return 2;  // m and v
  return optimizer.momentum != 0 ? 1 : 0;
}

}  // namespace

uint64_t largest_unit(const ModelSummary& summary, double bucket_mb) {
  size_t first = 0;  // the first layer with parameters
  while (first + 1 < summary.layers.size() && summary.layers[first].params == 0) ++first;
  const double limit = bucket_mb * 1024 * 1024;
  uint64_t largest = 0, unit = 0;
  for (size_t i = summary.layers.size(); i-- > 0;) {
    const auto params = static_cast<uint64_t>(summary.layers[i].params);
    if (params == 0) continue;
    unit += params;
    if (4.0 * static_cast<double>(unit) >= limit || i == first) {
      largest = std::max(largest, unit);
      unit = 0;
    }
  }
  return largest;
}

std::string format_bytes(uint64_t bytes) { return si(static_cast<double>(bytes), "B"); }

GpuMemory memory_per_gpu(const Scenario& s) {
  const ModelSummary summary = summarize_model(s.model.spec(), s.batch_size);
  const auto n = static_cast<uint64_t>(summary.params);
  const bool zero = s.strategy.kind == StrategyKind::kZero;
  // The largest shard of n floats over the workers.
  const uint64_t shard = block_of(n, s.workers, 0).count;
  GpuMemory m;
  m.parameters = 4 * n;
  // Stage 3: the shard, the unit in use and the one prefetched.
  if (zero && s.strategy.stage >= 3)
    m.parameters = 4 * (shard + 2 * largest_unit(summary, s.strategy.bucket_mb));
  // Stages 2 and 3: the shard, the bucket being reduce-scattered and the one backward fills.
  m.gradients = 4 * n;
  if (zero && s.strategy.stage >= 2)
    m.gradients = 4 * (shard + 2 * largest_unit(summary, s.strategy.bucket_mb));
  // ddp with PowerSGD: its error feedback and factors, with the gradients.
  if (s.strategy.compression == Compression::kPowerSgd) {
    const std::unique_ptr<Model> model = make_model(s.model.spec(), Storage::kShapeOnly);
    const PowerSgd powersgd(param_tensors(s.model.spec(), *model), s.strategy.powersgd_rank, 0);
    m.gradients += 4 * powersgd.state_floats(n);
  }
  m.optimizer_state = 4 * state_floats(s.optimizer) * (zero ? shard : n);
  // diloco's outer optimizer: the global model and, with momentum, its buffer.
  if (s.strategy.kind == StrategyKind::kDiloco)
    m.optimizer_state += 4 * n * (s.strategy.outer_momentum != 0 ? 2 : 1);
  m.activations = static_cast<uint64_t>(summary.activation_bytes);
  return m;
}

std::string describe(const GpuMemory& m, int64_t batch_size) {
  return format_bytes(m.total()) + " (parameters " + format_bytes(m.parameters) + ", gradients " +
         format_bytes(m.gradients) + ", optimizer state " + format_bytes(m.optimizer_state) +
         ", activations " + format_bytes(m.activations) + " at batch_size " +
         std::to_string(batch_size) + ")";
}

}  // namespace syncopate
