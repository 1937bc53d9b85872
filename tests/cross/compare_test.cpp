// `syncopate compare` on run directories written by the binary (the simulator and mpirun): equal
// runs give zero error, doctored ones exceed the tolerance or the bytes, and runs of another
// scenario or a directory that is no run are refused with exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/comm/mpi_settings.hpp"
#include "core/train/recorder.hpp"
#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"

namespace compare_test {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kBin = SYNCOPATE_BIN;
const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";

fs::path scratch() { return syncopate::scratch_folder("compare"); }
int run(const std::string& cmd, std::string* output) { return syncopate::run_command(cmd, output); }

using syncopate::mpirun;

// The small scenario's run directory scratch()/name (made once per test program).
fs::path run_dir(const std::string& name, const std::string& options,
                 const std::string& launcher = "") {
  const fs::path dir = scratch() / name;
  if (fs::exists(dir / "summary.json")) return dir;
  std::string out;
  const int rc = run(launcher + " " + kBin + " run " + kScenario + " --quiet " + options +
                         " --out " + dir.string(),
                     &out);
  EXPECT_EQ(rc, 0) << out;
  return dir;
}
fs::path sim_run(const std::string& name = "sim", const std::string& extra = "") {
  return run_dir(name, "--backend sim " + extra);
}

// A copy of `source` as scratch()/name with `edit` applied to each of its metrics.csv rows.
fs::path doctored(const fs::path& source, const std::string& name,
                  const std::function<void(syncopate::EpochMetrics&)>& edit) {
  const fs::path dir = scratch() / name;
  fs::remove_all(dir);
  fs::copy(source, dir, fs::copy_options::recursive);
  std::map<int, syncopate::WorkerReport> reports;
  for (syncopate::EpochMetrics e : syncopate::read_metrics_csv((dir / "metrics.csv").string())) {
    edit(e);
    reports[e.worker].worker = e.worker;
    reports[e.worker].epochs.push_back(e);
  }
  std::vector<syncopate::WorkerReport> all;
  for (auto& [w, r] : reports) all.push_back(r);
  std::ofstream(dir / "metrics.csv") << syncopate::metrics_csv(all);
  return dir;
}

int compare(const fs::path& a, const fs::path& b, const std::string& options, std::string* out) {
  return run(kBin + " compare " + a.string() + " " + b.string() + " " + options, out);
}

Json compare_json(const fs::path& dir) { return Json::parse(std::ifstream(dir / "compare.json")); }

TEST(Compare, EqualSimulatedRunsGiveZeroError) {
  const fs::path a = sim_run(), b = sim_run("sim-again");
  std::string out;
  ASSERT_EQ(compare(a, b, "--tolerance 0%", &out), 0) << out;
  EXPECT_NE(out.find("every figure within it, bytes equal"), std::string::npos) << out;
  const Json j = compare_json(b);           // default: written into RUN_B
  ASSERT_EQ(j["rows"].size(), 2u * 3 + 3);  // 2 epochs x (mean + 2 workers), whole run x 3
  for (const Json& row : j["rows"])
    for (const auto& [phase, error] : row["error"].items()) EXPECT_EQ(error, 0.0) << phase;
  EXPECT_GT(j["rows"][0]["b"]["total_s"].get<double>(), 0);
  EXPECT_TRUE(j["passed"].get<bool>());
}

TEST(Compare, DoctoredComputeExceedsTheToleranceAndIsNamed) {
  const fs::path a = sim_run();
  // Epoch 1 of both workers computes 5% longer in B.
  const fs::path b = doctored(a, "slower-compute", [](syncopate::EpochMetrics& e) {
    if (e.epoch != 1) return;
    e.end_s += 0.05 * e.compute_s;
    e.compute_s *= 1.05;
  });
  std::string out;
  EXPECT_EQ(compare(a, b, "--tolerance 1%", &out), 1) << out;
  EXPECT_NE(out.find("beyond it: epoch 1 (all workers) compute: -"), std::string::npos) << out;
  EXPECT_EQ(out.find("epoch 0 (all workers)"), std::string::npos) << out;  // epoch 0 is equal
  const Json j = compare_json(b);
  EXPECT_FALSE(j["passed"].get<bool>());
  EXPECT_TRUE(j["bytes"]["equal"].get<bool>());
  // Within a tolerance wider than the 5% (of the epoch, at most) that was added.
  EXPECT_EQ(compare(a, b, "--tolerance 10%", &out), 0) << out;
}

TEST(Compare, ByteMismatchFailsWhateverTheTolerance) {
  const fs::path a = sim_run();
  const fs::path b = doctored(a, "more-bytes", [](syncopate::EpochMetrics& e) {
    if (e.worker == 1 && e.epoch == 0) e.bytes_sent += 4;
  });
  std::string out;
  EXPECT_EQ(compare(a, b, "--tolerance 1000%", &out), 1) << out;
  EXPECT_NE(out.find("bytes: MISMATCH"), std::string::npos) << out;
  EXPECT_NE(out.find("worker 1 epoch 0 bytes_sent:"), std::string::npos) << out;
  EXPECT_FALSE(compare_json(b)["bytes"]["equal"].get<bool>());
}

TEST(Compare, RunsOfAnotherStrategyOrWorkerCountAreRefused) {
  const fs::path ddp = sim_run();
  std::string out;
  EXPECT_EQ(compare(ddp, sim_run("sync", "--strategy epoch_sync"), "", &out), 2) << out;
  EXPECT_NE(out.find("runs of different scenarios"), std::string::npos) << out;
  EXPECT_NE(out.find("strategy.name: \"ddp\" vs \"epoch_sync\""), std::string::npos) << out;
  EXPECT_EQ(compare(ddp, sim_run("one", "--workers 1"), "", &out), 2) << out;
  EXPECT_NE(out.find("workers: 2 vs 1"), std::string::npos) << out;
}

TEST(Compare, RunOfAnotherModelIsRefused) {
  const fs::path a = sim_run();
  const fs::path b = doctored(a, "other-model", [](syncopate::EpochMetrics&) {});
  Json summary = Json::parse(std::ifstream(b / "summary.json"));
  summary["scenario"]["model"]["name"] = "cnn";
  std::ofstream(b / "summary.json") << summary.dump(2);
  std::string out;
  EXPECT_EQ(compare(a, b, "", &out), 2) << out;
  EXPECT_NE(out.find("model.name: \"mlp\" vs \"cnn\""), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(b / "compare.json"));
}

TEST(Compare, ADirectoryThatIsNoRunIsNamed) {
  const fs::path empty = scratch() / "empty";
  fs::create_directories(empty);
  std::string out;
  EXPECT_EQ(compare(sim_run(), empty, "", &out), 2) << out;
  EXPECT_NE(out.find(empty.string() + ": not a run directory (no summary.json)"), std::string::npos)
      << out;
  const fs::path half = doctored(sim_run(), "no-metrics", [](syncopate::EpochMetrics&) {});
  fs::remove(half / "metrics.csv");
  EXPECT_EQ(compare(half, sim_run(), "", &out), 2) << out;
  EXPECT_NE(out.find("(no metrics.csv)"), std::string::npos) << out;
  EXPECT_EQ(compare(sim_run(), sim_run(), "--tolerance lots", &out), 2) << out;
  EXPECT_NE(out.find("compare: --tolerance lots"), std::string::npos) << out;
}

// The intended use: the simulator's prediction against a measured run under mpirun. The times
// differ by whatever this machine does; the bytes are the same, and the verdict is the file's.
TEST(Compare, SimulatedAgainstMeasuredUnderMpirun) {
  const fs::path sim = sim_run();
  const fs::path mpi = run_dir("mpi", "--backend mpi", mpirun(2));
  const fs::path out_dir = scratch() / "sim-vs-mpi";
  std::string out;
  const int rc = compare(sim, mpi, "--out " + out_dir.string(), &out);
  ASSERT_TRUE(rc == 0 || rc == 1) << out;
  const Json j = compare_json(out_dir);
  EXPECT_TRUE(j["bytes"]["equal"].get<bool>()) << out;
  EXPECT_EQ(j["passed"].get<bool>(), rc == 0);
  EXPECT_EQ(j["exceeded"].empty(), rc == 0) << out;
  EXPECT_EQ(j["allowed_differences"][0], "backend: \"sim\" vs \"mpi\"");
  EXPECT_EQ(j["a"]["backend"], "sim");
  EXPECT_EQ(j["b"]["backend"], "mpi");
  EXPECT_FALSE(fs::exists(mpi / "compare.json"));  // --out, not RUN_B
}

// A simulated run records the MPI settings its platform was calibrated under
// ([calibrated_under]); compare warns where the measured run ran under others.
TEST(Compare, MpiSettingsThatDifferFromThePlatformsCalibrationAreFlagged) {
  const fs::path mpi = run_dir("mpi", "--backend mpi", mpirun(2));
  const Json stats = Json::parse(std::ifstream(mpi / "summary.json"))["backend_stats"];
  const double copy = stats["shared_memory_single_copy"].get<double>();
  const double yields = stats["mpi_yield_when_idle"].get<double>();
  ASSERT_TRUE(copy == 0 || copy == 1) << stats;
  ASSERT_TRUE(yields == 0 || yields == 1) << stats;  // Open MPI has the setting
  // The committed loopback recipe, calibrated under the measured run's single copy and the
  // other waiting.
  std::string recipe =
      syncopate::read_text(fs::path(SYNCOPATE_SOURCE_DIR) / "platforms" / "loopback.toml");
  if (const size_t at = recipe.find("[calibrated_under]"); at != std::string::npos)
    recipe.erase(at, recipe.find("\n[", at + 1) - at);
  const fs::path platform = scratch() / "other-waiting.toml";
  std::ofstream(platform) << recipe << "\n[calibrated_under]\nshared_memory_single_copy = "
                          << (copy == 1 ? "true" : "false")
                          << "\nmpi_yield_when_idle = " << (yields == 1 ? "false" : "true") << "\n";
  const fs::path sim = sim_run("sim-other-waiting", "--platform " + platform.string());
  const Json sim_stats = Json::parse(std::ifstream(sim / "summary.json"))["backend_stats"];
  EXPECT_EQ(sim_stats["calibrated_shared_memory_single_copy"].get<double>(), copy) << sim_stats;
  EXPECT_EQ(sim_stats["calibrated_mpi_yield_when_idle"].get<double>(), 1 - yields) << sim_stats;

  const fs::path out_dir = scratch() / "other-waiting-vs-mpi";
  std::string out;
  const int rc = compare(sim, mpi, "--out " + out_dir.string(), &out);
  ASSERT_TRUE(rc == 0 || rc == 1) << out;  // a warning, not a refusal
  const std::string mismatch = std::string("mpi_yield_when_idle: ") + (yields == 1 ? "off" : "on") +
                               " (A calibrated under) vs " + (yields == 1 ? "on" : "off") +
                               " (B ran under)";
  EXPECT_NE(out.find("WARNING: MPI setting differs: " + mismatch), std::string::npos) << out;
  EXPECT_NE(out.find("ran under different MPI settings (" + mismatch + ")"), std::string::npos)
      << out;  // stderr too
  EXPECT_EQ(compare_json(out_dir)["mpi_setting_mismatches"], Json::array({mismatch}));

  // Two simulated runs: flagged where their platforms were calibrated under different
  // settings (the doctored copy's against the committed loopback's), and not on one platform.
  const fs::path loopback = sim_run();
  const Json loopback_stats =
      Json::parse(std::ifstream(loopback / "summary.json"))["backend_stats"];
  Json expected = Json::array();
  for (const std::string_view setting : syncopate::mpi_settings::kAll) {
    const std::string key =
        std::string(syncopate::mpi_settings::kCalibrated) + std::string(setting);
    const double a = sim_stats[key].get<double>(), b = loopback_stats[key].get<double>();
    ASSERT_TRUE(b == 0 || b == 1) << loopback_stats;
    if (a != b)
      expected.push_back(std::string(setting) + ": " + (a == 1 ? "on" : "off") +
                         " (A calibrated under) vs " + (b == 1 ? "on" : "off") +
                         " (B calibrated under)");
  }
  EXPECT_EQ(compare(sim, loopback, "--out " + (scratch() / "sims").string(), &out), 0) << out;
  EXPECT_EQ(compare_json(scratch() / "sims")["mpi_setting_mismatches"], expected) << out;
  EXPECT_EQ(compare(loopback, sim_run("sim-again"), "--out " + (scratch() / "same").string(), &out),
            0)
      << out;
  EXPECT_EQ(out.find("WARNING"), std::string::npos) << out;
  EXPECT_TRUE(compare_json(scratch() / "same")["mpi_setting_mismatches"].empty());
}

}  // namespace
}  // namespace compare_test
