// Every [[sim.faults]] kind under ddp, epoch_sync and epoch_async, through the Trainer on the
// simulator: stragglers and degraded links lengthen the run that still completes; a host or
// link failure aborts the job at its date, with the time lost since the start (no checkpoint).
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "backends/sim/sim_backend.hpp"
#include "core/comm/fault_abort.hpp"
#include "core/train/trainer.hpp"
#include "tests/common/serial_defaults.hpp"
#include "tests/sim/fork_util.hpp"

namespace syncopate {
namespace {

Scenario scenario(const std::string& strategy) {
  return parse_scenario(default_scenario_text(), "<test>",
                        serial_defaults({"backend=sim", "workers=8", "strategy.name=" + strategy,
                                         "data.dataset=synthetic", "data.train_samples=1024",
                                         "data.test_samples=64", "epochs=2", "batch_size=16",
                                         "sim.platform=mn5-acc", "sim.platform_params.nodes=2",
                                         "sim.fidelity=flow", "eval_every_epoch=false"}));
}

struct FaultRun {
  bool aborted = false;
  double seconds = -1;  // simulated seconds of a completed run, or the abort's date
  double lost_seconds = -1;
  std::string kind, message;
};

FaultRun simulate(const Scenario& s, const std::vector<SimFault>& faults) {
  const testing::ChildResult child = testing::run_in_child_output([&] {
    sim::SimOptions options;
    options.platform = s.sim.platform;
    options.platform_overrides = s.sim.platform_params;
    options.workers = s.workers;
    options.fidelity = s.sim.fidelity;
    options.faults = faults;
    const TrainData data = prepare_data(s, false);
    char line[128];
    try {
      const sim::SimStats stats = sim::run_simulation(
          options, [&](Communicator& comm, Executor& exec) { train_worker(s, data, comm, exec); });
      std::snprintf(line, sizeof line, "done %a", stats.simulated_seconds);
      return std::string(line);
    } catch (const FaultAbort& e) {
      std::snprintf(line, sizeof line, "aborted %a %a %s ", e.record().at_s,
                    e.record().lost_seconds(), e.record().kind.c_str());
      return std::string(line) + e.what();
    }
  });
  FaultRun run;
  std::istringstream in(child.output);
  std::string state, number;
  in >> state >> number;
  run.seconds = std::strtod(number.c_str(), nullptr);
  run.aborted = state == "aborted";
  if (run.aborted) {
    in >> number >> run.kind;
    run.lost_seconds = std::strtod(number.c_str(), nullptr);
    std::getline(in, run.message);
  }
  if (state != "done" && state != "aborted") run.message = child.output + child.error;
  return run;
}

SimFault fault(FaultKind kind, int worker, double from, double until, double factor) {
  SimFault f;
  f.kind = kind;
  f.worker = worker;
  f.from_s = from;
  f.until_s = until;
  f.factor = factor;
  f.where = "faults.toml:1";
  return f;
}

class FaultStrategies : public ::testing::TestWithParam<const char*> {};

TEST_P(FaultStrategies, StragglerAndDegradedLinkLengthenTheRunThatCompletes) {
  const Scenario s = scenario(GetParam());
  const FaultRun clean = simulate(s, {});
  ASSERT_FALSE(clean.aborted) << clean.message;
  ASSERT_GT(clean.seconds, 0) << clean.message;
  const FaultRun slow = simulate(s, {fault(FaultKind::kStraggler, 5, 0, 1e9, 0.5)});
  ASSERT_FALSE(slow.aborted) << slow.message;
  EXPECT_GT(slow.seconds, clean.seconds * 1.05) << "a worker at half speed";
  const FaultRun narrow = simulate(s, {fault(FaultKind::kLinkDegradation, 0, 0, 1e9, 1e-3)});
  ASSERT_FALSE(narrow.aborted) << narrow.message;
  EXPECT_GT(narrow.seconds, clean.seconds) << "worker 0's NIC at 1/1000 of its bandwidth";
  // A fault after the run ends changes nothing.
  const FaultRun late = simulate(
      s, {fault(FaultKind::kStraggler, 5, 2 * clean.seconds, 3 * clean.seconds, 0.5),
          fault(FaultKind::kLinkDegradation, 0, 2 * clean.seconds, 3 * clean.seconds, 0.5)});
  EXPECT_EQ(late.seconds, clean.seconds) << late.message;
}

TEST_P(FaultStrategies, HostFailureAbortsTheJobAtItsDateWithTheTimeLost) {
  const Scenario s = scenario(GetParam());
  const FaultRun clean = simulate(s, {});
  ASSERT_FALSE(clean.aborted) << clean.message;
  const double at = clean.seconds / 2;
  SimFault host = fault(FaultKind::kHostFailure, 6, 0, 0, 1);
  host.at_s = at;
  const FaultRun crash = simulate(s, {host});
  ASSERT_TRUE(crash.aborted) << crash.message;
  EXPECT_EQ(crash.kind, "host_failure");
  EXPECT_DOUBLE_EQ(crash.seconds, at);
  EXPECT_DOUBLE_EQ(crash.lost_seconds, at);  // no checkpoint: everything since the start
  EXPECT_NE(crash.message.find("worker 6's host"), std::string::npos) << crash.message;
}

TEST_P(FaultStrategies, LinkFailureAbortsTheJobWhenATransferCrossesIt) {
  const Scenario s = scenario(GetParam());
  const FaultRun clean = simulate(s, {});
  ASSERT_FALSE(clean.aborted) << clean.message;
  const FaultRun cut = simulate(s, {fault(FaultKind::kLinkFailure, 0, 0, 10 * clean.seconds, 1)});
  ASSERT_TRUE(cut.aborted) << cut.message;
  EXPECT_EQ(cut.kind, "link_failure");
  EXPECT_GT(cut.seconds, 0);
  EXPECT_LT(cut.seconds, clean.seconds);
  EXPECT_DOUBLE_EQ(cut.lost_seconds, cut.seconds);
  EXPECT_NE(cut.message.find("links down: "), std::string::npos) << cut.message;
}

INSTANTIATE_TEST_SUITE_P(Sim, FaultStrategies,
                         ::testing::Values("ddp", "epoch_sync", "epoch_async"));

}  // namespace
}  // namespace syncopate
