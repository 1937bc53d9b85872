#pragma once
// Sharded data parallelism (ZeRO, Rajbhandari et al. 2020), stages 1 and 2: each worker keeps
// the optimizer state of its shard of the parameters only.
#include <memory>

#include "core/scenario/scenario.hpp"
#include "core/train/strategy.hpp"

namespace syncopate {

// Stage 1: after backward, one reduce-scatter of the gradients (sum of the workers' shares, so
// the mean); each worker steps its block with the scenario's optimizer, then an allgather of
// the parameters. Stage 2: the same per gradient bucket (strategy.bucket_mb), each bucket
// reduce-scattered as soon as backward has filled it (blocking: the Communicator has no
// asynchronous reduce-scatter), and the allgather per bucket after the step.
std::unique_ptr<Strategy> make_zero(const Scenario& scenario);

}  // namespace syncopate
