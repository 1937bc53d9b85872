#pragma once
// The simulator's restart after a fault (sim.restart.recovery_s = R). A job that a host_failure
// or link_failure aborts (ddp and every strategy but the elastic epoch_sync and epoch_async) is
// relaunched as a scheduler relaunches a failed job: from its last complete checkpoint set (from
// the start when there is none yet), every worker's clock starting at the fault's date + R, on
// healthy spares: the host and link failures dated up to the relaunch are not replayed, later
// ones still come at their dates (stragglers and degradations keep their windows).
// SimGrid cannot be reset within a process, so the relaunch is this program again, `syncopate
// run --resume DIR.partial` (the resume path, bit-identical): the restarts so far are in
// DIR.partial/restarts.json, which the resumed run reads (open_resumed_run) and whose records
// end up in summary.json's "restarts".
#include <optional>
#include <string>
#include <vector>

#include "app/run_dir.hpp"
#include "core/comm/fault_abort.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/recorder.hpp"

namespace syncopate::app {

// The date of the latest checkpoint set that every worker of the run under `partial` wrote (the
// latest clock among its checkpoints); none when some worker has written none yet. A damaged or
// foreign checkpoint is an error (read_resume_set).
std::optional<double> checkpoint_set_date(const std::string& partial, const Scenario& scenario);

// DIR.partial/restarts.json: the run's restarts so far, oldest first (empty when none).
std::vector<FaultRestart> read_restarts(const std::string& partial);
void write_restarts(const std::string& partial, const std::vector<FaultRestart>& restarts);

// The faults that a relaunched job still meets: the host and link failures dated after
// `after_s` (the relaunch date), and every straggler and degradation.
std::vector<SimFault> faults_to_come(const std::vector<SimFault>& faults, double after_s);

// After a fault aborted the job: when the scenario restarts (sim.restart.recovery_s), records the
// restart in restarts.json, clears what the relaunch does again and replaces this process by
// the relaunch (never returns). Returns when the scenario does not restart.
void restart_after_fault(const Scenario& scenario, const RunTarget& target,
                         const FaultRecord& fault, bool quiet, const char* argv0);

// In a resumed run: the restarts so far (target.restarts) and, after the last one, the start
// date of every clock (target.plan.start_s) and the failures already come.
void apply_restarts(RunTarget& target);

}  // namespace syncopate::app
