// The local backend's entry point: one worker in-process, on the wall clock.
#include <chrono>

#include "app/commands.hpp"
#include "core/base/check.hpp"
#include "core/comm/local_backend.hpp"
#include "core/train/trainer.hpp"

namespace syncopate::app {

RunResult run_local(const Scenario& scenario, const ProgressFn& progress, RunTarget& target) {
  if (scenario.workers != 1)
    throw UserError(scenario.source + ": workers: the local backend runs one worker (" +
                    std::to_string(scenario.workers) +
                    " asked); use backend = \"sim\" or \"mpi\" for more");
  const auto start = std::chrono::steady_clock::now();
  const AcceleratorFactory accelerator = accelerator_for(scenario);
  const TrainData data = prepare_data(scenario, false);
  LocalCommunicator comm;
  WallClockExecutor exec;
  RunResult result;
  result.reports.push_back(
      train_worker(scenario, data, comm, exec, accelerator, progress, target.plan));
  result.interrupted = result.reports.back().interrupted;
  result.info.partitions_csv = data.partitions_csv;
  result.info.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace syncopate::app
