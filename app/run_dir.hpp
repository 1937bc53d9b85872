#pragma once
// The run directory of a checkpointed or resumed run: chosen before training (DIR.partial holds
// scenario.toml and checkpoint/ while it runs), and what an interrupted run leaves there.
#include <optional>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/recorder.hpp"

namespace syncopate::app {

// Exit code of a run stopped before its last epoch: interrupted by a signal (a checkpoint
// written, resumable), or aborted by a simulated fault ([[sim.faults]]).
inline constexpr int kExitInterrupted = 4;

struct RunTarget {
  std::string requested;  // the run directory asked for (--out, or runs/<name>)
  std::string dir;        // DIR, once chosen (before training)
  CheckpointPlan plan;    // plan.dir is DIR.partial once chosen
  // A relaunched job (app/restart.hpp): the restarts so far, and the date up to which the host
  // and link failures of [[sim.faults]] have come and are not replayed.
  std::vector<FaultRestart> restarts;
  double replayed_after_s = 0;
};

// A fresh run: picks DIR (unique_run_dir of the requested one), creates DIR.partial, its
// scenario.toml and INCOMPLETE (what to do if the run stops).
void open_run_dir(RunTarget& target, const Scenario& scenario);
// `syncopate run --resume DIR` (or DIR.partial): the scenario that DIR.partial/scenario.toml holds,
// at `workers` workers if given. Throws UserError when there is nothing to resume there, or when
// the scenario's strategy cannot change its worker count (check_resizable).
Scenario open_resumed_run(const std::string& given, RunTarget& target,
                          std::optional<int> workers = std::nullopt);
// An interrupted run: DIR.partial/metrics.csv with every finished epoch, and the message that
// says where it stopped (inside an epoch: after which step; a signal where no mid-epoch
// checkpoint can be restored: why at an epoch boundary) and how to resume it.
std::string write_interrupted(const RunTarget& target, const Scenario& scenario,
                              const std::vector<WorkerReport>& reports);
// Before the complete run directory is written: checkpoints, epochs/ and the notes of an
// unfinished run go (INCOMPLETE, restarts.json -- its records are in summary.json -- and the
// fault.json and ERROR of an abort that a resume continued).
void drop_checkpoints(const RunTarget& target);

}  // namespace syncopate::app
