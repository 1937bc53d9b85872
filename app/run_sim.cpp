// The simulator's entry point: every worker as an actor on the modelled platform.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/restart.hpp"
#include "backends/sim/sim_backend.hpp"
#include "core/base/check.hpp"
#include "core/comm/fault_abort.hpp"
#include "core/comm/mpi_settings.hpp"
#include "core/train/memory.hpp"
#include "core/train/trainer.hpp"

namespace syncopate::app {
namespace {

// epoch_sync and epoch_async go on without a worker that a host_failure or a failure of its NIC
// takes away.
bool elastic(const Scenario& s) {
  const StrategyKind kind = s.strategy.kind;
  if (kind != StrategyKind::kEpochSync && kind != StrategyKind::kEpochAsync) return false;
  return std::any_of(s.sim.faults.begin(), s.sim.faults.end(), [](const SimFault& f) {
    return f.kind == FaultKind::kHostFailure ||
           (f.kind == FaultKind::kLinkFailure && f.link.empty());
  });
}

// The abort with the last checkpoint's date in its record and message (the time lost is then
// the time since that checkpoint).
FaultAbort with_last_checkpoint(const FaultAbort& e, double checkpoint_s) {
  FaultRecord record = e.record();
  std::string what = e.what();
  if (checkpoint_s <= 0) return e;
  record.last_checkpoint_s = checkpoint_s;
  const size_t losing = what.rfind("losing ");
  if (losing != std::string::npos) what.resize(losing);
  what += "losing " + std::to_string(record.lost_seconds()) +
          " s since the last checkpoint (t=" + std::to_string(checkpoint_s) + " s)";
  return FaultAbort(what, record);
}

}  // namespace

RunResult run_sim(const Scenario& scenario, const ProgressFn& progress, RunTarget& target) {
  sim::SimOptions options;
  options.platform = scenario.sim.platform;
  options.platform_overrides = scenario.sim.platform_params;
  options.workers = scenario.workers;
  options.fidelity = scenario.sim.fidelity;
  options.cost_only = scenario.sim.mode == SimMode::kCostOnly;
  options.slowdown = scenario.sim.slowdown;
  options.noise = scenario.sim.noise;
  options.faults = faults_to_come(scenario.sim.faults, target.replayed_after_s);
  options.elastic = elastic(scenario);
  const GpuMemory memory = memory_per_gpu(scenario);
  options.memory_per_gpu_bytes = static_cast<double>(memory.total());
  options.memory_detail = describe(memory, scenario.batch_size);
  options.scenario_source = scenario.source;

  // Data is loaded once and shared read-only by every simulated worker (one process).
  const TrainData data = prepare_data(scenario, options.cost_only);
  RunResult result;
  result.reports.resize(static_cast<size_t>(scenario.workers));
  // Every simulated worker's finished epochs in one file (recorder.hpp), and its checkpoints in
  // one file per set (checkpoint.hpp).
  std::optional<EpochRows> rows;
  std::optional<SharedCheckpoints> checkpoints;
  CheckpointPlan plan = target.plan;
  if (!plan.dir.empty()) {
    plan.shared_rows = &rows.emplace(plan.dir, plan.resume);
    plan.shared_checkpoints = &checkpoints.emplace(plan.dir);
  }
  sim::SimStats stats;
  try {
    stats = sim::run_simulation(options, [&](Communicator& comm, Executor& exec) {
      WorkerReport& report = result.reports[static_cast<size_t>(comm.rank())];
      report = train_worker(scenario, data, comm, exec, {}, progress, plan, &report);
    });
  } catch (const FaultAbort& e) {
    const std::optional<double> checkpoint =
        target.plan.dir.empty() ? std::nullopt : checkpoint_set_date(target.plan.dir, scenario);
    throw with_last_checkpoint(e, checkpoint.value_or(0));
  }
  result.interrupted = result.reports.front().interrupted;
  result.info.platform = scenario.sim.platform;
  result.info.partitions_csv = data.partitions_csv;
  result.info.wall_seconds = stats.wall_seconds;
  for (const sim::WorkerLoss& lost : stats.losses) {
    const auto& epochs = result.reports[static_cast<size_t>(lost.worker)].epochs;
    const double since = epochs.empty() ? 0 : epochs.back().end_s;
    result.info.lost_workers.push_back({lost.worker, lost.at_s, lost.kind, lost.at_s - since});
  }
  result.info.extra = {{"simulated_seconds", stats.simulated_seconds},
                       {"simulation_wall_seconds", stats.wall_seconds},
                       {"simulated_comms", static_cast<double>(stats.comms)},
                       {"simulated_activities", static_cast<double>(stats.activities)},
                       {"modelled_events", static_cast<double>(stats.modelled_events)}};
  // What a calibrated platform was measured under, for compare (core/comm/mpi_settings.hpp).
  for (const auto& [setting, on] : stats.calibrated_under)
    result.info.extra.emplace_back(std::string(mpi_settings::kCalibrated) + setting,
                                   on ? 1.0 : 0.0);
  return result;
}

}  // namespace syncopate::app
