#pragma once
// Sharded data parallelism (ZeRO, Rajbhandari et al. 2020), stages 1 to 3: each worker keeps
// the optimizer state of its shard of the parameters only (stage 3: the parameters too).
#include <memory>

#include "core/scenario/scenario.hpp"
#include "core/train/strategy.hpp"

namespace syncopate {

// Stage 1: after backward, one reduce-scatter of the gradients (sum of the workers' shares, so
// the mean); each worker steps its block with the scenario's optimizer, then an allgather of the
// parameters. Stage 2: the same per gradient bucket (strategy.bucket_mb), each bucket's
// reduce-scatter started (asynchronously) as soon as backward has filled it, one in flight at a
// time, and the allgather per bucket after the step; with strategy.give_back_memory, on the
// host, the pages of a bucket's gradients go back to the kernel once its reduce-scatter has
// completed, so that the gradient buffer holds in memory the bucket in flight and the one that
// backward fills (as memory_per_gpu counts). Stage 3 (FSDP): the buckets are units of whole
// layers whose parameters this worker holds only its block of; each unit is allgathered before
// its first layer's forward and again before its backward, the next unit's allgather started
// first so that it overlaps this unit's compute; its gradients are reduce-scattered as in stage
// 2; the optimizer steps the block; at each epoch's end the whole model is gathered (evaluation,
// checkpoints, the final model); with strategy.give_back_memory, on the host, the pages of a
// unit's parameters go back to the kernel once the pass moves on to another unit, and those of
// the whole model at the first pass after it was gathered: during the steps a worker's model
// holds in memory only the unit it computes with and the one prefetched (and the pages that
// units share at their edges), as memory_per_gpu counts. A checkpoint taken inside an epoch then
// holds zeros for the units given back; the shard that it resumes from is in the strategy's
// state. An accelerator's passes read the model and write the gradients whole, so no page is
// given back there. Giving pages back costs a page fault per page when they are written again
// (on a virtual machine, far more than zeroing them: bench_kernels' BM_GradientBuffer), hence
// the knob, off by default.
std::unique_ptr<Strategy> make_zero(const Scenario& scenario);

}  // namespace syncopate
