// FakeCommunicator and TimedCommunicator: planned failures and delays surface as the contract's
// typed errors, timeouts end waits, and a Work's destructor neither blocks nor hides an error.
#include "core/comm/fake_comm.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/comm/local_backend.hpp"
#include "core/comm/timed_comm.hpp"

namespace syncopate {
namespace {

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(FakeCommunicator, FailsExactlyTheNthCallOfItsKind) {
  ManualClockExecutor exec;
  FakeCommunicator comm(exec, {{.kind = CallKind::kAllreduce, .nth = 2}});
  std::vector<float> data{1, 2, 3};
  comm.allreduce(data);
  comm.broadcast(data, 0);  // other kinds do not count
  EXPECT_THROW(comm.allreduce(data), PeerFailure);
  comm.allreduce(data);  // only the 2nd
  EXPECT_EQ(comm.calls(CallKind::kAllreduce), 3);
  EXPECT_EQ(comm.calls(CallKind::kWait), 2);  // the failed issue returned no Work
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(message_of([&] { FakeCommunicator(exec, {{.kind = CallKind::kSend}}).send(data, 1); }),
            "fake: send call #1 on rank 0: injected peer failure");
}

TEST(FakeCommunicator, DelaysAdvanceTheClockAndTimeoutsEndThem) {
  ManualClockExecutor exec;
  FakeCommunicator comm(exec, {{.kind = CallKind::kBarrier, .nth = 2, .delay_s = 3}});
  comm.barrier();
  EXPECT_EQ(exec.now(), 0.0);
  comm.barrier();
  EXPECT_EQ(exec.now(), 3.0);
  comm.set_default_timeout(2);
  EXPECT_THROW(comm.barrier(), PeerTimeout);
  EXPECT_EQ(exec.now(), 5.0) << "a timed-out call lasts its timeout";
  comm.set_default_timeout(kNoTimeout);
  comm.barrier();
  EXPECT_EQ(exec.now(), 8.0);

  // A collective's own timeout wins over the default.
  FakeCommunicator slow(exec, {{.kind = CallKind::kAllreduce, .nth = 1, .delay_s = 10}});
  slow.set_default_timeout(60);
  std::vector<float> data(4);
  const std::string text = message_of([&] { slow.allreduce(data, {.timeout_s = 1}); });
  EXPECT_EQ(text, "fake: allreduce call #1 on rank 0: delayed 10 s, more than its timeout of 1 s");
  EXPECT_EQ(exec.now(), 9.0);
}

TEST(FakeCommunicator, SharedModelMergesAreCountedAndFail) {
  ManualClockExecutor exec;
  FakeCommunicator comm(exec, {{.kind = CallKind::kMerge, .nth = 2}});
  std::vector<float> local{2, 4};
  const std::unique_ptr<SharedModel> model =
      comm.create_shared_model(std::vector<float>{0, 0}, GlobalModelPlacement::kMaster);
  model->merge(local, {});
  EXPECT_EQ(local, (std::vector<float>{1, 2}));
  EXPECT_THROW(model->merge(local, {}), PeerFailure);
  EXPECT_EQ(comm.calls(CallKind::kMerge), 2);
  EXPECT_EQ(comm.calls(CallKind::kCreateSharedModel), 1);
}

TEST(TimedCommunicator, DelaysCountAsCommAndBarriersAsIdle) {
  ManualClockExecutor exec;
  FakeCommunicator fake(exec, {{.kind = CallKind::kWait, .nth = 1, .delay_s = 0.5},
                               {.kind = CallKind::kBarrier, .nth = 1, .delay_s = 2},
                               {.kind = CallKind::kMerge, .nth = 1, .delay_s = 0.25}});
  PhaseTimes times;
  TimedCommunicator comm(fake, exec, times);
  std::vector<float> data(8);
  comm.allreduce(data);
  comm.allreduce(data);
  comm.barrier();
  const std::unique_ptr<SharedModel> model =
      comm.create_shared_model(data, GlobalModelPlacement::kMaster);
  model->merge(data, {});
  EXPECT_EQ(times.comm_s, 1.25);
  EXPECT_EQ(times.idle_s, 2.0);
}

// comm_total_s is the union of the operations' in-flight intervals whatever order they are
// waited in: A [0, 4] waited after B [1, 3] gives 4 s, not 2 + 1; blocking calls and later
// operations add what they do not overlap.
TEST(TimedCommunicator, InFlightTimeIsTheUnionWhateverTheWaitOrder) {
  ManualClockExecutor exec;
  FakeCommunicator fake(exec, {{.kind = CallKind::kBarrier, .nth = 1, .delay_s = 1}});
  PhaseTimes times;
  TimedCommunicator comm(fake, exec, times);
  std::vector<float> a(8), b(8);
  WorkPtr first = comm.allreduce_async(a, {});  // t = 0
  exec.advance(1);
  WorkPtr second = comm.allreduce_async(b, {});  // t = 1
  exec.advance(2);
  second->wait();  // [1, 3]
  EXPECT_EQ(times.comm_total_s, 2.0);
  exec.advance(1);
  first->wait();  // [0, 4]
  EXPECT_EQ(times.comm_total_s, 4.0);
  WorkPtr third = comm.allreduce_async(a, {});  // t = 4
  exec.advance(2);
  std::unique_ptr<SharedModel> model = comm.create_shared_model(a, GlobalModelPlacement::kMaster);
  exec.advance(1);
  third->wait();  // [4, 7]
  EXPECT_EQ(times.comm_total_s, 7.0);
  exec.advance(1);
  comm.barrier();  // idle, not in flight
  EXPECT_EQ(times.comm_total_s, 7.0);
  EXPECT_EQ(times.idle_s, 1.0);
  EXPECT_EQ(times.comm_s, 0.0);
}

// Destroying an un-waited Work waits for it; an error of that wait reaches the caller through
// the communicator's next call instead of vanishing.
TEST(TimedCommunicator, ErrorOfAnUnwaitedWorkIsRethrownByTheNextCall) {
  ManualClockExecutor exec;
  FakeCommunicator fake(exec, {{.kind = CallKind::kWait, .nth = 1}});
  PhaseTimes times;
  TimedCommunicator comm(fake, exec, times);
  std::vector<float> data(4);
  { WorkPtr dropped = comm.allreduce_async(data, {}); }
  EXPECT_EQ(fake.calls(CallKind::kWait), 1);
  EXPECT_EQ(message_of([&] { comm.barrier(); }),
            "fake: wait call #1 on rank 0: injected peer failure");
  EXPECT_EQ(fake.calls(CallKind::kBarrier), 0) << "the kept error is thrown before the call";
  comm.barrier();  // thrown once
  EXPECT_EQ(fake.calls(CallKind::kBarrier), 1);
}

// While an exception unwinds the stack, a Work's destructor must not wait (it could block on a
// peer that never comes) and must not catch anything.
TEST(TimedCommunicator, WorkDestroyedWhileUnwindingDoesNotWait) {
  ManualClockExecutor exec;
  FakeCommunicator fake(exec, {{.kind = CallKind::kWait, .nth = 1, .delay_s = 100}});
  PhaseTimes times;
  TimedCommunicator comm(fake, exec, times);
  std::vector<float> data(4);
  const std::string text = message_of([&] {
    WorkPtr in_flight = comm.allreduce_async(data, {});
    throw std::runtime_error("the worker failed");
  });
  EXPECT_EQ(text, "the worker failed");
  EXPECT_EQ(fake.calls(CallKind::kWait), 0);
  EXPECT_EQ(exec.now(), 0.0);
  comm.barrier();  // nothing was kept
}

}  // namespace
}  // namespace syncopate
