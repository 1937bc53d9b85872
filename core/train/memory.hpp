#pragma once
// The memory one GPU (worker) needs for a run, by the standard ZeRO accounting (Rajbhandari et
// al. 2020, section 3) for float32 training: parameters 4 bytes each, gradients 4, optimizer
// state 8 (Adam/AdamW: m and v) or 4 (SGD with momentum) or 0 (plain SGD), each divided by the
// workers where the strategy shards it (zero: stage 1 the optimizer state, stage 2 and the
// gradients, of which it also holds two whole buckets: the one being reduce-scattered and the
// one that backward fills; stage 3 and the parameters, of which it also holds two whole units
// gathered: the one computing and the one prefetched), plus the activations kept for backward at
// the per-worker batch. diloco's outer optimizer state (the global model, 4 bytes per parameter,
// and its momentum buffer, 4 more unless outer_momentum is 0) counts as optimizer state; PowerSGD's
// error feedback (4 bytes per parameter) and factors (its P, Q and packed vectors) count with the
// gradients.
#include <cstdint>
#include <string>

#include "core/nn/model_summary.hpp"
#include "core/scenario/scenario.hpp"

namespace syncopate {

struct GpuMemory {
  uint64_t parameters = 0, gradients = 0, optimizer_state = 0, activations = 0;
  uint64_t total() const { return parameters + gradients + optimizer_state + activations; }
};

// Activations: every layer's output at scenario.batch_size, float32 (core/nn/model_summary.hpp).
// A sharded part counts the largest shard (the first block of block_of).
GpuMemory memory_per_gpu(const Scenario& scenario);

// Parameters of zero's largest unit (stage 3) or gradient bucket (stages 2 and 3): the buckets of
// strategy.bucket_mb (gradient_buckets in core/train/strategy.hpp), from the model's summary.
uint64_t largest_unit(const ModelSummary& summary, double bucket_mb);

// "70.3 GB (parameters 6.23 GB, gradients 6.23 GB, optimizer state 12.5 GB, activations 45.3 GB
// at batch_size 8)", in decimal units.
std::string describe(const GpuMemory& memory, int64_t batch_size);
// "12.5 GB": si(bytes, "B"), three significant digits, decimal units.
std::string format_bytes(uint64_t bytes);

}  // namespace syncopate
