// The settings every test here runs under, whether ctest starts the binary or a person does
// (ctest's ENVIRONMENT property cannot carry them: gtest_discover_tests hands a list-valued
// property on as separate arguments, and only its first item arrived). A setting already in
// the environment wins.
#include <gtest/gtest.h>

#include <cstdlib>

namespace environment {
namespace {

class CrossEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    // One thread per process: the tests start several ranks on a machine of few cores.
    setenv("OMP_NUM_THREADS", "1", 0);
    // Waiting ranks yield their core (Open MPI spins unless it knows it is oversubscribed, and
    // the ranks of tests run side by side outnumber the cores without its knowing).
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    // More ranks than cores.
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
    // A rank whose peer died or hangs gives up after a minute, not ten.
    setenv("SYNCOPATE_MPI_WATCHDOG_S", "60", 0);
  }
};

[[maybe_unused]] const ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new CrossEnvironment);

}  // namespace
}  // namespace environment
