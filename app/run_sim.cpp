// The simulator's entry point: every worker as an actor on the modelled platform.
#include <chrono>

#include "app/commands.hpp"
#include "backends/sim/sim_backend.hpp"
#include "core/base/check.hpp"
#include "core/train/memory.hpp"
#include "core/train/trainer.hpp"

namespace syncopate::app {

RunResult run_sim(const Scenario& scenario, const ProgressFn& progress, RunTarget& target) {
  sim::SimOptions options;
  options.platform = scenario.sim.platform;
  options.platform_overrides = scenario.sim.platform_params;
  options.workers = scenario.workers;
  options.fidelity = scenario.sim.fidelity;
  options.cost_only = scenario.sim.mode == SimMode::kCostOnly;
  options.slowdown = scenario.sim.slowdown;
  options.noise = scenario.sim.noise;
  options.faults = scenario.sim.faults;
  const GpuMemory memory = memory_per_gpu(scenario);
  options.memory_per_gpu_bytes = static_cast<double>(memory.total());
  options.memory_detail = describe(memory, scenario.batch_size);
  options.scenario_source = scenario.source;

  // Data is loaded once and shared read-only by every simulated worker (one process).
  const TrainData data = prepare_data(scenario, options.cost_only);
  RunResult result;
  result.reports.resize(static_cast<size_t>(scenario.workers));
  const sim::SimStats stats = sim::run_simulation(options, [&](Communicator& comm, Executor& exec) {
    result.reports[static_cast<size_t>(comm.rank())] =
        train_worker(scenario, data, comm, exec, {}, progress, target.plan);
  });
  result.interrupted = result.reports.front().interrupted;
  result.info.platform = scenario.sim.platform;
  result.info.partitions_csv = data.partitions_csv;
  result.info.wall_seconds = stats.wall_seconds;
  result.info.extra = {{"simulated_seconds", stats.simulated_seconds},
                       {"simulation_wall_seconds", stats.wall_seconds},
                       {"simulated_comms", static_cast<double>(stats.comms)},
                       {"simulated_activities", static_cast<double>(stats.activities)},
                       {"modelled_events", static_cast<double>(stats.modelled_events)}};
  return result;
}

}  // namespace syncopate::app
