#pragma once
// Resuming a checkpointed run at another worker count (`syncopate run --resume DIR --workers W'`):
// which strategies allow it, and what of the W workers' epoch-boundary checkpoints each of the
// W' new workers starts from.
//   parameters       epoch_sync and local_sgd: the replicas' model, their mean where they differ
//                    (epoch_sync between averages, local_sgd inside an H-step period: the average
//                    a resize needs); epoch_async: the global model after the last merge, from
//                    which every worker's snapshot is re-made
//   optimizer state  the mean of the W states (equal ones stay as they are, bit for bit), its
//                    step count the largest: the moments estimate the same averaged gradient on
//                    every worker, so the mean is the estimate over all the data, and it does not
//                    depend on which worker keeps its number
//   strategy state   afresh from on_train_begin (local_sgd: a new H-step period)
//   data             the scenario's own deal at W' workers: the same seeded block permutation of
//                    each epoch (keyed by seed and epoch, not by worker count), dealt round-robin
//                    to W' workers
//   clock            the latest of the W clocks, on every new worker
//   metrics          epochs numbered on; the rows of workers that are gone stay with worker 0's
//                    report, so metrics.csv keeps every epoch of every worker
#include <vector>

#include "core/scenario/scenario.hpp"
#include "core/train/checkpoint.hpp"

namespace syncopate {

// Throws UserError (naming the scenario's workers key) when scenario `s` cannot continue at its
// worker count from checkpoints of `from` workers: strategies other than epoch_sync,
// epoch_async and local_sgd, and a data.partition drawn per worker count.
void check_resizable(const Scenario& s, int from);

// The mean of `values` elementwise, summed in double in their order; the first one itself when
// all are equal bit for bit.
std::vector<float> mean_of(const std::vector<const std::vector<float>*>& values);

// The parameters every new worker starts from (see above), from a complete resume set.
std::vector<float> resized_params(const std::vector<WorkerCheckpoint>& set, const Scenario& s);

// New worker `worker`'s checkpoint of scenario `s` (s.workers workers) from the resume set of
// set.size() workers; its params are resized_params, its strategy state empty (not restored).
WorkerCheckpoint resized_checkpoint(const std::vector<WorkerCheckpoint>& set, const Scenario& s,
                                    int worker);

}  // namespace syncopate
