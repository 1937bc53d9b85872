// checkpoint.every_steps: the scenario refuses what a mid-epoch checkpoint cannot restore (naming
// file:line:key), and the resume set is the latest point inside an epoch that every worker reached.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/train/checkpoint.hpp"
#include "tests/common/scenario_error.hpp"
#include "tests/common/scratch.hpp"

namespace syncopate {
namespace {

namespace fs = std::filesystem;

TEST(MidEpochCheckpoint, TheScenarioRefusesWhatItCannotRestore) {
  const std::string ddp = "workers = 2\n[strategy]\nname = \"ddp\"\n[checkpoint]\n";
  EXPECT_EQ(scenario_error(ddp + "every_steps = 5\n"), "");
  EXPECT_EQ(scenario_error(ddp + "every = 1\nevery_steps = 5\n"), "");
  EXPECT_NE(scenario_error(ddp + "every_steps = -1\n").find("exp.toml:5: checkpoint.every_steps"),
            std::string::npos)
      << scenario_error(ddp + "every_steps = -1\n");
  const std::string both = scenario_error(ddp + "every = 2\nevery_steps = 5\n");
  EXPECT_NE(both.find("exp.toml:6: checkpoint.every_steps: checkpoint.every = 2 asks"),
            std::string::npos)
      << both;
  const std::string async =
      scenario_error("[strategy]\nname = \"epoch_async\"\n[checkpoint]\nevery_steps = 3\n");
  EXPECT_NE(async.find("exp.toml:4: checkpoint.every_steps: epoch_async's global model"),
            std::string::npos)
      << async;
  const std::string blocks =
      scenario_error("[strategy]\nname = \"epoch_sync\"\n[checkpoint]\nevery_steps = 3\n");
  EXPECT_NE(blocks.find("checkpoint.every_steps: in the block order"), std::string::npos) << blocks;
  EXPECT_EQ(scenario_error("[data]\norder = \"global\"\n[strategy]\nname = \"epoch_sync\"\n"
                           "[checkpoint]\nevery_steps = 3\n"),
            "");
  EXPECT_NE(scenario_error("backend = \"sim\"\n[sim]\nmode = \"cost_only\"\n[checkpoint]\n"
                           "every_steps = 3\n")
                .find("cost-only fast-forward skips steps"),
            std::string::npos);
}

WorkerCheckpoint at(int worker, int epoch, int64_t step) {
  WorkerCheckpoint c;
  c.worker = worker;
  c.workers = 2;
  c.next_epoch = epoch;
  c.next_step = step;
  c.clock = {1.0};
  c.epoch_state = "meters";
  return c;
}

// Worker 0 wrote epoch 1's checkpoints after steps 4 and 8, worker 1 only after step 4.
TEST(MidEpochCheckpoint, ResumeSetIsTheLatestStepEveryWorkerReached) {
  const Scenario s = parse_scenario(default_scenario_text(), "<test>", {"workers=2"});
  const fs::path dir = scratch_folder("mid-epoch") / "set";
  fs::remove_all(dir);
  write_worker_checkpoint(dir.string(), s, at(0, 1, 4));
  write_worker_checkpoint(dir.string(), s, at(0, 1, 8));
  write_worker_checkpoint(dir.string(), s, at(1, 1, 0));
  write_worker_checkpoint(dir.string(), s, at(1, 1, 4));
  const std::vector<WorkerCheckpoint> set = read_resume_set(dir.string(), s);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set[0].next_step, 4);
  EXPECT_EQ(set[1].next_step, 4);
  EXPECT_EQ(set[1].epoch_state, "meters");
}

}  // namespace
}  // namespace syncopate
