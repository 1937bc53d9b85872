// The Communicator contract (tests/contract) on the in-process backend, bare and behind the
// decorators that every worker sees (TimedCommunicator, FakeCommunicator without faults).
#include <gtest/gtest.h>

#include "core/comm/fake_comm.hpp"
#include "core/comm/local_backend.hpp"
#include "core/comm/timed_comm.hpp"
#include "tests/contract/communicator_contract.hpp"
#include "tests/contract/expect_no_failures.hpp"

namespace syncopate {
namespace {

using contract::expect_no_failures;

TEST(LocalContract, LocalCommunicatorHoldsTheContract) {
  LocalCommunicator comm;
  expect_no_failures(contract::check_communicator_contract(comm));
}

TEST(LocalContract, DecoratorsHoldTheContract) {
  LocalCommunicator local;
  ManualClockExecutor exec;
  FakeCommunicator fake(local, exec, {});
  PhaseTimes times;
  TimedCommunicator comm(fake, exec, times);
  expect_no_failures(contract::check_communicator_contract(comm));
}

}  // namespace
}  // namespace syncopate
