// The Trainer on the local backend (learning, determinism, one worker = serial SGD, block order,
// NaN reporting, regression) and the run directory.
#include "core/train/trainer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/check.hpp"
#include "core/comm/local_backend.hpp"
#include "core/nn/model.hpp"
#include "core/train/run_files.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/serial_defaults.hpp"

namespace syncopate {
namespace {

// A small, fast classification problem: synthetic data shaped for the MLP.
Scenario small(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> sets = {
      "data.dataset=synthetic", "data.train_samples=1024", "data.test_samples=256", "epochs=3",
      "batch_size=32",          "schedule.lr=0.02",        "schedule.kind=constant"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return parse_scenario(default_scenario_text(), "<test>", serial_defaults(sets));
}

WorkerReport train_local(const Scenario& s) {
  const TrainData data = prepare_data(s, false);
  LocalCommunicator comm;
  WallClockExecutor exec;
  return train_worker(s, data, comm, exec);
}

TEST(Trainer, LossFallsAndAccuracyRises) {
  const WorkerReport r = train_local(small());
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_LT(r.epochs.back().train_loss, 0.7 * r.epochs.front().train_loss);
  EXPECT_GT(r.final_test_accuracy, 0.5);  // 10 classes: chance is 0.1
  EXPECT_EQ(r.steps, 3u * (1024 / 32));
  for (const auto& e : r.epochs) {
    EXPECT_GE(e.end_s, e.start_s);
    EXPECT_GT(e.compute_s, 0.0);
    EXPECT_GE(e.test_accuracy, 0.0);
  }
}

TEST(Trainer, SameSeedSameNumbersDifferentSeedDifferent) {
  const WorkerReport a = train_local(small()), b = train_local(small());
  const WorkerReport c = train_local(small({"seed=7"}));
  ASSERT_EQ(a.final_params.size(), b.final_params.size());
  EXPECT_EQ(a.final_params, b.final_params);
  for (size_t e = 0; e < a.epochs.size(); ++e) {
    EXPECT_EQ(a.epochs[e].train_loss, b.epochs[e].train_loss);
    EXPECT_EQ(a.epochs[e].test_accuracy, b.epochs[e].test_accuracy);
  }
  EXPECT_NE(a.final_params, c.final_params);
}

// With one worker every strategy's communication is the identity: each equals serial SGD on the
// same data order, bit for bit.
TEST(Trainer, EveryStrategyWithOneWorkerEqualsSerialSgd) {
  for (const char* order : {"global", "blocks"}) {
    const WorkerReport serial =
        train_local(small({"strategy.name=serial", std::string("data.order=") + order}));
    // epoch_async with the paper's rule global = (global + local) / 2 is an exponential moving
    // average even with one worker; with merge weight 1 its merge is the identity.
    std::vector<std::string> strategies = {"epoch_sync",
                                           "epoch_async --set strategy.merge_local_weight=1"};
    if (std::string(order) == "global")
      strategies = {"ddp", "local_sgd", "local_sgd --set strategy.warmup_epochs=1", "hierarchical"};
    for (const auto& name : strategies) {
      std::vector<std::string> sets = {std::string("data.order=") + order};
      std::string strategy = name;
      if (const size_t at = name.find(" --set "); at != std::string::npos) {
        strategy = name.substr(0, at);
        sets.push_back(name.substr(at + 7));
      }
      sets.push_back("strategy.name=" + strategy);
      const WorkerReport r = train_local(small(sets));
      EXPECT_EQ(r.final_params, serial.final_params) << name << " / " << order;
    }
  }
}

// The paper's merge with one worker: after one epoch, final = (initial + trained) / 2.
TEST(Trainer, EpochAsyncMergeIsTheHalfwayPointWithOneWorker) {
  const Scenario async_s = small({"epochs=1", "strategy.name=epoch_async"});
  const WorkerReport serial = train_local(small({"epochs=1", "data.order=blocks"}));
  const WorkerReport merged = train_local(async_s);
  auto initial = make_model(async_s.model.name);
  initial->init(async_s.seed);
  std::vector<float> expected(initial->params().begin(), initial->params().end());
  apply_merge_rule({0.5f, 0.5f}, expected, serial.final_params);
  EXPECT_EQ(merged.final_params, expected);
  EXPECT_NE(merged.final_params, serial.final_params);
}

TEST(Trainer, BlockOrderDiffersFromGlobalOrder) {
  const WorkerReport g = train_local(small({"data.order=global"}));
  const WorkerReport b = train_local(small({"data.order=blocks"}));
  EXPECT_NE(g.final_params, b.final_params);
}

TEST(Trainer, OptimizerResetPerBlockChangesTraining) {
  const WorkerReport keep = train_local(small({"strategy.name=epoch_sync"}));
  const WorkerReport reset =
      train_local(small({"strategy.name=epoch_sync", "strategy.optimizer_state=reset"}));
  EXPECT_NE(keep.final_params, reset.final_params);
}

TEST(Trainer, DivergingLossStopsNamingWorkerEpochAndStep) {
  try {
    train_local(small({"schedule.lr=1000", "data.normalize=false"}));
    FAIL() << "expected the NaN check to stop training";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("worker 0"), std::string::npos) << what;
    EXPECT_NE(what.find("epoch 0"), std::string::npos) << what;
    EXPECT_NE(what.find(", step "), std::string::npos) << what;
    EXPECT_NE(what.find("the training loss is"), std::string::npos) << what;
  }
}

TEST(Trainer, RegressionWithMse) {
  const WorkerReport r =
      train_local(small({"data.dataset=synthetic-regression", "loss=mse", "schedule.lr=0.005"}));
  EXPECT_LT(r.epochs.back().train_loss, r.epochs.front().train_loss);
  EXPECT_LT(r.final_test_accuracy, 0.0);  // no accuracy for regression
}

TEST(Recorder, RunDirectoryIsCompleteOrPartialNeverOverwritten) {
  namespace fs = std::filesystem;
  const Scenario s = small({"epochs=1"});
  const WorkerReport r = train_local(s);
  const fs::path base = scratch_folder("rec") / "run";
  fs::remove_all(base);
  const std::string first = write_run_dir(unique_run_dir(base.string()), s, {r}, {});
  const std::string second = write_run_dir(unique_run_dir(base.string()), s, {r}, {});
  EXPECT_EQ(first, base.string());
  EXPECT_NE(first, second);
  for (const char* f : {"metrics.csv", "summary.json", "trace.json", "scenario.toml"})
    EXPECT_TRUE(fs::exists(fs::path(first) / f)) << f;
  // The reader checks the header (worker,epoch,start_s,...,lr) and every cell.
  const std::vector<EpochMetrics> rows =
      read_metrics_csv((fs::path(first) / "metrics.csv").string());
  ASSERT_EQ(rows.size(), r.epochs.size());
  EXPECT_EQ(rows.back().train_loss, r.epochs.back().train_loss);
  std::stringstream summary;
  summary << std::ifstream(fs::path(first) / "summary.json").rdbuf();
  for (const char* key : {"\"backend\"", "\"strategy\"", "\"workers\"", "\"epochs\"", "\"seed\"",
                          "\"final_test_accuracy\"", "\"total_time_s\"", "\"compute_time_s\"",
                          "\"comm_time_s\"", "\"idle_time_s\"", "\"bytes_sent\""})
    EXPECT_NE(summary.str().find(key), std::string::npos) << key;
  EXPECT_THROW(write_run_dir(first, s, {r}, {}), UserError);
  const std::string failed = unique_run_dir(base.string());
  write_failure(failed, "boom");
  EXPECT_FALSE(fs::exists(failed));
  EXPECT_TRUE(fs::exists(failed + ".partial/ERROR"));
  fs::remove_all(base);
  fs::remove_all(second);
  fs::remove_all(failed + ".partial");
}

}  // namespace
}  // namespace syncopate
