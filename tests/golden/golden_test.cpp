// Golden predictions: shipped scenarios, reduced with overrides to run in seconds, through the
// syncopate binary on the simulator; their simulated seconds, phase times and bytes per worker
// and epoch must equal tests/golden/sim_predictions.csv, and each run's simulated seconds and
// message count tests/golden/sim_runs.csv, so any change in the predictions shows up.
//
// After an intended change of predictions, regenerate both files and review their diff:
//   SYNCOPATE_REGENERATE_GOLDEN=1 build/bin/test_golden     (or tests/golden/regenerate.sh)
//
// Times, bytes and learning rates are compared as text (the recorder writes shortest round-trip
// decimals, so equal text is equal doubles). Training losses and accuracies of the emulation
// cases are compared to 1e-5 relative (resp. 0.01) only: their float arithmetic depends on the
// CPU's vector units (the build uses -march=native), simulated time does not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/run_command.hpp"

namespace {
namespace fs = std::filesystem;

const std::string kSource = SYNCOPATE_SOURCE_DIR;
const std::string kPredictions = kSource + "/tests/golden/sim_predictions.csv";
const std::string kRuns = kSource + "/tests/golden/sim_runs.csv";

struct Case {
  std::string name;
  std::string args;  // after `syncopate run`, paths relative to the source tree
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const std::string kResnet =
    "scenarios/sim-resnet50-ddp-1024.toml --workers 64 --set sim.platform_params.nodes=16 "
    "--set sim.cost_only_train_samples=20000";
const std::string kMlpCost =
    "scenarios/fmnist-mlp.toml --backend sim --workers 8 --epochs 2 --set sim.mode=cost_only "
    "--set sim.platform_params.nodes=2";
const std::string kMlpEmulated =
    "scenarios/fmnist-mlp.toml --backend sim --epochs 2 --set data.train_samples=512 "
    "--set data.test_samples=128 --set sim.platform_params.nodes=1";

// Every strategy at least once; analytic and flow fidelity (message once); cost-only with and
// without the steady-state fast-forward; emulation.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"resnet50-ddp-analytic", kResnet},
      {"resnet50-ddp-flow", kResnet + " --fidelity flow"},
      {"resnet50-ddp-message-no-ff",
       "scenarios/sim-resnet50-ddp-1024.toml --workers 16 --set sim.platform_params.nodes=4 "
       "--set sim.cost_only_train_samples=640 --fidelity message --set sim.fast_forward=false"},
      {"mlp-cost-epoch_sync-flow", kMlpCost + " --strategy epoch_sync --fidelity flow"},
      {"mlp-cost-epoch_async-analytic",
       kMlpCost + " --strategy epoch_async --fidelity analytic --set sim.slowdown.3=1.5"},
      {"mlp-cost-local_sgd-analytic", kMlpCost +
                                          " --strategy local_sgd --fidelity analytic "
                                          "--set strategy.every=4 --set strategy.warmup_epochs=1"},
      {"mlp-cost-hierarchical-flow", kMlpCost + " --strategy hierarchical --fidelity flow"},
      {"mlp-emulated-serial-analytic",
       kMlpEmulated + " --workers 1 --strategy serial --fidelity analytic"},
      {"mlp-emulated-ddp-flow", kMlpEmulated + " --workers 4 --strategy ddp --fidelity flow"},
      {"mlp-emulated-epoch_sync-master-analytic",
       kMlpEmulated + " --workers 4 --strategy epoch_sync --set strategy.aggregation=master "
                      "--fidelity analytic"},
      {"mlp-emulated-epoch_async-flow",
       kMlpEmulated + " --workers 3 --strategy epoch_async --fidelity flow --set sim.slowdown.1=2"},
  };
  return all;
}

fs::path scratch_dir() { return syncopate::scratch_folder("golden"); }

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> cells;
  std::stringstream row(line);
  for (std::string cell; std::getline(row, cell, separator);) cells.push_back(cell);
  if (!line.empty() && line.back() == separator) cells.emplace_back();
  return cells;
}

// The number after `"key": ` in a JSON text, as written.
std::string json_value(const std::string& json, const std::string& key) {
  const std::string pattern = "\"" + key + "\": ";
  const size_t at = json.find(pattern);
  if (at == std::string::npos) return "missing";
  const size_t from = at + pattern.size();
  return json.substr(from, json.find_first_of(",}", from) - from);
}

struct Outcome {
  std::vector<std::string> predictions;  // sim_predictions.csv rows
  std::string run;                       // the sim_runs.csv row
  std::string error;
};

// metrics.csv: worker,epoch,start_s,end_s,compute_s,comm_s,idle_s,bytes_sent,bytes_recv,
// train_loss,train_accuracy,test_accuracy,lr,comm_total_s,test_mse,test_mae,test_r2,test_pearson
// (the regression test errors are not part of the golden figures)
Outcome run_case(const Case& c) {
  Outcome outcome;
  const fs::path out = scratch_dir() / c.name;
  const fs::path log = scratch_dir() / (c.name + ".log");
  const std::string cmd = "cd " + kSource + " && " + SYNCOPATE_BIN + " run " + c.args + " --out " +
                          out.string() + " > " + log.string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::stringstream text;
    text << std::ifstream(log).rdbuf();
    outcome.error = cmd + "\n" + text.str();
    return outcome;
  }
  std::ifstream csv(out / "metrics.csv");
  std::string line;
  std::getline(csv, line);
  while (std::getline(csv, line)) {
    const std::vector<std::string> m = split(line, ',');
    if (m.size() != 18) {
      outcome.error = "metrics.csv row: " + line;
      return outcome;
    }
    std::string row = c.name;
    for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 13, 12, 9, 10, 11})
      row += "," + m[static_cast<size_t>(i)];
    outcome.predictions.push_back(row);
  }
  std::stringstream summary;
  summary << std::ifstream(out / "summary.json").rdbuf();
  outcome.run = c.name + "," + json_value(summary.str(), "simulated_seconds") + "," +
                json_value(summary.str(), "simulated_comms") + "," + c.args;
  return outcome;
}

const char* const kPredictionsHeader =
    "case,worker,epoch,start_s,end_s,compute_s,comm_s,idle_s,bytes_sent,bytes_recv,comm_total_s,"
    "lr,"
    "train_loss,train_accuracy,test_accuracy";
const char* const kRunsHeader = "case,simulated_seconds,simulated_comms,arguments";

std::string preamble(const std::string& what) {
  return "# " + what +
         " of tests/golden/golden_test.cpp's cases (syncopate run <arguments>).\n"
         "# Regenerate: SYNCOPATE_REGENERATE_GOLDEN=1 build/bin/test_golden "
         "(or tests/golden/regenerate.sh), then review the diff.\n";
}

// The golden file's data rows of case `name` (all cases for an empty name).
std::vector<std::string> golden_rows(const std::string& path, const std::string& name) {
  std::vector<std::string> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("case,", 0) == 0) continue;
    if (name.empty() || line.rfind(name + ",", 0) == 0) rows.push_back(line);
  }
  return rows;
}

bool close(const std::string& a, const std::string& b, double tolerance, bool relative) {
  if (a == b) return true;
  if (a.empty() || b.empty()) return false;
  const double x = std::stod(a), y = std::stod(b);
  const double scale = relative ? std::max({std::abs(x), std::abs(y), 1e-30}) : 1.0;
  return std::abs(x - y) <= tolerance * scale;
}

// Columns up to lr exactly; train_loss to 1e-5 relative; accuracies to 0.01.
bool same_prediction(const std::string& expected, const std::string& actual) {
  const std::vector<std::string> e = split(expected, ','), a = split(actual, ',');
  if (e.size() != 15 || a.size() != 15) return false;
  for (size_t i = 0; i < 12; ++i)
    if (e[i] != a[i]) return false;
  return close(e[12], a[12], 1e-5, true) && close(e[13], a[13], 0.01, false) &&
         close(e[14], a[14], 0.01, false);
}

const char* const kHowToRegenerate =
    "\nIf the change of prediction is intended: SYNCOPATE_REGENERATE_GOLDEN=1 "
    "build/bin/test_golden, and review the diff of tests/golden/";

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, PredictionsEqualTheCheckedInOnes) {
  if (std::getenv("SYNCOPATE_REGENERATE_GOLDEN")) GTEST_SKIP() << "regenerating";
  const Case& c = GetParam();
  const Outcome outcome = run_case(c);
  ASSERT_TRUE(outcome.error.empty()) << outcome.error;
  const std::vector<std::string> expected = golden_rows(kPredictions, c.name);
  ASSERT_EQ(outcome.predictions.size(), expected.size())
      << "rows of " << c.name << kHowToRegenerate;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(same_prediction(expected[i], outcome.predictions[i]))
        << "expected " << expected[i] << "\n     got " << outcome.predictions[i]
        << kHowToRegenerate;
  const std::vector<std::string> run = golden_rows(kRuns, c.name);
  ASSERT_EQ(run.size(), 1u) << c.name << kHowToRegenerate;
  EXPECT_EQ(outcome.run, run[0]) << kHowToRegenerate;
}

INSTANTIATE_TEST_SUITE_P(Scenarios, Golden, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           std::string name = param.param.name;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// Without SYNCOPATE_REGENERATE_GOLDEN: the files hold exactly the cases above, in order (no
// stale or missing case). With it: runs every case and rewrites both files.
TEST(GoldenFiles, HoldEveryCaseOrAreRegenerated) {
  if (!std::getenv("SYNCOPATE_REGENERATE_GOLDEN")) {
    std::vector<std::string> names, listed;
    for (const Case& c : cases()) names.push_back(c.name);
    for (const std::string& row : golden_rows(kRuns, "")) listed.push_back(split(row, ',')[0]);
    EXPECT_EQ(listed, names) << kHowToRegenerate;
    std::vector<std::string> predicted;
    for (const std::string& row : golden_rows(kPredictions, "")) {
      const std::string name = split(row, ',')[0];
      if (predicted.empty() || predicted.back() != name) predicted.push_back(name);
    }
    EXPECT_EQ(predicted, names) << kHowToRegenerate;
    return;
  }
  std::ofstream predictions(kPredictions), runs(kRuns);
  predictions << preamble("Simulated seconds and bytes per worker and epoch") << kPredictionsHeader
              << "\n";
  runs << preamble("Simulated seconds and message counts") << kRunsHeader << "\n";
  for (const Case& c : cases()) {
    const Outcome outcome = run_case(c);
    ASSERT_TRUE(outcome.error.empty()) << outcome.error;
    for (const std::string& row : outcome.predictions) predictions << row << "\n";
    runs << outcome.run << "\n";
  }
  ASSERT_TRUE(predictions.good() && runs.good()) << "writing " << kPredictions << ", " << kRuns;
}

}  // namespace
