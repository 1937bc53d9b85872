#pragma once
// Sharded data parallelism (ZeRO, Rajbhandari et al. 2020), stages 1 to 3: each worker keeps
// the optimizer state of its shard of the parameters only (stage 3: the parameters too).
#include <memory>

#include "core/scenario/scenario.hpp"
#include "core/train/strategy.hpp"

namespace syncopate {

// Stage 1: after backward, one reduce-scatter of the gradients (sum of the workers' shares, so
// the mean); each worker steps its block with the scenario's optimizer, then an allgather of
// the parameters. Stage 2: the same per gradient bucket (strategy.bucket_mb), each bucket's
// reduce-scatter started (asynchronously) as soon as backward has filled it, and the allgather
// per bucket after the step. Stage 3 (FSDP): the buckets are units of whole layers whose
// parameters this worker holds only its block of; each unit is allgathered before its first
// layer's forward and again before its backward, the next unit's allgather started first so
// that it overlaps this unit's compute; its gradients are reduce-scattered as in stage 2; the
// optimizer steps the block; at each epoch's end the whole model is gathered (evaluation,
// checkpoints, the final model).
std::unique_ptr<Strategy> make_zero(const Scenario& scenario);

}  // namespace syncopate
