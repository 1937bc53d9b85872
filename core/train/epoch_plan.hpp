#pragma once
// The steps of one worker's epoch: how many samples each step takes and which, in the global
// data order (each worker its strided slice of every global batch) or the block order (the
// ds-tensor's blocks dealt to the workers, steps not crossing blocks); under a data.partition
// other than iid, from the worker's own partition (see plan_epoch in epoch_plan.cpp).
#include <cstdint>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "core/train/strategy.hpp"
#include "core/train/train_data.hpp"

namespace syncopate {

// One step's worth of work for one worker.
struct PlannedStep {
  std::vector<int64_t> samples;  // dataset indices (empty in cost-only runs)
  int64_t size = 0;              // samples in this step
  bool block_begin = false;      // first step of a ds-tensor block
  GlobalBatch global;            // the step's global batch (global order only)
};

// The steps of epoch `epoch` for `worker`. cost_only: sizes only, no sample indices.
std::vector<PlannedStep> plan_epoch(const Scenario& scenario, const TrainData& data, int worker,
                                    int epoch, bool cost_only);

}  // namespace syncopate
