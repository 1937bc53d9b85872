// Simulated faults through the syncopate binary: epoch_sync goes on without a worker whose host
// failed and summary.json says who was lost when; ddp aborts with exit code 4 and fault.json
// counts the time lost since the last checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"
#include "tests/common/small_sim_run.hpp"

namespace fault_run_test {
namespace {
namespace fs = std::filesystem;

const std::string kBin = SYNCOPATE_BIN;

fs::path scratch() { return syncopate::scratch_folder("fault-run"); }

// small.toml with a host_failure of `worker` at `at_s` appended, if at_s > 0.
std::string scenario_file(const std::string& name, int worker, double at_s) {
  std::vector<syncopate::HostFailure> faults;
  if (at_s > 0) faults.push_back({worker, at_s});
  return syncopate::small_with_host_failures(scratch() / (name + ".toml"), faults);
}

int run(const std::string& file, const std::string& strategy, const std::string& extra,
        const fs::path& out, std::string* log) {
  return syncopate::run_small_on_sim(file, strategy, extra, out, log);
}

// The number after `"key": ` in a JSON text (NaN if absent).
double json_number(const std::string& text, const std::string& key) {
  const size_t at = text.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + key.size() + 4, nullptr);
}

std::vector<syncopate::EpochMetrics> rows_of(const fs::path& run, int worker) {
  std::vector<syncopate::EpochMetrics> rows;
  for (const auto& row : syncopate::read_metrics_csv((run / "metrics.csv").string()))
    if (row.worker == worker) rows.push_back(row);
  return rows;
}

// Runs `strategy` fault-free into scratch() / name and returns the middle of `worker`'s second
// epoch of three, when the faulty run's worker is to fail; NaN, with a test failure, if the run
// failed or has not three epochs.
double clean_run(const std::string& name, const std::string& strategy, const std::string& knobs,
                 int worker, std::string* log) {
  const int code = run(scenario_file(name, 0, 0), strategy, knobs, scratch() / name, log);
  EXPECT_EQ(code, 0) << *log;
  const auto rows = rows_of(scratch() / name, worker);
  EXPECT_EQ(rows.size(), 3u);
  return code == 0 && rows.size() == 3 ? (rows[1].start_s + rows[1].end_s) / 2 : std::nan("");
}

TEST(FaultRun, EpochSyncGoesOnWithoutALostWorkerAndSaysSoInTheSummary) {
  const std::string knobs = " --set data.blocks=8";
  std::string log;
  const fs::path clean = scratch() / "sync-clean";
  const double at = clean_run("sync-clean", "epoch_sync", knobs, 2, &log);
  ASSERT_FALSE(std::isnan(at));
  const fs::path faulty = scratch() / "sync-faulty";
  ASSERT_EQ(run(scenario_file("sync-faulty", 2, at), "epoch_sync", knobs, faulty, &log), 0) << log;
  EXPECT_EQ(rows_of(faulty, 2).size(), 1u) << "worker 2's metrics end at its failure";
  for (int w : {0, 1, 3}) EXPECT_EQ(rows_of(faulty, w).size(), 3u) << w;
  const std::string summary = syncopate::read_text(faulty / "summary.json");
  ASSERT_NE(summary.find("\"lost_workers\""), std::string::npos) << summary;
  EXPECT_EQ(json_number(summary.substr(summary.find("\"lost_workers\"")), "worker"), 2);
  EXPECT_NEAR(json_number(summary, "at_s"), at, 1e-6 * at);
  EXPECT_NEAR(json_number(summary, "lost_seconds"), at - rows_of(faulty, 2)[0].end_s, 1e-6 * at);
  EXPECT_EQ(syncopate::read_text(clean / "summary.json").find("lost_workers"), std::string::npos);
}

TEST(FaultRun, DdpAbortsAndCountsTheTimeSinceTheLastCheckpoint) {
  const std::string knobs = " --set checkpoint.every=1";
  std::string log;
  const fs::path clean = scratch() / "ddp-clean";
  const double at = clean_run("ddp-clean", "ddp", knobs, 1, &log);
  ASSERT_FALSE(std::isnan(at));
  double checkpoint = 0;  // the latest end of epoch 0: every worker's checkpoint is written
  for (int w = 0; w < 4; ++w) checkpoint = std::max(checkpoint, rows_of(clean, w)[0].end_s);
  const fs::path faulty = scratch() / "ddp-faulty";
  EXPECT_EQ(run(scenario_file("ddp-faulty", 1, at), "ddp", knobs, faulty, &log), 4) << log;
  const std::string record =
      syncopate::read_text(fs::path(faulty.string() + ".partial") / "fault.json");
  EXPECT_NEAR(json_number(record, "at_s"), at, 1e-6 * at) << record;
  EXPECT_DOUBLE_EQ(json_number(record, "last_checkpoint_s"), checkpoint) << record;
  EXPECT_NEAR(json_number(record, "lost_seconds"), at - checkpoint, 1e-6 * at) << record;
  EXPECT_NE(log.find("since the last checkpoint (t="), std::string::npos) << log;
  // --resume continues it without the failure that has come (the relaunched job's spares), and
  // ends with the fault-free run's model; the abort's notes do not stay in the complete run.
  ASSERT_EQ(
      syncopate::run_command(kBin + " run --quiet --resume " + faulty.string() + ".partial", &log),
      0)
      << log;
  EXPECT_EQ(syncopate::read_text(faulty / "model.bin"), syncopate::read_text(clean / "model.bin"));
  for (const char* note : {"fault.json", "ERROR", "INCOMPLETE"})
    EXPECT_FALSE(fs::exists(faulty / note)) << note;
}

// Worker 0's host fails in epoch 1: the lowest-ranked survivor (worker 1) evaluates the final
// model and its model is model.bin, so final_test_accuracy is that of the survivors' model.
TEST(FaultRun, LosingWorkerZeroLeavesTheFinalModelToTheFirstSurvivor) {
  const std::string knobs = " --set data.blocks=8";
  std::string log;
  const fs::path clean = scratch() / "sync0-clean";
  const double at = clean_run("sync0-clean", "epoch_sync", knobs, 0, &log);
  ASSERT_FALSE(std::isnan(at));
  const fs::path faulty = scratch() / "sync0-faulty";
  ASSERT_EQ(run(scenario_file("sync0-faulty", 0, at), "epoch_sync", knobs, faulty, &log), 0) << log;
  EXPECT_EQ(rows_of(faulty, 0).size(), 1u) << "worker 0's metrics end at its failure";
  const auto survivor = rows_of(faulty, 1);
  ASSERT_EQ(survivor.size(), 3u);
  const std::string summary = syncopate::read_text(faulty / "summary.json");
  EXPECT_EQ(json_number(summary.substr(summary.find("\"lost_workers\"")), "worker"), 0);
  ASSERT_EQ(summary.find("\"final_test_accuracy\": null"), std::string::npos) << summary;
  const double accuracy = json_number(summary, "final_test_accuracy");
  ASSERT_FALSE(std::isnan(accuracy)) << summary;
  // The last epoch is evaluated after epoch_sync's final average: the final model's accuracy.
  EXPECT_NEAR(accuracy, survivor.back().test_accuracy, 1e-9) << summary;
  ASSERT_TRUE(fs::exists(faulty / "model.bin"));
  EXPECT_EQ(fs::file_size(faulty / "model.bin"), fs::file_size(clean / "model.bin"));
  EXPECT_NE(syncopate::read_text(faulty / "model.bin"), syncopate::read_text(clean / "model.bin"))
      << "the survivors' model, trained without worker 0 from epoch 1 on";
}

}  // namespace
}  // namespace fault_run_test
