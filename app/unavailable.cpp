// The entry points of the backends this build leaves out (SYNCOPATE_WITH_SIM / _MPI = OFF): each
// refuses the scenario with a UserError naming its key and the backends this build has.
#include <string>

#include "app/commands.hpp"
#include "core/base/check.hpp"

namespace syncopate::app {

#if !defined(SYNCOPATE_HAVE_SIM) || !defined(SYNCOPATE_HAVE_MPI)
namespace {

[[noreturn]] void not_built(const Scenario& scenario, const std::string& backend,
                            const std::string& option) {
  std::string allowed = "local";
#if defined(SYNCOPATE_HAVE_SIM)
  allowed += ", sim";
#endif
#if defined(SYNCOPATE_HAVE_MPI)
  allowed += ", mpi";
#endif
  throw UserError(scenario.source + ": backend: \"" + backend + "\" is not in this build (" +
                  option + "=OFF when it was configured); allowed here: " + allowed);
}

}  // namespace
#endif

#if !defined(SYNCOPATE_HAVE_SIM)
RunResult run_sim(const Scenario& scenario, const ProgressFn& /*progress*/, RunTarget& /*target*/) {
  not_built(scenario, "sim", "SYNCOPATE_WITH_SIM");
}
#endif

#if !defined(SYNCOPATE_HAVE_MPI)
RunResult run_mpi(const Scenario& scenario, int* /*argc*/, char*** /*argv*/,
                  const ProgressFn& /*progress*/, RunTarget& /*target*/) {
  not_built(scenario, "mpi", "SYNCOPATE_WITH_MPI");
}
#endif

}  // namespace syncopate::app
