// data.partition through the binary: fixed, dirichlet and shards run with ddp, epoch_sync and
// epoch_async, write partitions.csv on the simulator, the local backend and under mpirun, and
// give the same losses and weights on the simulator and on 2 MPI ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"

namespace partition_test {
namespace {
namespace fs = std::filesystem;

const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";
constexpr int64_t kTrainSamples = 600;  // small.toml's
constexpr int kClasses = 10;            // the MLP's outputs

fs::path scratch() { return syncopate::scratch_folder("partition"); }

using syncopate::mpirun;

std::string partition_sets(const std::string& partition) {
  std::string sets = " --set data.partition=" + partition;
  if (partition == "dirichlet") sets += " --set data.alpha=0.3";
  return sets;
}

std::string syncopate(const std::string& strategy, const std::string& partition, int workers,
                      const std::string& backend, const fs::path& out) {
  std::string knobs;
  if (strategy == "ddp") knobs = " --set strategy.bucket_mb=0.25";
  if (strategy == "epoch_sync") knobs = " --set strategy.every=2 --set data.blocks=6";
  return std::string(SYNCOPATE_BIN) + " run " + kScenario + " --quiet --strategy " + strategy +
         knobs + partition_sets(partition) + " --workers " + std::to_string(workers) +
         " --backend " + backend + " --out " + out.string();
}

// partitions.csv as counts[worker][class]; checks its header and that it covers every sample.
std::vector<std::vector<int64_t>> read_partitions(const fs::path& dir, int workers) {
  std::istringstream rows(syncopate::read_text(dir / "partitions.csv"));
  std::string line;
  std::getline(rows, line);
  EXPECT_EQ(line, "worker,class,count") << dir;
  std::vector<std::vector<int64_t>> counts(static_cast<size_t>(workers),
                                           std::vector<int64_t>(kClasses, -1));
  int64_t total = 0;
  int lines = 0;
  for (; std::getline(rows, line); ++lines) {
    int w = -1, c = -1;
    long long n = -1;
    EXPECT_EQ(std::sscanf(line.c_str(), "%d,%d,%lld", &w, &c, &n), 3) << line;
    if (w < 0 || w >= workers || c < 0 || c >= kClasses) {
      ADD_FAILURE() << dir << ": " << line;
      continue;
    }
    counts[static_cast<size_t>(w)][static_cast<size_t>(c)] = n;
    total += n;
  }
  EXPECT_EQ(lines, workers * kClasses) << dir;
  EXPECT_EQ(total, kTrainSamples) << dir;
  return counts;
}

std::string model_bytes(const fs::path& dir) { return syncopate::read_text(dir / "model.bin"); }

std::map<std::pair<int, int>, double> losses(const fs::path& dir) {
  std::map<std::pair<int, int>, double> out;
  for (const auto& e : syncopate::read_metrics_csv((dir / "metrics.csv").string()))
    out[{e.worker, e.epoch}] = e.train_loss;
  return out;
}

class PartitionSimVsMpi : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// The same partition on both backends, and the same training, bit for bit.
TEST_P(PartitionSimVsMpi, SamePartitionsLossesAndWeights) {
  const auto& [strategy, partition] = GetParam();
  const fs::path sim = scratch() / ("sim-" + strategy + "-" + partition);
  const fs::path mpi = scratch() / ("mpi-" + strategy + "-" + partition);
  std::string log;
  ASSERT_EQ(syncopate::run_command(syncopate(strategy, partition, 2, "sim", sim), &log), 0) << log;
  ASSERT_EQ(
      syncopate::run_command(mpirun(2) + " " + syncopate(strategy, partition, 2, "mpi", mpi), &log),
      0)
      << log;
  const auto counts = read_partitions(sim, 2);
  EXPECT_EQ(read_partitions(mpi, 2), counts);
  if (partition != "fixed") {  // label skew: not every worker holds every class
    int held = 0;
    for (const auto& worker : counts)
      held += static_cast<int>(
          std::count_if(worker.begin(), worker.end(), [](int64_t n) { return n > 0; }));
    EXPECT_LT(held, 2 * kClasses) << partition;
  }
  const auto sim_losses = losses(sim);
  ASSERT_EQ(sim_losses.size(), 4u);  // 2 workers x 2 epochs
  EXPECT_EQ(losses(mpi), sim_losses);
  for (const auto& [key, loss] : sim_losses) EXPECT_TRUE(std::isfinite(loss) && loss > 0);
  const std::string weights = model_bytes(sim);
  ASSERT_FALSE(weights.empty());
  EXPECT_TRUE(weights == model_bytes(mpi)) << strategy << " " << partition << ": model.bin differs";
}

INSTANTIATE_TEST_SUITE_P(Partitions, PartitionSimVsMpi,
                         ::testing::Combine(::testing::Values("ddp", "epoch_sync"),
                                            ::testing::Values("fixed", "dirichlet", "shards")));

TEST(PartitionRuns, EpochAsyncRunsEveryPartitionOnTheSimulator) {
  for (const std::string partition : {"fixed", "dirichlet", "shards"}) {
    const fs::path out = scratch() / ("async-" + partition);
    std::string log;
    ASSERT_EQ(
        syncopate::run_command(
            syncopate("epoch_async", partition, 2, "sim", out) + " --set data.blocks=6", &log),
        0)
        << log;
    read_partitions(out, 2);
    EXPECT_EQ(losses(out).size(), 4u) << partition;
  }
}

TEST(PartitionRuns, LocalBackendWritesPartitionsAndIidWritesNone) {
  const fs::path local = scratch() / "local-dirichlet";
  std::string log;
  ASSERT_EQ(syncopate::run_command(syncopate("serial", "dirichlet", 1, "local", local), &log), 0)
      << log;
  read_partitions(local, 1);  // one worker holds everything
  const fs::path iid = scratch() / "sim-iid";
  ASSERT_EQ(syncopate::run_command(syncopate("ddp", "iid", 2, "sim", iid), &log), 0) << log;
  EXPECT_TRUE(fs::exists(iid / "summary.json"));
  EXPECT_FALSE(fs::exists(iid / "partitions.csv"));
}

}  // namespace
}  // namespace partition_test
