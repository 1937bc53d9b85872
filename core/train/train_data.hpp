#pragma once
// The data a run trains on: the scenario's datasets, loaded once per process, cut to size and
// normalised, the ds-tensor over the training set and the workers' partitions.
#include <memory>
#include <optional>

#include "core/data/data.hpp"
#include "core/data/ds_tensor.hpp"
#include "core/data/partition.hpp"
#include "core/scenario/scenario.hpp"

namespace syncopate {

// The data every worker reads (shared, read-only; loaded once per process).
struct TrainData {
  std::shared_ptr<const Dataset> train;        // shape-only x/y in cost-only runs
  std::shared_ptr<const Dataset> test;         // null in cost-only runs
  std::optional<DsTensor> blocks;              // the ds-tensor over `train`
  std::shared_ptr<const Partition> partition;  // data.partition's deal; null for iid
  std::string partitions_csv;                  // its class histogram (partitions.csv); "" if none
};

// Loads, subsets and normalises the scenario's data. cost_only: no data is read, only its size.
TrainData prepare_data(const Scenario& scenario, bool cost_only);

}  // namespace syncopate
