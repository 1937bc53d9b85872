#pragma once
// The backends' entry points for `syncopate run`: each trains every worker it owns and returns
// the reports of all workers (the MPI backend returns them on rank 0 only).
#include <vector>

#include "core/accelerator.hpp"
#include "core/recorder.hpp"
#include "core/scenario.hpp"

namespace syncopate::app {

struct RunResult {
  std::vector<WorkerReport> reports;
  RunInfo info;
  bool writes_output = true;  // false on MPI ranks other than 0
  int exit_code = 0;
};

// The accelerator the scenario's model.device asks for (none for "cpu"). The simulator ignores
// it: there the host profile decides how long compute takes.
AcceleratorFactory accelerator_for(const Scenario& scenario);

RunResult run_local(const Scenario& scenario);
RunResult run_sim(const Scenario& scenario);
RunResult run_mpi(const Scenario& scenario, int* argc, char*** argv);

}  // namespace syncopate::app
