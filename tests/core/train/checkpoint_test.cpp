// Checkpoint files: what is written reads back bit for bit, the resume set is the latest epoch
// that every worker reached, and the simulator's set file is only ever a complete set.
#include "core/train/checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "tests/common/scratch.hpp"

namespace syncopate {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = scratch_folder("ckpt") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Scenario two_workers(uint64_t seed = 42) {
  return parse_scenario(default_scenario_text(), "<test>",
                        {"workers=2", "seed=" + std::to_string(seed)});
}

WorkerCheckpoint checkpoint_of(int worker, int next_epoch) {
  WorkerCheckpoint c;
  c.worker = worker;
  c.workers = 2;
  c.next_epoch = next_epoch;
  c.global_step = 1234567890123;
  c.optimizer_steps = 17;
  c.clock = {0.1 + next_epoch, 3};
  c.phases = {.compute_s = 1.0 / 3, .comm_s = 2e-9, .idle_s = 0, .comm_total_s = 5};
  c.params = {1.5f, -0.0f, std::numeric_limits<float>::denorm_min(), 3e38f};
  c.optimizer_state = {0.25f, 0.5f};
  c.strategy_state = std::string("\0\1\2", 3);
  c.report = "R 0 -1 0 5\n";
  return c;
}

TEST(Checkpoint, ReadsBackWhatWasWritten) {
  const Scenario s = two_workers();
  const std::string path = checkpoint_path(scratch("roundtrip").string(), 1);
  const WorkerCheckpoint c = checkpoint_of(1, 3);
  write_checkpoint(path, s, c);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const WorkerCheckpoint r = read_checkpoint(path, s);
  EXPECT_EQ(r.worker, 1);
  EXPECT_EQ(r.next_epoch, 3);
  EXPECT_EQ(r.global_step, c.global_step);
  EXPECT_EQ(r.optimizer_steps, 17);
  EXPECT_EQ(r.clock, c.clock);
  EXPECT_EQ(r.phases.compute_s, c.phases.compute_s);
  EXPECT_EQ(r.phases.comm_s, c.phases.comm_s);
  EXPECT_EQ(0, std::memcmp(r.params.data(), c.params.data(), c.params.size() * sizeof(float)));
  EXPECT_EQ(r.optimizer_state, c.optimizer_state);
  EXPECT_EQ(r.strategy_state, c.strategy_state);
  EXPECT_EQ(r.report, c.report);
}

TEST(Checkpoint, RefusesAnotherScenario) {
  const std::string path = checkpoint_path(scratch("foreign").string(), 0);
  write_checkpoint(path, two_workers(1), checkpoint_of(0, 1));
  EXPECT_THROW(read_checkpoint(path, two_workers(2)), UserError);
}

TEST(Checkpoint, ResumeSetIsTheLatestEpochEveryWorkerReached) {
  const Scenario s = two_workers();
  const std::string dir = scratch("set").string();
  for (int epoch = 1; epoch <= 3; ++epoch) write_worker_checkpoint(dir, s, checkpoint_of(0, epoch));
  for (int epoch = 1; epoch <= 2; ++epoch) write_worker_checkpoint(dir, s, checkpoint_of(1, epoch));
  // Worker 0 holds epochs 3 and 2, worker 1 holds 2 and 1: both resume after epoch 2.
  const std::vector<WorkerCheckpoint> set = read_resume_set(dir, s);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set[0].next_epoch, 2);
  EXPECT_EQ(set[1].next_epoch, 2);
  EXPECT_EQ(set[1].worker, 1);
}

TEST(Checkpoint, RefusesWorkersMoreThanOneCheckpointApart) {
  const Scenario s = two_workers();
  const std::string dir = scratch("apart").string();
  for (int epoch = 1; epoch <= 4; ++epoch) write_worker_checkpoint(dir, s, checkpoint_of(0, epoch));
  write_worker_checkpoint(dir, s, checkpoint_of(1, 2));
  try {
    read_resume_set(dir, s);
    FAIL() << "resumed from checkpoints two epochs apart";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no checkpoint after epoch 2"), std::string::npos)
        << e.what();
  }
}

// The simulator's set file: a point's checkpoints are on disk only once every worker's came, a
// later point replaces the earlier, and the points may be open at once.
TEST(CheckpointSet, AppearsWhenItsLastWorkerArrivesAndALaterOneReplacesIt) {
  const Scenario s = two_workers();
  const std::string dir = scratch("shared").string();
  const std::string path = checkpoint_set_path(dir);
  {
    SharedCheckpoints sets(dir);
    sets.add(s, checkpoint_of(1, 1));
    EXPECT_FALSE(fs::exists(path));
    sets.add(s, checkpoint_of(1, 2));  // worker 1 is ahead (an asynchronous strategy)
    sets.add(s, checkpoint_of(0, 1));
    std::vector<WorkerCheckpoint> set = read_checkpoint_set(path, s);
    ASSERT_EQ(set.size(), 2u);
    EXPECT_EQ(set[0].worker, 0);  // by worker, whatever the order of arrival
    EXPECT_EQ(set[1].worker, 1);
    EXPECT_EQ(set[1].next_epoch, 1);
    EXPECT_EQ(set[1].params, checkpoint_of(1, 1).params);
    sets.add(s, checkpoint_of(0, 2));
    set = read_resume_set(dir, s);
    EXPECT_EQ(set[0].next_epoch, 2);
    EXPECT_EQ(set[1].next_epoch, 2);
    sets.add(s, checkpoint_of(0, 3));  // worker 1 never comes: the set of epoch 2 stands
    EXPECT_EQ(read_resume_set(dir, s)[0].next_epoch, 2);
  }
  // The unfinished point's temporary file went with its writer.
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    ++files;
  EXPECT_EQ(files, 1u);
}

TEST(CheckpointSet, RefusesASetThatIsNotOne) {
  const Scenario s = two_workers();
  const std::string dir = scratch("not-one").string();
  write_checkpoint_set(dir, s, {checkpoint_of(0, 2), checkpoint_of(0, 2)});
  try {
    read_resume_set(dir, s);
    FAIL() << "resumed from a set holding worker 0 twice";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("workers.ckpt: not one checkpoint set"), std::string::npos)
        << e.what();
  }
  write_checkpoint_set(dir, s, {checkpoint_of(0, 2)});
  EXPECT_THROW(read_resume_set(dir, s), UserError);  // incomplete: 1 of 2 workers
}

// A run that moved between backends has both kinds: the later point wins, the set on a tie.
TEST(CheckpointSet, ResumeTakesTheLaterOfTheSetAndTheWorkersFiles) {
  const Scenario s = two_workers();
  const std::string dir = scratch("both").string();
  write_checkpoint_set(dir, s, {checkpoint_of(0, 2), checkpoint_of(1, 2)});
  for (int w = 0; w < 2; ++w) {
    WorkerCheckpoint c = checkpoint_of(w, 2);
    c.optimizer_steps = 99;
    write_worker_checkpoint(dir, s, c);
  }
  EXPECT_EQ(read_resume_set(dir, s)[1].optimizer_steps, 17);  // the tie: the set
  for (int w = 0; w < 2; ++w) write_worker_checkpoint(dir, s, checkpoint_of(w, 3));
  EXPECT_EQ(read_resume_set(dir, s)[1].next_epoch, 3);
}

// Every worker of a resumed run gets the set read once; it is dropped after the last.
TEST(CheckpointSet, ResumeReadsTheSetOnceForAllWorkers) {
  const Scenario s = two_workers();
  const std::string dir = scratch("once").string();
  write_checkpoint_set(dir, s, {checkpoint_of(0, 2), checkpoint_of(1, 2)});
  SharedCheckpoints sets(dir);
  const auto first = sets.resume_set(s);
  fs::remove(checkpoint_set_path(dir));
  const auto second = sets.resume_set(s);  // not read again
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(second->size(), 2u);
  EXPECT_THROW(sets.resume_set(s), UserError);  // dropped after two: read again, and gone
}

}  // namespace
}  // namespace syncopate
