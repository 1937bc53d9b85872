#pragma once
// The worker loop: one per worker, identical on every backend.
#include <memory>
#include <optional>

#include "core/comm/comm.hpp"
#include "core/data/data.hpp"
#include "core/data/ds_tensor.hpp"
#include "core/nn/accelerator.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/recorder.hpp"

namespace syncopate {

// The data every worker reads (shared, read-only; loaded once per process).
struct TrainData {
  std::shared_ptr<const Dataset> train;  // shape-only x/y in cost-only runs
  std::shared_ptr<const Dataset> test;   // null in cost-only runs
  std::optional<DsTensor> blocks;        // the ds-tensor over `train`
};

// Loads, subsets and normalises the scenario's data. cost_only: no data is read, only its size.
TrainData prepare_data(const Scenario& scenario, bool cost_only);

// Trains one worker to the end; `comm` spans all workers. Throws UserError when the loss
// becomes NaN or Inf (naming worker, epoch and step).
// With an accelerator factory, forward and backward run on the device it makes.
WorkerReport train_worker(const Scenario& scenario, const TrainData& data, Communicator& comm,
                          Executor& exec, const AcceleratorFactory& accelerator = {});

struct Evaluation {
  double accuracy = -1;  // -1 for regression
  double loss = 0;
};
Evaluation evaluate(class Model& model, const Dataset& test, LossKind loss);

}  // namespace syncopate
