// The Communicator contract on the simulator, at every fidelity, for 1..17 workers placed 4 per
// node (so the hierarchical algorithm runs on whole nodes at 4, 8, 12 and 16 workers and falls
// back to a ring otherwise). Each simulation runs in a forked child.
#include <gtest/gtest.h>

#include <sstream>

#include "backends/sim/sim_backend.hpp"
#include "tests/contract/communicator_contract.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

std::string run_contract(Fidelity fidelity, int workers) {
  const Platform platform = testing::make_test_platform(
      {.gpus = workers, .gpus_per_node = 4, .master = workers % 2 == 0});
  std::vector<std::vector<std::string>> failures(static_cast<size_t>(workers));
  SimOptions options;
  options.workers = workers;
  options.fidelity = fidelity;
  run_on_platform(platform, options, [&](Communicator& comm, Executor&) {
    failures[static_cast<size_t>(comm.rank())] = contract::check_communicator_contract(comm);
  });
  std::ostringstream out;
  for (const auto& rank_failures : failures)
    for (const auto& f : rank_failures) out << f << "\n";
  return out.str();
}

class ContractTest : public ::testing::TestWithParam<Fidelity> {};

TEST_P(ContractTest, EveryCollectiveMatchesSerialReduction) {
  for (int workers = 1; workers <= 17; ++workers) {
    const testing::ChildResult result =
        testing::run_in_child([&] { return run_contract(GetParam(), workers); });
    EXPECT_EQ(result.status, 0) << "workers=" << workers << ": " << result.output;
    EXPECT_EQ(result.output, "") << "workers=" << workers;
  }
}

INSTANTIATE_TEST_SUITE_P(Fidelities, ContractTest, testing::every_fidelity(),
                         testing::FidelityName());

}  // namespace
}  // namespace syncopate::sim
