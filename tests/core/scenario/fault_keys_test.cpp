// [[sim.faults]]: every kind read, written back and reloaded; every refusal names file:line:key.
#include <gtest/gtest.h>

#include "core/base/check.hpp"
#include "core/scenario/scenario.hpp"

namespace syncopate {
namespace {

const char* kHead = "backend = \"sim\"\nworkers = 4\n";

Scenario parse_faults(const std::string& faults) {
  return parse_scenario(std::string(kHead) + faults, "exp.toml");
}

std::string faults_error(const std::string& faults) {
  try {
    parse_faults(faults);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

const char* kAllKinds =
    "[[sim.faults]]\nkind = \"host_failure\"\nworker = 3\nat_s = 12.5\n"
    "[[sim.faults]]\nkind = \"link_failure\"\nlink = \"nic1\"\nfrom_s = 1\nuntil_s = 2\n"
    "[[sim.faults]]\nkind = \"link_degradation\"\nworker = 2\nfrom_s = 0\nuntil_s = 4\n"
    "factor = 0.25\n"
    "[[sim.faults]]\nkind = \"straggler\"\nworker = 1\nfrom_s = 3\nuntil_s = 9\nfactor = 0.5\n";

TEST(SimFaults, EveryKindIsReadWithItsParameters) {
  const Scenario s = parse_faults(kAllKinds);
  ASSERT_EQ(s.sim.faults.size(), 4u);
  EXPECT_EQ(s.sim.faults[0].kind, FaultKind::kHostFailure);
  EXPECT_EQ(s.sim.faults[0].worker, 3);
  EXPECT_DOUBLE_EQ(s.sim.faults[0].at_s, 12.5);
  EXPECT_EQ(s.sim.faults[0].where, "exp.toml:3: sim.faults[0]");
  EXPECT_EQ(s.sim.faults[1].kind, FaultKind::kLinkFailure);
  EXPECT_EQ(s.sim.faults[1].link, "nic1");
  EXPECT_EQ(s.sim.faults[1].worker, -1);
  EXPECT_DOUBLE_EQ(s.sim.faults[1].until_s, 2);
  EXPECT_EQ(s.sim.faults[2].kind, FaultKind::kLinkDegradation);
  EXPECT_EQ(s.sim.faults[2].worker, 2);
  EXPECT_DOUBLE_EQ(s.sim.faults[2].factor, 0.25);
  EXPECT_EQ(s.sim.faults[3].kind, FaultKind::kStraggler);
  EXPECT_DOUBLE_EQ(s.sim.faults[3].from_s, 3);
  EXPECT_DOUBLE_EQ(s.sim.faults[3].factor, 0.5);
}

TEST(SimFaults, ResolvedScenarioLoadsBackToTheSame) {
  const Scenario s = parse_faults(kAllKinds);
  EXPECT_NE(s.resolved_toml.find("link_degradation"), std::string::npos) << s.resolved_toml;
  const Scenario again = parse_scenario(s.resolved_toml, "resolved.toml");
  EXPECT_EQ(again.resolved_toml, s.resolved_toml);
  ASSERT_EQ(again.sim.faults.size(), 4u);
  EXPECT_EQ(again.sim.faults[1].link, "nic1");
  EXPECT_DOUBLE_EQ(again.sim.faults[3].until_s, 9);
}

TEST(SimFaults, RefusalsNameFileLineAndKey) {
  struct Case {
    std::string faults, expect;
  };
  const std::vector<Case> cases = {
      {"[[sim.faults]]\nkind = \"meteor\"\nworker = 0\n",
       "exp.toml:4: sim.faults[0].kind: unknown fault kind 'meteor'; allowed: host_failure"},
      {"[[sim.faults]]\nkind = \"host_failure\"\nworker = 4\nat_s = 1\n",
       "exp.toml:5: sim.faults[0].worker: 4 does not exist; allowed: 0..3"},
      {"[[sim.faults]]\nkind = \"host_failure\"\nworker = -1\nat_s = 1\n",
       "exp.toml:5: sim.faults[0].worker: -1 does not exist"},
      {"[[sim.faults]]\nkind = \"straggler\"\nworker = 0\nfrom_s = 5\nuntil_s = 5\nfactor = 2\n",
       "exp.toml:7: sim.faults[0].until_s: the interval [5.000000, 5.000000) is empty"},
      {"[[sim.faults]]\nkind = \"straggler\"\nworker = 0\nfrom_s = 1\nuntil_s = 5\nfactor = 0\n",
       "exp.toml:8: sim.faults[0].factor: 0.000000; allowed: a finite factor > 0"},
      {"[[sim.faults]]\nkind = \"link_degradation\"\nworker = 0\nfrom_s = 1\nuntil_s = 5\n"
       "factor = inf\n",
       "exp.toml:8: sim.faults[0].factor: inf; allowed: a finite factor > 0"},
      {"[[sim.faults]]\nkind = \"link_degradation\"\nworker = 0\nfrom_s = 1\nuntil_s = 5\n"
       "factor = -0.5\n",
       "sim.faults[0].factor: -0.500000; allowed"},
      {"[[sim.faults]]\nkind = \"host_failure\"\nworker = 0\nat_s = nan\n",
       "exp.toml:6: sim.faults[0].at_s: nan; allowed: finite simulated seconds >= 0"},
      {"[[sim.faults]]\nkind = \"host_failure\"\nworker = 0\n",
       "exp.toml:3: sim.faults[0]: required parameter at_s is missing"},
      {"[[sim.faults]]\nkind = \"host_failure\"\nworker = 0\nat_s = 1\nfactor = 2\n",
       "exp.toml:7: sim.faults[0].factor: unknown parameter; host_failure takes worker, at_s"},
      {"[[sim.faults]]\nkind = \"link_failure\"\nworker = 0\nlink = \"x\"\nfrom_s = 0\n"
       "until_s = 1\n",
       "exp.toml:3: sim.faults[0]: a link fault names one link: worker = N (its NIC) or link"},
      {"[[sim.faults]]\nkind = \"link_failure\"\nlink = 3\nfrom_s = 0\nuntil_s = 1\n",
       "exp.toml:5: sim.faults[0].link: expected a link name of the platform"},
      {"[[sim.faults]]\nworker = 0\n", "exp.toml:3: sim.faults[0]: expected kind = \"...\""},
      {"sim.faults = 3\n", "sim.faults: expected an array of tables"},
      {"[[sim.faults]]\nkind = \"straggler\"\nworker = 1\nfrom_s = 0\nuntil_s = 5\nfactor = 2\n"
       "[[sim.faults]]\nkind = \"straggler\"\nworker = 1\nfrom_s = 4\nuntil_s = 6\nfactor = 3\n",
       "exp.toml:9: sim.faults[1]: overlaps sim.faults[0], a straggler of the same worker"},
  };
  for (const Case& c : cases) {
    const std::string e = faults_error(c.faults);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.faults << "\n-> " << e;
  }
}

TEST(SimFaults, StragglersOfDifferentWorkersMayOverlap) {
  const Scenario s = parse_faults(
      "[[sim.faults]]\nkind = \"straggler\"\nworker = 1\nfrom_s = 0\nuntil_s = 5\nfactor = 2\n"
      "[[sim.faults]]\nkind = \"straggler\"\nworker = 2\nfrom_s = 4\nuntil_s = 6\nfactor = 3\n");
  EXPECT_EQ(s.sim.faults.size(), 2u);
}

TEST(SimFaults, RefusedOutsideTheSimulator) {
  const std::string text =
      "backend = \"local\"\n[[sim.faults]]\nkind = \"host_failure\"\nworker = 0\nat_s = 1\n";
  std::string e;
  try {
    parse_scenario(text, "exp.toml");
  } catch (const UserError& error) {
    e = error.what();
  }
  EXPECT_NE(e.find("sim.faults"), std::string::npos) << e;
  EXPECT_NE(e.find("read only by backend = \"sim\""), std::string::npos) << e;
}

}  // namespace
}  // namespace syncopate

namespace syncopate {
namespace {

const char* kLoss = "[[sim.faults]]\nkind = \"host_failure\"\nworker = 3\nat_s = 2\n";

TEST(SimFaultBlocks, ReadWhereAWorkerCanBeLostUnderEpochSyncOrAsync) {
  const Scenario redeal = parse_faults("strategy.name = \"epoch_sync\"\n" + std::string(kLoss));
  EXPECT_EQ(redeal.sim.fault_blocks, FaultBlocks::kRedeal) << "the default";
  EXPECT_NE(redeal.resolved_toml.find("fault_blocks = 'redeal'"), std::string::npos)
      << redeal.resolved_toml;
  const Scenario drop = parse_faults(
      "strategy.name = \"epoch_async\"\nsim.fault_blocks = \"drop\"\n" + std::string(kLoss));
  EXPECT_EQ(drop.sim.fault_blocks, FaultBlocks::kDrop);
  EXPECT_EQ(parse_scenario(drop.resolved_toml, "resolved.toml").sim.fault_blocks,
            FaultBlocks::kDrop);
}

TEST(SimFaultBlocks, RefusalsNameFileLineAndKey) {
  const std::string bad = faults_error(
      "strategy.name = \"epoch_sync\"\nsim.fault_blocks = \"keep\"\n" + std::string(kLoss));
  EXPECT_NE(bad.find("exp.toml:4"), std::string::npos) << bad;
  EXPECT_NE(bad.find("sim.fault_blocks"), std::string::npos) << bad;
  EXPECT_NE(bad.find("redeal"), std::string::npos) << bad;
  const std::string ddp =
      faults_error("strategy.name = \"ddp\"\nsim.fault_blocks = \"drop\"\n" + std::string(kLoss));
  EXPECT_NE(ddp.find("sim.fault_blocks"), std::string::npos) << ddp;
  EXPECT_NE(ddp.find("epoch_sync"), std::string::npos) << ddp;
  const std::string no_loss =
      faults_error("strategy.name = \"epoch_sync\"\nsim.fault_blocks = \"drop\"\n");
  EXPECT_NE(no_loss.find("host_failure"), std::string::npos) << no_loss;
}

TEST(SimRestart, RecoveryIsReadWrittenBackAndReloaded) {
  const std::string ddp = "strategy.name = \"ddp\"\ncheckpoint.every = 1\n";
  const Scenario s = parse_faults(ddp + "sim.restart.recovery_s = 30\n" + kLoss);
  EXPECT_EQ(s.sim.restart_recovery_s, 30);
  EXPECT_EQ(parse_scenario(s.resolved_toml, "resolved.toml").sim.restart_recovery_s, 30);
  const Scenario unset = parse_faults(ddp + kLoss);
  EXPECT_LT(unset.sim.restart_recovery_s, 0) << "not set: the job aborts";
  EXPECT_EQ(unset.resolved_toml.find("recovery_s"), std::string::npos) << unset.resolved_toml;
  const Scenario mid = parse_faults(
      "strategy.name = \"zero\"\ncheckpoint.every_steps = 4\nsim.restart.recovery_s = 0\n" +
      std::string(kLoss));
  EXPECT_EQ(mid.sim.restart_recovery_s, 0) << "mid-epoch checkpoints restart too";
  const std::string message = faults_error(
      "strategy.name = \"epoch_sync\"\nsim.fidelity = \"message\"\ncheckpoint.every = 1\n"
      "sim.restart.recovery_s = 5\n" +
      std::string(kLoss));
  EXPECT_NE(message.find("epoch_sync and epoch_async go on without a lost worker"),
            std::string::npos)
      << "elastic at message fidelity too: " << message;
}

TEST(SimRestart, RefusalsNameFileLineAndKey) {
  const std::string ddp = "strategy.name = \"ddp\"\ncheckpoint.every = 1\n";
  const std::string negative = faults_error(ddp + "sim.restart.recovery_s = -1\n" + kLoss);
  EXPECT_NE(negative.find("exp.toml:5: sim.restart.recovery_s"), std::string::npos) << negative;
  const std::string no_checkpoint =
      faults_error("strategy.name = \"ddp\"\nsim.restart.recovery_s = 5\n" + std::string(kLoss));
  EXPECT_NE(no_checkpoint.find("exp.toml:4: sim.restart.recovery_s"), std::string::npos)
      << no_checkpoint;
  EXPECT_NE(no_checkpoint.find("set checkpoint.every"), std::string::npos) << no_checkpoint;
  const std::string elastic = faults_error(
      "strategy.name = \"epoch_sync\"\ncheckpoint.every = 1\nsim.restart.recovery_s = 5\n" +
      std::string(kLoss));
  EXPECT_NE(elastic.find("no abort to restart from"), std::string::npos) << elastic;
  const std::string no_fault = faults_error(ddp + "sim.restart.recovery_s = 5\n");
  EXPECT_NE(no_fault.find("host_failure or link_failure"), std::string::npos) << no_fault;
  std::string local;
  try {
    parse_scenario("backend = \"local\"\ncheckpoint.every = 1\nsim.restart.recovery_s = 5\n",
                   "exp.toml");
  } catch (const UserError& e) {
    local = e.what();
  }
  EXPECT_NE(local.find("exp.toml:3: sim.restart.recovery_s: read only on the simulator"),
            std::string::npos)
      << local;
}

}  // namespace
}  // namespace syncopate
