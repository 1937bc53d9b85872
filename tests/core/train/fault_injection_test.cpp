// The Trainer's and the strategies' error paths, driven by FakeCommunicator: a failing or
// timed-out communication call ends train_worker with that error (typed, with its message),
// at once (no further call of the kind, no hang), and delays show up as communication time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/comm/fake_comm.hpp"
#include "core/train/trainer.hpp"
#include "tests/common/serial_defaults.hpp"

namespace syncopate {
namespace {

Scenario fault_scenario(const std::vector<std::string>& extra) {
  std::vector<std::string> sets = {"data.dataset=synthetic", "data.train_samples=256",
                                   "data.test_samples=64",   "epochs=2",
                                   "batch_size=32",          "schedule.kind=constant"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return parse_scenario(default_scenario_text(), "<test>", serial_defaults(sets));
}

struct FaultCase {
  std::string strategy;  // strategy.name and extra settings
  std::vector<std::string> extra;
  CallKind kind;
  int64_t nth;
};

std::string name_of(const FaultCase& c) {
  return c.strategy + " / " + std::string(to_string(c.kind)) + " #" + std::to_string(c.nth);
}

TEST(FaultInjection, EveryStrategyStopsAtTheFailedCallWithItsError) {
  const std::vector<FaultCase> cases = {
      {"ddp", {}, CallKind::kAllreduce, 1},
      {"ddp", {}, CallKind::kWait, 3},
      {"epoch_sync", {}, CallKind::kAllreduce, 1},
      {"epoch_async", {}, CallKind::kCreateSharedModel, 1},
      {"epoch_async", {}, CallKind::kMerge, 2},
      {"local_sgd", {"strategy.every=4"}, CallKind::kAllreduce, 2},
      {"diloco", {"strategy.every=4", "strategy.fragments=2"}, CallKind::kAllreduce, 3},
      {"hierarchical", {}, CallKind::kSplit, 1},
      {"hierarchical", {}, CallKind::kAllgather, 1},
      {"hierarchical", {}, CallKind::kAllreduce, 1},
  };
  for (const FaultCase& c : cases) {
    std::vector<std::string> sets = c.extra;
    sets.push_back("strategy.name=" + c.strategy);
    const Scenario s = fault_scenario(sets);
    const TrainData data = prepare_data(s, false);
    ManualClockExecutor exec(1e-3);
    FakeCommunicator comm(exec, {{.kind = c.kind, .nth = c.nth}});
    std::string text = "(no error)";
    try {
      train_worker(s, data, comm, exec);
    } catch (const PeerFailure& e) {
      text = e.what();
    }
    EXPECT_EQ(text, "fake: " + std::string(to_string(c.kind)) + " call #" + std::to_string(c.nth) +
                        " on rank 0: injected peer failure")
        << name_of(c);
    EXPECT_EQ(comm.calls(c.kind), c.nth) << name_of(c) << ": called again after the failure";
  }
}

// ddp: when one bucket's wait fails, the buckets still in flight are destroyed while the error
// unwinds; their destructors must not wait (a real peer would never come).
TEST(FaultInjection, DdpAbandonsTheOtherBucketsWithoutWaiting) {
  const Scenario s = fault_scenario({"strategy.name=ddp", "strategy.bucket_mb=0.001"});
  const TrainData data = prepare_data(s, false);
  ManualClockExecutor exec(1e-3);
  FakeCommunicator comm(exec, {{.kind = CallKind::kWait, .nth = 1}});
  EXPECT_THROW(train_worker(s, data, comm, exec), PeerFailure);
  ASSERT_GT(comm.calls(CallKind::kAllreduce), 1) << "the test needs several buckets in flight";
  EXPECT_EQ(comm.calls(CallKind::kWait), 1);
}

TEST(FaultInjection, TimeoutEndsTrainingAfterTheTimeoutNotTheDelay) {
  const Scenario s = fault_scenario({"strategy.name=epoch_sync"});
  const TrainData data = prepare_data(s, false);
  ManualClockExecutor exec(0);
  FakeCommunicator comm(exec, {{.kind = CallKind::kAllreduce, .nth = 1, .delay_s = 1000}});
  comm.set_default_timeout(30);
  EXPECT_THROW(train_worker(s, data, comm, exec), PeerTimeout);
  EXPECT_EQ(exec.now(), 30.0);
}

TEST(FaultInjection, DelaysAreReportedAsCommunicationTime) {
  const Scenario s = fault_scenario({"strategy.name=epoch_async"});
  const TrainData data = prepare_data(s, false);
  ManualClockExecutor exec(0);
  FakeCommunicator comm(exec, {{.kind = CallKind::kMerge, .nth = 1, .delay_s = 2}});
  const WorkerReport report = train_worker(s, data, comm, exec);
  ASSERT_EQ(report.epochs.size(), 2u);
  for (const EpochMetrics& e : report.epochs) EXPECT_EQ(e.comm_s, 2.0) << "epoch " << e.epoch;
  EXPECT_EQ(comm.calls(CallKind::kMerge), 2);
}

}  // namespace
}  // namespace syncopate
