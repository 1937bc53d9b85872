#pragma once
// The backends' entry points for `syncopate run`: each trains every worker it owns and returns
// the reports of all workers (the MPI backend returns them on rank 0 only).
#include <memory>
#include <vector>

#include "app/run_dir.hpp"
#include "core/base/check.hpp"
#include "core/nn/accelerator.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/progress.hpp"
#include "core/train/recorder.hpp"

namespace syncopate::app {

// A bad command line (an unknown value in a list, an empty grid, a directory that holds no
// sweep): the program prints the message and exits with 2.
class UsageError : public UserError {
 public:
  using UserError::UserError;
};

struct RunResult {
  std::vector<WorkerReport> reports;
  RunInfo info;
  bool writes_output = true;  // false on MPI ranks other than 0
  int exit_code = 0;
  bool interrupted = false;  // stopped before the last epoch (see RunTarget)
};

// The accelerator the scenario's model.device asks for (none for "cpu"). The simulator ignores
// it: there the host profile decides how long compute takes.
AcceleratorFactory accelerator_for(const Scenario& scenario);

// The MPI backend's device set-up for one rank (local_rank: its index among the ranks of its
// node). With model.device = "cuda" it selects the rank's GPU (local_rank modulo the devices).
// With mpi.transport = "nccl" or "nccl_native" it returns an NCCL communicator over `world`
// (collective), which then takes the GPU that NCCL needs; null means: train on `world`.
// Throws UserError naming the key when the build or the machine cannot do what is asked.
std::unique_ptr<Communicator> mpi_device_setup(const Scenario& scenario, Communicator& world,
                                               int local_rank, double watchdog_seconds);

// `progress` is called after every step of worker 0 (on MPI: in rank 0's process). `target`
// says where checkpoints go (on MPI rank 0 chooses the directory when it is not chosen yet).
RunResult run_local(const Scenario& scenario, const ProgressFn& progress, RunTarget& target);
RunResult run_sim(const Scenario& scenario, const ProgressFn& progress, RunTarget& target);
RunResult run_mpi(const Scenario& scenario, int* argc, char*** argv, const ProgressFn& progress,
                  RunTarget& target);

}  // namespace syncopate::app
