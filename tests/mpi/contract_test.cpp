// The shared Communicator contract (tests/contract/communicator_contract.hpp), on MPI.
#include <gtest/gtest.h>

#include "tests/contract/communicator_contract.hpp"
#include "tests/contract/expect_no_failures.hpp"
#include "tests/mpi/mpi_test_env.hpp"

namespace syncopate::mpi::testing {
namespace {

using contract::expect_no_failures;

TEST(MpiContract, WorldCommunicatorHoldsTheContract) {
  expect_no_failures(contract::check_communicator_contract(world()));
}

TEST(MpiContract, SplitGroupsHoldTheContract) {
  // Two groups of different sizes when the world is odd; key reverses the rank order.
  std::unique_ptr<Communicator> group = world().split(world().rank() % 2, -world().rank());
  expect_no_failures(contract::check_communicator_contract(*group));
}

}  // namespace
}  // namespace syncopate::mpi::testing
