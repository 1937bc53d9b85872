// Resuming at another worker count: which strategies may, what each new worker starts from, the
// resume set across worker counts, and version 1 checkpoint files still read.
#include "core/train/rescale.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/train/run_files.hpp"
#include "tests/common/scratch.hpp"

namespace syncopate {
namespace {

namespace fs = std::filesystem;

fs::path rescale_dir(const std::string& name) {
  const fs::path dir = scratch_folder("rescale") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Scenario scenario_of(int workers, const std::string& strategy, uint64_t seed = 42) {
  return parse_scenario(default_scenario_text(), "<test>",
                        {"workers=" + std::to_string(workers), "seed=" + std::to_string(seed),
                         "strategy.name=\"" + strategy + "\""});
}

EpochMetrics row(int worker, int epoch) {
  EpochMetrics e;
  e.worker = worker;
  e.epoch = epoch;
  e.train_loss = 0.5 + worker;
  return e;
}

// Worker w of `workers` before epoch 2: parameters {w, 1}, optimizer state {2w}, its own rows.
WorkerCheckpoint worker_checkpoint(int w, int workers) {
  WorkerCheckpoint c;
  c.worker = w;
  c.workers = workers;
  c.next_epoch = 2;
  c.global_step = 100 + w;
  c.optimizer_steps = 10 + w;
  c.clock = {1.0 + 0.25 * w, 7};
  c.params = {static_cast<float>(w), 1.0f};
  c.optimizer_state = {2.0f * static_cast<float>(w)};
  WorkerReport report;
  report.worker = w;
  report.epochs = {row(w, 0), row(w, 1)};
  c.report = serialize_report(report);
  return c;
}

std::vector<WorkerCheckpoint> set_of(int workers) {
  std::vector<WorkerCheckpoint> set;
  for (int w = 0; w < workers; ++w) set.push_back(worker_checkpoint(w, workers));
  return set;
}

TEST(Rescale, OnlyTheWeightAveragingStrategiesResize) {
  for (const char* ok : {"epoch_sync", "epoch_async", "local_sgd"})
    EXPECT_NO_THROW(check_resizable(scenario_of(2, ok), 4)) << ok;
  for (const char* refused : {"ddp", "hierarchical", "diloco", "zero"}) {
    try {
      check_resizable(scenario_of(2, refused), 4);
      ADD_FAILURE() << refused << " resized";
    } catch (const UserError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("<test>: workers: resuming checkpoints of 4 worker(s) at 2"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("only: " + std::string(refused)), std::string::npos) << what;
    }
  }
  EXPECT_NO_THROW(check_resizable(scenario_of(2, "ddp"), 2));  // the same count: no resize
}

TEST(Rescale, MeanIsExactForEqualValuesAndSummedInDoubleOtherwise) {
  const std::vector<float> a = {0.1f, 1e-30f, 3.0f}, b = a;
  const std::vector<float> equal = mean_of({&a, &b, &a});
  EXPECT_EQ(0, std::memcmp(equal.data(), a.data(), a.size() * sizeof(float)));
  const std::vector<float> c = {1.0f, 16777216.0f}, d = {2.0f, 1.0f}, e = {0.0f, 1.0f};
  const std::vector<float> mean = mean_of({&c, &d, &e});
  EXPECT_EQ(mean[0], 1.0f);
  EXPECT_EQ(mean[1], static_cast<float>((16777216.0 + 2.0) / 3.0));
}

TEST(Rescale, ShrinkingAveragesTheReplicasAndKeepsTheGoneWorkersRows) {
  const Scenario s = scenario_of(2, "epoch_sync");
  const std::vector<WorkerCheckpoint> set = set_of(4);
  const WorkerCheckpoint zero = resized_checkpoint(set, s, 0);
  EXPECT_EQ(zero.workers, 2);
  EXPECT_EQ(zero.next_epoch, 2);
  EXPECT_EQ(zero.params, (std::vector<float>{1.5f, 1.0f}));  // (0 + 1 + 2 + 3) / 4
  EXPECT_EQ(zero.optimizer_state, (std::vector<float>{3.0f}));
  EXPECT_EQ(zero.optimizer_steps, 13);  // the largest
  EXPECT_EQ(zero.global_step, 100);     // worker 0's
  EXPECT_EQ(zero.clock, set[3].clock);  // the latest
  EXPECT_TRUE(zero.strategy_state.empty());
  ASSERT_EQ(zero.resizes.size(), 1u);
  EXPECT_EQ(zero.resizes[0].from, 4);
  EXPECT_EQ(zero.resizes[0].to, 2);
  EXPECT_EQ(zero.resizes[0].at_epoch, 2);
  const WorkerReport report = deserialize_report(zero.report);
  ASSERT_EQ(report.epochs.size(), 6u);  // its own two, then workers 2 and 3's
  EXPECT_EQ(report.epochs[2].worker, 2);
  EXPECT_EQ(report.epochs[5].worker, 3);
  const WorkerCheckpoint one = resized_checkpoint(set, s, 1);
  EXPECT_EQ(one.params, zero.params);
  EXPECT_EQ(deserialize_report(one.report).epochs.size(), 2u);
}

TEST(Rescale, GrowingStartsNewWorkersFromTheGlobalModel) {
  const Scenario s = scenario_of(4, "epoch_async");
  const std::vector<WorkerCheckpoint> set = set_of(2);
  for (int w = 0; w < 4; ++w) {
    const WorkerCheckpoint c = resized_checkpoint(set, s, w);
    EXPECT_EQ(c.params, set[1].params) << w;  // worker 1 merged last (the later clock)
    EXPECT_EQ(c.worker, w);
  }
  const WorkerReport fresh = deserialize_report(resized_checkpoint(set, s, 3).report);
  EXPECT_EQ(fresh.worker, 3);
  EXPECT_TRUE(fresh.epochs.empty());
}

TEST(Rescale, HashIgnoresTheWorkerCountOnly) {
  EXPECT_EQ(scenario_hash(scenario_of(2, "epoch_sync")),
            scenario_hash(scenario_of(4, "epoch_sync")));
  EXPECT_NE(scenario_hash(scenario_of(2, "epoch_sync")),
            scenario_hash(scenario_of(2, "epoch_sync", 43)));
  EXPECT_NE(scenario_hash(scenario_of(2, "epoch_sync")),
            scenario_hash(scenario_of(2, "local_sgd")));
}

// Worker 0 resized to 2 workers and wrote after epoch 3, worker 1 was killed before it did: the
// latest complete set is the 4 workers' after epoch 2.
TEST(Rescale, ResumeSetIsTheLatestCompleteOneAtAnyWorkerCount) {
  const Scenario four = scenario_of(4, "epoch_sync"), two = scenario_of(2, "epoch_sync");
  const std::string dir = rescale_dir("set").string();
  for (const WorkerCheckpoint& c : set_of(4)) write_worker_checkpoint(dir, four, c);
  WorkerCheckpoint later = worker_checkpoint(0, 2);
  later.next_epoch = 3;
  write_worker_checkpoint(dir, two, later);
  std::vector<WorkerCheckpoint> set = read_resume_set(dir, two);
  ASSERT_EQ(set.size(), 4u);
  EXPECT_EQ(set[0].next_epoch, 2);
  EXPECT_EQ(set[3].worker, 3);
  WorkerCheckpoint other = worker_checkpoint(1, 2);
  other.next_epoch = 3;
  write_worker_checkpoint(dir, two, other);
  set = read_resume_set(dir, four);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set[1].next_epoch, 3);
}

std::string file_bytes(const std::string& path) {
  std::ostringstream text;
  text << std::ifstream(path, std::ios::binary).rdbuf();
  return text.str();
}

// A version 1 file, as the syncopate before resizing wrote it: no resize list, the hash of the
// whole resolved scenario.
TEST(Rescale, ReadsVersionOneFiles) {
  const Scenario s = scenario_of(2, "epoch_sync");
  const std::string path = checkpoint_path(rescale_dir("v1").string(), 1);
  write_checkpoint(path, s, worker_checkpoint(1, 2));
  std::string bytes = file_bytes(path);
  // The CRC, and what version 2 added: the resize count (0), the step (0), the epoch state ("").
  bytes.resize(bytes.size() - 4 - 8 - 8 - 8);
  const uint32_t version = 1;
  uint64_t hash = 1469598103934665603ull, length = bytes.size() - 28;
  std::string old_toml = s.resolved_toml;  // without checkpoint.every_steps, which came later
  const size_t key = old_toml.find("every_steps = 0\n");
  ASSERT_NE(key, std::string::npos);
  old_toml.erase(key, std::string("every_steps = 0\n").size());
  for (const char c : old_toml) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::memcpy(bytes.data() + 8, &version, 4);
  std::memcpy(bytes.data() + 12, &hash, 8);
  std::memcpy(bytes.data() + 20, &length, 8);
  const auto crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
  bytes.append(reinterpret_cast<const char*>(&crc), 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const WorkerCheckpoint c = read_checkpoint(path, s);
  EXPECT_EQ(c.worker, 1);
  EXPECT_EQ(c.params, worker_checkpoint(1, 2).params);
  EXPECT_TRUE(c.resizes.empty());
  EXPECT_THROW(read_checkpoint(path, scenario_of(4, "epoch_sync")), UserError);  // v1: the count
}

}  // namespace
}  // namespace syncopate
