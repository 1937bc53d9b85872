#pragma once
// The worker loop: one per worker, identical on every backend.
#include "core/comm/comm.hpp"
#include "core/nn/accelerator.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/progress.hpp"
#include "core/train/recorder.hpp"
#include "core/train/train_data.hpp"

namespace syncopate {

// Trains one worker to the end; `comm` spans all workers. Throws UserError when the loss
// becomes NaN or Inf (naming worker, epoch and step).
// With an accelerator factory, forward and backward run on the device it makes. Worker 0 calls
// `progress`, if given, after every step. With a checkpoint plan it writes checkpoints at
// epoch boundaries (and inside epochs: checkpoint.every_steps, a signalled stop), resumes from
// them, and may stop early (the report is then `interrupted`). Rank 0 at the end evaluates the
// final model (report.run_model).
// `so_far`, if given, receives the worker's id and each epoch's row as it finishes, so that a
// worker whose simulated host fails keeps the epochs it finished.
WorkerReport train_worker(const Scenario& scenario, const TrainData& data, Communicator& comm,
                          Executor& exec, const AcceleratorFactory& accelerator = {},
                          const ProgressFn& progress = {}, const CheckpointPlan& plan = {},
                          WorkerReport* so_far = nullptr);

}  // namespace syncopate
