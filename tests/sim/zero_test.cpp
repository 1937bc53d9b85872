// Strategy zero (stages 1 to 3) on the simulator in emulation: the same arithmetic as ddp, one
// worker equal to serial, replicas that agree, the bytes of a reduce-scatter plus an allgather
// per step (stage 3: two allgathers). The overlap with compute: tests/cross/zero_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/sim/sim_training.hpp"

namespace syncopate {
namespace {

// 768 samples of batch 16 on 3 workers of one node: 16 steps per epoch, 2 epochs. The MLP has
// 0.9 MiB of gradients: strategy.bucket_mb = 0.25 makes several buckets.
Scenario zero_scenario(const std::vector<std::string>& extra) {
  std::vector<std::string> sets = {"sim.platform_params.nodes=1", "workers=3"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return testing::small_scenario(sets);
}

using testing::serial;
using testing::SimRun;
using testing::simulate;

const std::vector<std::string> kStage1 = {"strategy.name=zero", "strategy.stage=1"};
const std::vector<std::string> kStage2 = {"strategy.name=zero", "strategy.stage=2",
                                          "strategy.bucket_mb=0.25"};
const std::vector<std::string> kStage3 = {"strategy.name=zero", "strategy.stage=3",
                                          "strategy.bucket_mb=0.25"};
// Stage 3 with a unit per layer: every layer's parameters gathered on their own.
const std::vector<std::string> kStage3PerLayer = {"strategy.name=zero", "strategy.stage=3",
                                                  "strategy.bucket_mb=0.000001"};

std::vector<std::string> with(std::vector<std::string> sets, const std::string& extra) {
  sets.push_back(extra);
  return sets;
}

// ddp's ring allreduce is a ring reduce-scatter then a ring allgather, and the simulator adds
// the workers' contributions in the same order for both: zero's weights and losses equal
// ddp's bit for bit (the general contract is equality up to the summation order; here it is
// the same order). Each worker also sends the same bytes.
TEST(SimZero, StagesOneAndTwoEqualDdpBitForBit) {
  const SimRun ddp = simulate(
      zero_scenario({"strategy.name=ddp", "strategy.algorithm=ring", "strategy.bucket_mb=0.25"}));
  ASSERT_TRUE(ddp.error.empty()) << ddp.error;
  ASSERT_EQ(ddp.params.size(), 3u);
  for (const auto& stage : {kStage1, kStage2}) {
    const SimRun zero = simulate(zero_scenario(stage));
    ASSERT_TRUE(zero.error.empty()) << stage[1] << ": " << zero.error;
    ASSERT_EQ(zero.params.size(), 3u);
    for (size_t w = 0; w < 3; ++w) EXPECT_EQ(zero.params[w], ddp.params[w]) << stage[1];
    ASSERT_EQ(zero.epochs.size(), ddp.epochs.size());
    for (size_t i = 0; i < ddp.epochs.size(); ++i) {
      EXPECT_EQ(zero.epochs[i].train_loss, ddp.epochs[i].train_loss) << stage[1] << " row " << i;
      EXPECT_EQ(zero.epochs[i].bytes_sent, ddp.epochs[i].bytes_sent) << stage[1] << " row " << i;
    }
  }
}

// Against ddp's other algorithms (recursive halving and doubling on 4 workers) zero is equal up
// to the summation order: within 1e-6 normalised error over the model after 2 epochs.
TEST(SimZero, StageOneEqualsDdpRabenseifnerToRounding) {
  const SimRun ddp = simulate(
      zero_scenario({"workers=4", "strategy.name=ddp", "strategy.algorithm=rabenseifner"}));
  const SimRun zero = simulate(zero_scenario(with(kStage1, "workers=4")));
  ASSERT_TRUE(ddp.error.empty() && zero.error.empty()) << ddp.error << zero.error;
  const std::vector<float>&a = zero.params.at(0), &b = ddp.params.at(0);
  ASSERT_EQ(a.size(), b.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  EXPECT_LE(std::sqrt(diff / norm), 1e-6);
}

// Stage 3 reduce-scatters ddp's buckets as stage 2 does and gathers the same parameters before
// each unit is used: its weights and losses are ddp ring's bit for bit, with units of several
// layers (0.25 MiB buckets) and with a unit per layer.
TEST(SimZero, StageThreeEqualsDdpBitForBit) {
  for (const auto& [bucket, stage] : {std::pair{"strategy.bucket_mb=0.25", kStage3},
                                      {"strategy.bucket_mb=0.000001", kStage3PerLayer}}) {
    const SimRun ddp =
        simulate(zero_scenario({"strategy.name=ddp", "strategy.algorithm=ring", bucket}));
    const SimRun zero = simulate(zero_scenario(stage));
    ASSERT_TRUE(ddp.error.empty() && zero.error.empty()) << ddp.error << zero.error;
    ASSERT_EQ(zero.params.size(), 3u);
    for (size_t w = 0; w < 3; ++w) EXPECT_EQ(zero.params[w], ddp.params[w]) << bucket;
    ASSERT_EQ(zero.epochs.size(), ddp.epochs.size());
    for (size_t i = 0; i < ddp.epochs.size(); ++i)
      EXPECT_EQ(zero.epochs[i].train_loss, ddp.epochs[i].train_loss) << bucket << " row " << i;
  }
}

// One worker: the reduce-scatter and the allgather are copies, the shard is the whole model.
TEST(SimZero, OneWorkerEqualsSerial) {
  const WorkerReport reference = serial(zero_scenario({"workers=1", "epochs=1"}));
  for (const auto& stage : {kStage1, kStage2, kStage3}) {
    const SimRun run = simulate(zero_scenario(with(with(stage, "workers=1"), "epochs=1")));
    ASSERT_TRUE(run.error.empty()) << stage[1] << ": " << run.error;
    EXPECT_EQ(run.params.at(0), reference.final_params) << stage[1];
  }
}

// After 1, 2 and 3 steps every worker holds the same parameters (the allgather of each step).
TEST(SimZero, ReplicasAgreeAfterEachStep) {
  for (int steps = 1; steps <= 3; ++steps) {
    const std::string samples = "data.train_samples=" + std::to_string(48 * steps);
    for (const auto& stage : {kStage1, kStage2, kStage3}) {
      const SimRun run = simulate(zero_scenario(with(with(stage, samples), "epochs=1")));
      ASSERT_TRUE(run.error.empty()) << stage[1] << ": " << run.error;
      ASSERT_EQ(run.params.size(), 3u);
      EXPECT_EQ(run.params[1], run.params[0]) << stage[1] << " after " << steps << " steps";
      EXPECT_EQ(run.params[2], run.params[0]) << stage[1] << " after " << steps << " steps";
    }
  }
}

// A ring reduce-scatter sends each block W-1 times, and so does the ring allgather: the workers
// together send 2 (W-1) x 4 bytes per parameter per step, 2 (W-1)/W x 4 bytes each on average,
// as ddp's ring allreduce.
TEST(SimZero, BytesAreAReduceScatterAndAnAllgatherPerStep) {
  for (const auto& stage : {kStage1, kStage2}) {
    const SimRun run = simulate(zero_scenario(stage));
    ASSERT_TRUE(run.error.empty()) << stage[1] << ": " << run.error;
    uint64_t sent = 0;
    for (const EpochMetrics& e : run.epochs) sent += e.bytes_sent;
    const uint64_t params = run.params.at(0).size(), steps = 2 * 16, workers = 3;
    EXPECT_EQ(sent, steps * 2 * (workers - 1) * 4 * params) << stage[1];
  }
}

// Stage 3 gathers every unit before its forward and again before its backward, and
// reduce-scatters its gradients: 3 (W-1) x 4 bytes per parameter per step over the workers
// (3 (W-1)/W x 4 each), plus the whole model gathered once per epoch (for evaluation and the
// final model).
TEST(SimZero, StageThreeBytesAreTwoAllgathersAndAReduceScatterPerStep) {
  for (const auto& stage : {kStage3, kStage3PerLayer}) {
    const SimRun run = simulate(zero_scenario(stage));
    ASSERT_TRUE(run.error.empty()) << stage[2] << ": " << run.error;
    uint64_t sent = 0;
    for (const EpochMetrics& e : run.epochs) sent += e.bytes_sent;
    const uint64_t params = run.params.at(0).size(), steps = 2 * 16, epochs = 2, workers = 3;
    EXPECT_EQ(sent, (3 * steps + epochs) * (workers - 1) * 4 * params) << stage[2];
  }
}

}  // namespace
}  // namespace syncopate
