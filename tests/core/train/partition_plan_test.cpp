// data.partition through the scenario and the epoch plan: every sample trained exactly once
// per epoch across the workers, matching step counts under per-step strategies, fixed
// partitions constant across epochs, partitions.csv, and the keys refused where meaningless.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/train/epoch_plan.hpp"
#include "core/train/train_data.hpp"

namespace syncopate {
namespace {

constexpr int64_t kSamples = 601;  // not a multiple of the global batch

Scenario scenario(const std::string& strategy, const std::vector<std::string>& sets,
                  int workers = 3) {
  const std::string text = "seed = 5\nepochs = 3\nworkers = " + std::to_string(workers) +
                           "\nbatch_size = 16\nbackend = \"sim\"\n[model]\nname = \"mlp\"\n"
                           "[data]\ndataset = \"synthetic\"\ntrain_samples = " +
                           std::to_string(kSamples) + "\ntest_samples = 10\n[strategy]\nname = \"" +
                           strategy + "\"\n";
  return parse_scenario(text, "partition.toml", sets);
}

// Per worker, the steps of one epoch.
std::vector<std::vector<PlannedStep>> plan_all(const Scenario& s, const TrainData& data,
                                               int epoch) {
  std::vector<std::vector<PlannedStep>> plans;
  for (int w = 0; w < s.workers; ++w) plans.push_back(plan_epoch(s, data, w, epoch, false));
  return plans;
}

std::vector<int64_t> samples_of(const std::vector<PlannedStep>& steps) {
  std::vector<int64_t> out;
  for (const PlannedStep& step : steps) {
    EXPECT_EQ(static_cast<int64_t>(step.samples.size()), step.size);
    out.insert(out.end(), step.samples.begin(), step.samples.end());
  }
  return out;
}

struct PlanCase {
  std::string strategy;
  std::vector<std::string> sets;
};

std::vector<PlanCase> cases() {
  std::vector<PlanCase> out;
  for (const std::string strategy : {"ddp", "epoch_sync", "local_sgd", "hierarchical"})
    for (const std::string partition : {"iid", "fixed", "dirichlet", "shards"}) {
      PlanCase c{strategy, {"data.partition=" + partition}};
      if (partition == "dirichlet") c.sets.push_back("data.alpha=0.3");
      out.push_back(c);
    }
  return out;
}

TEST(PartitionPlan, EverySampleOnceAnEpochAndMatchingStepsUnderPerStepStrategies) {
  for (const PlanCase& c : cases()) {
    const Scenario s = scenario(c.strategy, c.sets);
    const TrainData data = prepare_data(s, false);
    const std::string what = c.strategy + " " + c.sets[0];
    for (int epoch = 0; epoch < 2; ++epoch) {
      const auto plans = plan_all(s, data, epoch);
      std::vector<int64_t> all;
      for (const auto& steps : plans) {
        const std::vector<int64_t> mine = samples_of(steps);
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int64_t> expected(kSamples);
      std::iota(expected.begin(), expected.end(), int64_t{0});
      EXPECT_EQ(all, expected) << what << " epoch " << epoch;
      if (s.data_order() != DataOrder::kGlobal) continue;
      // Per-step collectives: the same number of steps, and the same batch counts, everywhere.
      for (int w = 0; w < s.workers; ++w) {
        ASSERT_EQ(plans[w].size(), plans[0].size()) << what;
        for (size_t k = 0; k < plans[0].size(); ++k) {
          EXPECT_EQ(plans[w][k].global.size, plans[0][k].global.size) << what;
          for (int v = 0; v < s.workers; ++v)
            EXPECT_EQ(plans[w][k].global.count_of(v), plans[v][k].size) << what;
        }
      }
    }
  }
}

std::vector<std::set<int64_t>> worker_sets(const Scenario& s, const TrainData& data, int epoch) {
  std::vector<std::set<int64_t>> out;
  for (const auto& steps : plan_all(s, data, epoch)) {
    const std::vector<int64_t> mine = samples_of(steps);
    out.emplace_back(mine.begin(), mine.end());
  }
  return out;
}

TEST(PartitionPlan, FixedPartitionsStayConstantAcrossEpochsAndIidOnesDoNot) {
  for (const std::string strategy : {"ddp", "epoch_sync"}) {
    const Scenario fixed = scenario(strategy, {"data.partition=fixed"});
    const TrainData data = prepare_data(fixed, false);
    const auto first = worker_sets(fixed, data, 0);
    EXPECT_EQ(worker_sets(fixed, data, 1), first) << strategy;
    EXPECT_EQ(worker_sets(fixed, data, 2), first) << strategy;
    // The order inside a worker's partition still changes per epoch.
    EXPECT_NE(samples_of(plan_epoch(fixed, data, 0, 0, false)),
              samples_of(plan_epoch(fixed, data, 0, 1, false)))
        << strategy;
    const Scenario iid = scenario(strategy, {});
    const TrainData iid_data = prepare_data(iid, false);
    EXPECT_NE(worker_sets(iid, iid_data, 1), worker_sets(iid, iid_data, 0)) << strategy;
  }
}

TEST(PartitionPlan, PartitionsCsvCountsWhatEachWorkerTrains) {
  const Scenario s = scenario("epoch_sync", {"data.partition=shards"});
  const TrainData data = prepare_data(s, false);
  ASSERT_FALSE(data.partitions_csv.empty());
  std::vector<int64_t> per_worker(3, 0);
  std::istringstream rows(data.partitions_csv);
  std::string line;
  std::getline(rows, line);
  EXPECT_EQ(line, "worker,class,count");
  int lines = 0;
  for (; std::getline(rows, line); ++lines) {
    const size_t a = line.find(','), b = line.rfind(',');
    per_worker.at(std::stoul(line.substr(0, a))) += std::stoll(line.substr(b + 1));
  }
  EXPECT_EQ(lines, 3 * data.train->num_classes);
  for (int w = 0; w < 3; ++w)
    EXPECT_EQ(per_worker[w],
              static_cast<int64_t>(samples_of(plan_epoch(s, data, w, 0, false)).size()));
  EXPECT_TRUE(prepare_data(scenario("ddp", {}), false).partitions_csv.empty());
}

// An iid scenario resolves as it did before data.partition existed.
TEST(PartitionKeys, IidWritesNoNewKeysAndOthersRoundTrip) {
  EXPECT_EQ(scenario("ddp", {}).resolved_toml.find("partition"), std::string::npos);
  EXPECT_EQ(scenario("ddp", {"data.partition=iid"}).resolved_toml.find("partition"),
            std::string::npos);
  const Scenario s = scenario("ddp", {"data.partition=dirichlet", "data.alpha=0.2"});
  const Scenario again = parse_scenario(s.resolved_toml, "resolved.toml");
  EXPECT_EQ(again.data.partition, DataPartition::kDirichlet);
  EXPECT_EQ(again.data.alpha, 0.2);
  EXPECT_EQ(scenario("ddp", {"data.partition=shards"}).data.shards_per_worker, 2);
}

void expect_refused(const std::string& strategy, const std::vector<std::string>& sets,
                    const std::string& key, const std::string& why) {
  try {
    scenario(strategy, sets);
    ADD_FAILURE() << "accepted: " << sets.back();
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(key), std::string::npos) << what;
    EXPECT_NE(what.find(why), std::string::npos) << what;
  }
}

TEST(PartitionKeys, RefusedWhereTheyMeanNothing) {
  expect_refused("ddp", {"data.alpha=0.5"}, "data.alpha", "data.partition = \"dirichlet\"");
  expect_refused("ddp", {"data.partition=fixed", "data.shards_per_worker=3"},
                 "data.shards_per_worker", "data.partition = \"shards\"");
  expect_refused("ddp", {"data.partition=dirichlet", "data.alpha=0"}, "data.alpha", "");
  expect_refused("ddp", {"data.partition=random"}, "data.partition", "dirichlet");
  expect_refused("ddp", {"data.dataset=synthetic-regression", "loss=mse", "data.partition=shards"},
                 "data.partition", "classification dataset");
  expect_refused("ddp", {"sim.mode=cost_only", "data.partition=dirichlet"}, "data.partition",
                 "cost-only");
}

TEST(PartitionKeys, TooManyShardsIsAUserErrorNamingTheKey) {
  const Scenario s = scenario("ddp", {"data.partition=shards", "data.shards_per_worker=300"});
  try {
    prepare_data(s, false);
    ADD_FAILURE() << "3 x 300 shards of 601 samples accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("data.shards_per_worker"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace syncopate
