// The simulator's restart after a fault (sim.restart.recovery_s) through the syncopate binary:
// ddp aborted by a host failure is relaunched from its last checkpoint set at the fault's date
// plus the recovery time, and ends with the fault-free run's model, losses and accuracies bit for
// bit, its time longer by exactly the work done again plus the recovery.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"
#include "tests/common/same_metrics.hpp"
#include "tests/common/small_sim_run.hpp"

namespace restart_test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";
const std::string kBin = SYNCOPATE_BIN;
constexpr double kRecovery = 7.5;

fs::path scratch() { return syncopate::scratch_folder("fault-restart"); }

using syncopate::HostFailure;

// small.toml with a host_failure for each of `faults`.
std::string scenario_file(const std::string& name, const std::vector<HostFailure>& faults) {
  return syncopate::small_with_host_failures(scratch() / (name + ".toml"), faults);
}

int run(const std::string& file, const std::string& extra, const fs::path& out, std::string* log,
        const std::string& strategy = "ddp") {
  return syncopate::run_small_on_sim(file, strategy, extra, out, log);
}

std::string restarting(double recovery_s) {
  return " --set checkpoint.every=1 --set sim.restart.recovery_s=" + std::to_string(recovery_s);
}

std::vector<syncopate::EpochMetrics> rows_of(const fs::path& run) {
  return syncopate::read_metrics_csv((run / "metrics.csv").string());
}

json summary_of(const fs::path& run) {
  return json::parse(syncopate::read_text(run / "summary.json"));
}

// The fault-free run, shared by the tests (written once).
const fs::path& clean_run() {
  static const fs::path clean = [] {
    const fs::path dir = scratch() / "clean";
    std::string log;
    EXPECT_EQ(run(scenario_file("clean", {}), " --set checkpoint.every=1", dir, &log), 0) << log;
    return dir;
  }();
  return clean;
}

// The middle of epoch `e` in `rows` (worker 1's), shifted by `shift` seconds.
double mid_epoch(const std::vector<syncopate::EpochMetrics>& rows, int e, double shift = 0) {
  for (const auto& r : rows)
    if (r.worker == 1 && r.epoch == e) return (r.start_s + r.end_s) / 2 + shift;
  ADD_FAILURE() << "no epoch " << e;
  return 0;
}

// The latest end of epoch `e` over the workers: the date of the checkpoint set after it.
double checkpoint_after(const std::vector<syncopate::EpochMetrics>& rows, int e) {
  double at = 0;
  for (const auto& r : rows)
    if (r.epoch == e) at = std::max(at, r.end_s);
  return at;
}

// The restarted run ends like the fault-free one: the same model bit for bit, the same losses,
// accuracies and bytes; its time columns are those of the fault-free run, shifted by `shift(e)`
// seconds from epoch e on.
template <typename Shift>
void expect_fault_free_results(const fs::path& restarted, Shift shift) {
  const fs::path& clean = clean_run();
  EXPECT_FALSE(fs::exists(restarted.string() + ".partial")) << "the run completed";
  EXPECT_EQ(syncopate::read_text(restarted / "model.bin"),
            syncopate::read_text(clean / "model.bin"));
  const auto rows = rows_of(restarted), clean_rows = rows_of(clean);
  syncopate::expect_same_training_rows(rows, clean_rows);
  for (size_t i = 0; i < rows.size() && i < clean_rows.size(); ++i) {
    const double d = shift(rows[i].epoch);
    EXPECT_NEAR(rows[i].start_s, clean_rows[i].start_s + d, 1e-9 * rows[i].end_s) << "row " << i;
    EXPECT_NEAR(rows[i].end_s, clean_rows[i].end_s + d, 1e-9 * rows[i].end_s) << "row " << i;
  }
  const json s = summary_of(restarted), c = summary_of(clean);
  EXPECT_EQ(s["final_test_accuracy"], c["final_test_accuracy"]);
  EXPECT_EQ(s["bytes_sent"], c["bytes_sent"]);
  EXPECT_NEAR(s["total_time_s"].get<double>(),
              c["total_time_s"].get<double>() + s["restart_lost_seconds"].get<double>(),
              1e-9 * s["total_time_s"].get<double>());
}

TEST(FaultRestart, DdpRestartsFromTheLastCheckpointAndEndsAsTheFaultFreeRun) {
  const auto clean = rows_of(clean_run());
  const double at = mid_epoch(clean, 1);
  const double checkpoint = checkpoint_after(clean, 0);
  const fs::path dir = scratch() / "one";
  std::string log;
  ASSERT_EQ(run(scenario_file("one", {{1, at}}), restarting(kRecovery), dir, &log), 0) << log;
  EXPECT_NE(log.find("restarting at t="), std::string::npos) << log;
  const json s = summary_of(dir);
  ASSERT_EQ(s["restarts"].size(), 1u) << s.dump(2);
  const json& r = s["restarts"][0];
  EXPECT_EQ(r["kind"], "host_failure");
  EXPECT_EQ(r["worker"], 1);
  EXPECT_NEAR(r["at_s"].get<double>(), at, 1e-9 * at);
  EXPECT_DOUBLE_EQ(r["resumed_from_s"].get<double>(), checkpoint);
  EXPECT_NEAR(r["lost_seconds"].get<double>(), at - checkpoint, 1e-9 * at);
  EXPECT_EQ(r["recovery_s"].get<double>(), kRecovery);
  EXPECT_NEAR(s["restart_lost_seconds"].get<double>(), at - checkpoint + kRecovery, 1e-9 * at);
  // Every clock starts at the relaunch: epoch 1 starts at at + R on every worker.
  for (const auto& row : rows_of(dir)) {
    if (row.epoch == 1) {
      EXPECT_NEAR(row.start_s, at + kRecovery, 1e-9 * at) << row.worker;
    }
  }
  const double shift = at + kRecovery - checkpoint;
  expect_fault_free_results(dir, [&](int e) { return e == 0 ? 0.0 : shift; });
}

TEST(FaultRestart, TwoFaultsRestartTwiceAndTheLossesAddUp) {
  const auto clean = rows_of(clean_run());
  const double at1 = mid_epoch(clean, 1);
  const double shift1 = at1 + kRecovery - checkpoint_after(clean, 0);
  const double at2 = mid_epoch(clean, 2, shift1);  // in the restarted run's time
  const double shift2 = at2 + kRecovery - (checkpoint_after(clean, 1) + shift1);
  const fs::path dir = scratch() / "two";
  std::string log;
  ASSERT_EQ(run(scenario_file("two", {{1, at1}, {3, at2}}), restarting(kRecovery), dir, &log), 0)
      << log;
  const json s = summary_of(dir);
  ASSERT_EQ(s["restarts"].size(), 2u) << s.dump(2);
  EXPECT_EQ(s["restarts"][1]["worker"], 3);
  EXPECT_NEAR(s["restarts"][1]["resumed_from_s"].get<double>(), checkpoint_after(clean, 1) + shift1,
              1e-9 * at2);
  EXPECT_NEAR(s["restart_lost_seconds"].get<double>(), shift1 + shift2, 1e-9 * at2);
  expect_fault_free_results(dir, [&](int e) {
    return e == 0 ? 0.0 : e == 1 ? shift1 : shift1 + shift2;
  });
}

TEST(FaultRestart, AFaultBeforeTheFirstCheckpointRestartsFromTheStart) {
  const auto clean = rows_of(clean_run());
  const double at = mid_epoch(clean, 0);
  const fs::path dir = scratch() / "start";
  std::string log;
  ASSERT_EQ(run(scenario_file("start", {{2, at}}), restarting(0), dir, &log), 0) << log;
  EXPECT_NE(log.find("from the start"), std::string::npos) << log;
  const json s = summary_of(dir);
  ASSERT_EQ(s["restarts"].size(), 1u) << s.dump(2);
  EXPECT_EQ(s["restarts"][0]["resumed_from_s"].get<double>(), 0);
  EXPECT_NEAR(s["restarts"][0]["lost_seconds"].get<double>(), at, 1e-9 * at);
  expect_fault_free_results(dir, [&](int) { return at; });
}

TEST(FaultRestart, ALinkFailureRestartsToo) {
  const auto clean = rows_of(clean_run());
  const double from = mid_epoch(clean, 1);
  const fs::path path = scratch() / "link.toml";
  {
    std::ofstream out(path);
    out.precision(17);
    out << syncopate::read_text(kScenario) << "\n[[sim.faults]]\nkind = \"link_failure\"\n"
        << "worker = 2\nfrom_s = " << from << "\nuntil_s = " << from + 100 << "\n";
  }
  const fs::path dir = scratch() / "link";
  std::string log;
  ASSERT_EQ(run(path.string(), restarting(kRecovery), dir, &log), 0) << log;
  const json s = summary_of(dir);
  ASSERT_EQ(s["restarts"].size(), 1u) << s.dump(2);
  const json& r = s["restarts"][0];
  EXPECT_EQ(r["kind"], "link_failure");
  EXPECT_FALSE(r["link"].get<std::string>().empty()) << r.dump();
  EXPECT_GE(r["at_s"].get<double>(), from) << "the first transfer across the failed link";
  EXPECT_DOUBLE_EQ(r["resumed_from_s"].get<double>(), checkpoint_after(clean, 0));
  const double shift = r["restart_s"].get<double>() - checkpoint_after(clean, 0);
  expect_fault_free_results(dir, [&](int e) { return e == 0 ? 0.0 : shift; });
}

TEST(FaultRestart, TheSameRunTwiceIsIdentical) {
  const double at = mid_epoch(rows_of(clean_run()), 1);
  const std::string file = scenario_file("twice", {{0, at}});
  std::string log;
  for (const char* name : {"twice-a", "twice-b"})
    ASSERT_EQ(run(file, restarting(kRecovery), scratch() / name, &log), 0) << log;
  const fs::path a = scratch() / "twice-a", b = scratch() / "twice-b";
  EXPECT_EQ(syncopate::read_text(a / "metrics.csv"), syncopate::read_text(b / "metrics.csv"));
  EXPECT_EQ(syncopate::read_text(a / "model.bin"), syncopate::read_text(b / "model.bin"));
  EXPECT_EQ(summary_of(a)["restarts"], summary_of(b)["restarts"]);
  EXPECT_EQ(summary_of(a)["total_time_s"], summary_of(b)["total_time_s"]);
}

TEST(FaultRestart, TheReportShowsTheTimeLostAgainstTheFaultFreeRun) {
  const double at = mid_epoch(rows_of(clean_run()), 1);
  const fs::path dir = scratch() / "reported";
  std::string log;
  ASSERT_EQ(run(scenario_file("reported", {{1, at}}), restarting(kRecovery), dir, &log), 0) << log;
  ASSERT_EQ(syncopate::run_command(
                kBin + " report " + dir.string() + " --baseline " + clean_run().string(), &log),
            0)
      << log;
  const std::string md = syncopate::read_text(dir / "report.md");
  EXPECT_NE(md.find("## Restarts after faults"), std::string::npos) << md;
  EXPECT_NE(md.find("## Lost to faults"), std::string::npos) << md;
  EXPECT_NE(md.find("| host_failure | worker 1 |"), std::string::npos) << md;
}

TEST(FaultRestart, IsRefusedWhereItCannotApply) {
  const std::string file = scenario_file("refused", {{1, 1.0}});
  std::string log;
  EXPECT_EQ(run(file, " --set sim.restart.recovery_s=5", scratch() / "no-checkpoint", &log), 1)
      << log;
  EXPECT_NE(log.find("sim.restart.recovery_s"), std::string::npos) << log;
  EXPECT_NE(log.find("checkpoint.every"), std::string::npos) << log;
  EXPECT_EQ(run(file, restarting(5), scratch() / "elastic", &log, "epoch_sync"), 1) << log;
  EXPECT_NE(log.find("there is no abort to restart from"), std::string::npos) << log;
  EXPECT_EQ(run(scenario_file("no-fault", {}), restarting(5), scratch() / "no-fault", &log), 1)
      << log;
  EXPECT_NE(log.find("nothing else aborts the job"), std::string::npos) << log;
}

}  // namespace
}  // namespace restart_test
