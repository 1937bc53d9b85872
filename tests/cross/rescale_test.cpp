// Resuming at another worker count through the syncopate binary: a run of 4 workers stopped after
// 2 of 4 epochs and resumed at 2 ends as a 2-worker run that resumed from the same carried-over
// state (its checkpoints rewritten with it): the same losses, accuracies, learning rates and bytes
// in every epoch after the resize, and the same final model; on the simulator for epoch_sync,
// epoch_async and local_sgd, under mpirun (4 ranks, then 2) for epoch_sync and local_sgd. Other
// strategies are refused.
#include "core/train/rescale.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/bytes.hpp"
#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"
#include "tests/common/same_metrics.hpp"

namespace rescale_test {
namespace {
namespace fs = std::filesystem;
using syncopate::WorkerCheckpoint;

const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";
const std::string kBin = SYNCOPATE_BIN;
constexpr int kEpochs = 4, kStop = 2;

fs::path scratch() { return syncopate::scratch_folder("rescale"); }

std::string run_args(const std::string& strategy, const std::string& backend, int workers) {
  std::string args = kScenario + " --quiet --backend " + backend + " --strategy " + strategy +
                     " --workers " + std::to_string(workers) + " --epochs " +
                     std::to_string(kEpochs) + " --set checkpoint.every=1";
  if (strategy == "local_sgd")
    args += " --set strategy.every=3 --set strategy.warmup_epochs=1";
  else
    args += " --set data.blocks=8";
  if (backend == "sim") args += " --platform ethernet-cluster";
  return args;
}

std::string stopped(const std::string& launcher) {
  return launcher + " " + kBin + " run --test-hook stop_after_epochs=" + std::to_string(kStop) +
         " ";
}

std::vector<char> bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<syncopate::EpochMetrics> rows_of(const fs::path& dir, bool resized_part) {
  std::vector<syncopate::EpochMetrics> rows;
  for (const auto& r : syncopate::read_metrics_csv((dir / "metrics.csv").string()))
    if ((r.epoch >= kStop) == resized_part) rows.push_back(r);
  return rows;
}

// The reference: `ref`'s checkpoints (of `to` workers) given the state that the resize carries
// over from `from_set` (and its clock); its strategy starts afresh (local_sgd's state is its step
// counter).
void give_carried_state(const fs::path& ref, const std::vector<WorkerCheckpoint>& from_set,
                        const std::string& strategy) {
  const syncopate::Scenario s = syncopate::load_scenario((ref / "scenario.toml").string());
  syncopate::ByteWriter fresh;
  if (strategy == "local_sgd") fresh.put<int64_t>(0);
  // The simulator keeps a set in one file, MPI ranks a file each (checkpoint.hpp).
  const bool one_file = fs::exists(syncopate::checkpoint_set_path(ref.string()));
  std::vector<WorkerCheckpoint> set = syncopate::read_resume_set(ref.string(), s);
  ASSERT_EQ(set.size(), static_cast<size_t>(s.workers));
  for (int w = 0; w < s.workers; ++w) {
    WorkerCheckpoint& c = set[static_cast<size_t>(w)];
    const WorkerCheckpoint carried = syncopate::resized_checkpoint(from_set, s, w);
    ASSERT_EQ(c.next_epoch, carried.next_epoch);
    c.params = carried.params;
    c.optimizer_state = carried.optimizer_state;
    c.optimizer_steps = carried.optimizer_steps;
    c.global_step = carried.global_step;
    c.clock = carried.clock;  // epoch_async: the merges' order follows the clocks
    c.strategy_state = fresh.bytes();
    if (!one_file) syncopate::write_checkpoint(syncopate::checkpoint_path(ref.string(), w), s, c);
  }
  if (one_file) syncopate::write_checkpoint_set(ref.string(), s, set);
}

void expect_resize_equivalent(const std::string& strategy, const std::string& backend,
                              const std::string& launcher_from, const std::string& launcher_to) {
  const std::string name = backend + "-" + strategy;
  const fs::path part = scratch() / (name + "-4to2"), ref = scratch() / (name + "-ref");
  for (const fs::path& p : {part, ref}) {
    fs::remove_all(p);
    fs::remove_all(p.string() + ".partial");
  }
  const fs::path part_partial = part.string() + ".partial", ref_partial = ref.string() + ".partial";
  std::string output;
  ASSERT_EQ(syncopate::run_command(
                stopped(launcher_from) + run_args(strategy, backend, 4) + " --out " + part.string(),
                &output),
            4)
      << output;
  const syncopate::Scenario four =
      syncopate::load_scenario((part_partial / "scenario.toml").string());
  const std::vector<WorkerCheckpoint> set = syncopate::read_resume_set(part_partial.string(), four);
  ASSERT_EQ(set.size(), 4u);
  const auto before = rows_of(part_partial, false);
  ASSERT_EQ(syncopate::run_command(launcher_to + " " + kBin + " run --quiet --resume " +
                                       part_partial.string() + " --workers 2",
                                   &output),
            0)
      << output;
  ASSERT_EQ(syncopate::run_command(
                stopped(launcher_to) + run_args(strategy, backend, 2) + " --out " + ref.string(),
                &output),
            4)
      << output;
  give_carried_state(ref_partial, set, strategy);
  ASSERT_EQ(
      syncopate::run_command(
          launcher_to + " " + kBin + " run --quiet --resume " + ref_partial.string(), &output),
      0)
      << output;
  // The epochs before the resize: every one of the 4 workers' rows, as they were.
  const auto kept = rows_of(part, false);
  ASSERT_EQ(kept.size(), 4u * kStop);
  ASSERT_EQ(before.size(), kept.size());
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i].train_loss, before[i].train_loss);
  const auto x = rows_of(part, true), y = rows_of(ref, true);
  ASSERT_EQ(x.size(), 2u * (kEpochs - kStop));
  syncopate::expect_same_training_rows(x, y);
  EXPECT_EQ(bytes_of(part / "model.bin"), bytes_of(ref / "model.bin"));
  const std::string summary = syncopate::read_text(part / "summary.json");
  EXPECT_NE(summary.find("\"from_workers\": 4,\n      \"to_workers\": 2,\n      \"at_epoch\": 2"),
            std::string::npos)
      << summary;
  EXPECT_EQ(syncopate::read_text(ref / "summary.json").find("resized"), std::string::npos);
}

class SimResize : public ::testing::TestWithParam<const char*> {};

TEST_P(SimResize, EndsAsARunResumedFromTheCarriedState) {
  expect_resize_equivalent(GetParam(), "sim", "", "");
}

INSTANTIATE_TEST_SUITE_P(Strategies, SimResize,
                         ::testing::Values("epoch_sync", "epoch_async", "local_sgd"));

class MpiResize : public ::testing::TestWithParam<const char*> {};

TEST_P(MpiResize, FourRanksThenTwoEndAsARunResumedFromTheCarriedState) {
  expect_resize_equivalent(GetParam(), "mpi", syncopate::mpirun(4), syncopate::mpirun(2));
}

INSTANTIATE_TEST_SUITE_P(Strategies, MpiResize, ::testing::Values("epoch_sync", "local_sgd"));

TEST(ResizeRefusal, StrategiesOtherThanTheWeightAveragingOnes) {
  const fs::path out = scratch() / "ddp";
  fs::remove_all(out.string() + ".partial");
  std::string output;
  ASSERT_EQ(syncopate::run_command(
                stopped("") + kScenario +
                    " --quiet --backend sim --platform ethernet-cluster --strategy ddp --workers 4"
                    " --epochs 4 --set checkpoint.every=1 --out " +
                    out.string(),
                &output),
            4)
      << output;
  const std::string partial = out.string() + ".partial";
  EXPECT_EQ(
      syncopate::run_command(kBin + " run --quiet --resume " + partial + " --workers 2", &output),
      1);
  EXPECT_NE(output.find("workers: resuming checkpoints of 4 worker(s) at 2 is possible for "
                        "epoch_sync, epoch_async and local_sgd only: ddp averages gradients"),
            std::string::npos)
      << output;
  // Refused before anything changed: the run still resumes at its own count.
  EXPECT_EQ(syncopate::run_command(kBin + " run --quiet --resume " + partial, &output), 0)
      << output;
}

}  // namespace
}  // namespace rescale_test
