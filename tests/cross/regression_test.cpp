// Regression end to end, through the binary: scenarios/paper-regression.toml learns (training
// loss falls, test R² rises; metrics.csv and summary.json carry the test errors in MEDV's
// units), and bad tables or columns fail naming the file, the line and the key or cell.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"

namespace regression_test {
namespace {
namespace fs = std::filesystem;

const char* const kBoston =
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/boston_house_prices.csv";

TEST(PaperRegression, TrainingLossFallsAndTestR2Rises) {
  ASSERT_TRUE(fs::exists(kBoston)) << kBoston << " is missing: install python3-sklearn "
                                   << "(scripts/setup.sh does)";
  const fs::path out = syncopate::scratch_folder("regression") / "paper";
  fs::remove_all(out);
  std::string log;
  ASSERT_EQ(syncopate::run_command(std::string(SYNCOPATE_BIN) + " run " + SYNCOPATE_SOURCE_DIR +
                                       "/scenarios/paper-regression.toml --set epochs=20 --quiet"
                                       " --out " +
                                       out.string(),
                                   &log),
            0)
      << log;
  const std::vector<syncopate::EpochMetrics> rows =
      syncopate::read_metrics_csv((out / "metrics.csv").string());
  ASSERT_EQ(rows.size(), 20u);
  const syncopate::EpochMetrics &first = rows.front(), &last = rows.back();
  EXPECT_LT(last.train_loss, 0.7 * first.train_loss);
  EXPECT_GT(last.test_errors.r2, first.test_errors.r2 + 0.2);
  EXPECT_GT(last.test_errors.r2, 0.3);
  EXPECT_GT(last.test_errors.pearson, 0.5);
  EXPECT_LT(last.test_errors.mse, first.test_errors.mse);
  // In MEDV's units ($1000s, variance about 85), not the standardised ones (variance 1).
  EXPECT_GT(last.test_errors.mse, 5.0);
  EXPECT_GT(last.test_errors.mae, 1.0);
  EXPECT_LT(last.test_accuracy, 0);  // no accuracy for regression
  const auto summary = nlohmann::json::parse(syncopate::read_text(out / "summary.json"));
  EXPECT_EQ(summary["final_test_r2"].get<double>(), last.test_errors.r2);
  EXPECT_EQ(summary["final_test_mse"].get<double>(), last.test_errors.mse);
  EXPECT_EQ(summary["final_test_mae"].get<double>(), last.test_errors.mae);
  EXPECT_EQ(summary["final_test_pearson"].get<double>(), last.test_errors.pearson);
  EXPECT_TRUE(summary["final_test_accuracy"].is_null());
}

// A run of `scenario` (written to scenario.toml in the scratch folder) that must fail; its
// output.
std::string failing_run(const std::string& scenario) {
  static int runs = 0;
  const fs::path dir = syncopate::scratch_folder("regression");
  std::ofstream(dir / "scenario.toml") << scenario;
  const std::string out = "failed-" + std::to_string(++runs);
  std::string log;
  EXPECT_NE(syncopate::run_command(std::string(SYNCOPATE_BIN) + " run " +
                                       (dir / "scenario.toml").string() + " --quiet --out " +
                                       (dir / out).string(),
                                   &log),
            0)
      << log;
  return log;
}

// A scenario for table.csv (in the scratch folder), a model of `inputs` inputs; `columns` is
// the data.feature_columns line, or "".
std::string csv_scenario(int inputs, const std::string& columns) {
  const fs::path table = syncopate::scratch_folder("regression") / "table.csv";
  return "loss = \"mse\"\nepochs = 1\n[data]\ndataset = \"csv\"\npath = \"" + table.string() +
         "\"\ntargets = [\"y\"]\n" + columns + "\n[model]\ninput = [" + std::to_string(inputs) +
         "]\n[[model.layers]]\nkind = \"dense\"\nunits = 1\n";
}

void write_table(const std::string& text) {
  std::ofstream(syncopate::scratch_folder("regression") / "table.csv") << text;
}

TEST(RegressionBadInput, FeatureCountThatDoesNotMatchTheFirstLayer) {
  write_table("a,b,c,y\n1,2,3,4\n5,6,7,8\n9,1,2,3\n");
  // All three non-target columns for a model of 2 inputs: found when the table is read.
  std::string log = failing_run(csv_scenario(2, ""));
  EXPECT_NE(log.find("scenario.toml:5: data.path: "), std::string::npos) << log;
  EXPECT_NE(log.find("gives 3 feature and 1 target columns"), std::string::npos) << log;
  EXPECT_NE(log.find("takes 2 inputs"), std::string::npos) << log;
  // Named columns: found when the scenario is read.
  log = failing_run(csv_scenario(2, "feature_columns = [\"a\", \"b\", \"c\"]"));
  EXPECT_NE(log.find("scenario.toml:7: data.feature_columns: 3 feature columns"), std::string::npos)
      << log;
}

TEST(RegressionBadInput, NonNumericCellNamesFileRowAndColumn) {
  write_table("a,b,y\n1,2,3\n4,abc,6\n");
  const std::string log = failing_run(csv_scenario(2, ""));
  const std::string table = (syncopate::scratch_folder("regression") / "table.csv").string();
  EXPECT_NE(log.find(table + ":3: row 2, column 'b' (2): 'abc' is not a finite number"),
            std::string::npos)
      << log;
}

TEST(RegressionBadInput, UnknownColumnNames) {
  write_table("a,b,y\n1,2,3\n4,5,6\n");
  std::string log = failing_run(csv_scenario(2, "feature_columns = [\"a\", \"nope\"]"));
  EXPECT_NE(log.find("feature column 'nope' not in the header; columns: a, b, y"),
            std::string::npos)
      << log;
  log = failing_run(
      csv_scenario(2, "").replace(csv_scenario(2, "").find("[\"y\"]"), 5, "[\"price\"]"));
  EXPECT_NE(log.find("target column 'price' not in the header"), std::string::npos) << log;
}

}  // namespace
}  // namespace regression_test
