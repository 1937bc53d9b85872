// strategy.compression = fp16 / bf16 through the binary: the simulator and MPI agree bit for bit
// (2 and 4 ranks), bytes are halved, the values are really rounded, one worker is serial, the
// simulated time of a bandwidth-bound run falls, fmnist-mlp keeps its accuracy, and the
// combinations that do not compress are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cross/binary_run.hpp"

namespace compression_test {
namespace {
namespace fs = std::filesystem;

using syncopate::testing::expect_same;
using syncopate::testing::RunResult;

RunResult run_binary(const std::string& tag, const std::string& args,
                     const std::string& launcher = "",
                     const std::string& scenario = "/tests/cross/small.toml") {
  return syncopate::testing::run_binary("compression", tag, args, launcher, scenario);
}

using syncopate::mpirun;

uint64_t total_bytes(const RunResult& r) {
  uint64_t total = 0;
  for (const auto& row : r.rows) total += row.bytes_sent;
  return total;
}

const std::string kFour = " --workers 4 --set sim.platform=mn5-acc --set strategy.algorithm=ring";

TEST(Compression, DdpSimAndMpiAgreeBitForBitAtTwoAndFourRanks) {
  for (const char* wire : {"fp16", "bf16"}) {
    const std::string ddp = std::string("--strategy ddp --set strategy.compression=") + wire;
    expect_same(run_binary(std::string("sim2-") + wire, ddp + " --backend sim"),
                run_binary(std::string("mpi2-") + wire, ddp + " --backend mpi", mpirun(2)),
                std::string("2 ranks ") + wire);
  }
  const std::string ddp = "--strategy ddp --set strategy.compression=fp16" + kFour;
  expect_same(run_binary("sim4", ddp + " --backend sim"),
              run_binary("mpi4", ddp + " --backend mpi", mpirun(4)), "4 ranks fp16");
}

TEST(Compression, HalvesTheBytesAndReallyRoundsTheValues) {
  const std::string common = " --backend sim --strategy ddp --set strategy.algorithm=ring";
  const RunResult fp32 = run_binary("bytes-fp32", common);
  for (const char* wire : {"fp16", "bf16"}) {
    const RunResult half =
        run_binary(std::string("bytes-") + wire, common + " --set strategy.compression=" + wire);
    ASSERT_EQ(half.rows.size(), fp32.rows.size()) << wire;
    for (size_t i = 0; i < half.rows.size(); ++i) {
      EXPECT_EQ(2 * half.rows[i].bytes_sent, fp32.rows[i].bytes_sent) << wire << " row " << i;
      EXPECT_EQ(2 * half.rows[i].bytes_recv, fp32.rows[i].bytes_recv) << wire << " row " << i;
      EXPECT_NEAR(half.rows[i].train_loss, fp32.rows[i].train_loss, 0.05) << wire;
    }
    ASSERT_EQ(half.model.size(), fp32.model.size());
    EXPECT_NE(std::memcmp(half.model.data(), fp32.model.data(), half.model.size() * sizeof(float)),
              0)
        << wire << ": the rounding changed nothing";
  }
}

TEST(Compression, OneWorkerIsSerialTraining) {
  const std::string one = " --backend local --workers 1";
  const RunResult serial = run_binary("serial-1", "--strategy serial" + one);
  expect_same(run_binary("ddp-1", "--strategy ddp --set strategy.compression=fp16" + one), serial,
              "ddp fp16, one worker");
  expect_same(run_binary("sim-ddp-1",
                         "--strategy ddp --set strategy.compression=bf16 "
                         "--backend sim --workers 1"),
              serial, "sim ddp bf16, one worker");
}

TEST(Compression, WeightAveragesAgreeOnSimAndMpiAndHalveTheirBytes) {
  for (const std::string strategy : {"epoch_sync", "local_sgd", "diloco"}) {
    std::string args = "--strategy " + strategy;
    if (strategy != "epoch_sync") args += " --set strategy.every=4";
    const RunResult fp32 = run_binary(strategy + "-fp32", args + " --backend sim");
    args += " --set strategy.compression=bf16";
    const RunResult sim = run_binary(strategy + "-sim", args + " --backend sim");
    expect_same(sim, run_binary(strategy + "-mpi", args + " --backend mpi", mpirun(2)), strategy);
    EXPECT_EQ(2 * total_bytes(sim), total_bytes(fp32)) << strategy;
    EXPECT_NE(std::memcmp(sim.model.data(), fp32.model.data(), sim.model.size() * sizeof(float)), 0)
        << strategy;
  }
}

// zero's reduce-scatters and allgathers in a 16-bit format, every stage: the simulator and MPI
// agree bit for bit, every byte is halved, and the values are really rounded.
TEST(Compression, ZeroAgreesOnSimAndMpiAndHalvesItsBytesAtEveryStage) {
  for (const std::string stage : {"1", "2", "3"}) {
    std::string args = "--strategy zero --set strategy.stage=" + stage;
    if (stage != "1") args += " --set strategy.bucket_mb=0.25";
    const RunResult fp32 = run_binary("zero" + stage + "-fp32", args + " --backend sim");
    args += stage == "2" ? " --set strategy.compression=fp16" : " --set strategy.compression=bf16";
    const RunResult sim = run_binary("zero" + stage + "-sim", args + " --backend sim");
    expect_same(sim, run_binary("zero" + stage + "-mpi", args + " --backend mpi", mpirun(2)),
                "zero stage " + stage);
    EXPECT_EQ(2 * total_bytes(sim), total_bytes(fp32)) << "stage " << stage;
    ASSERT_EQ(sim.model.size(), fp32.model.size());
    EXPECT_NE(std::memcmp(sim.model.data(), fp32.model.data(), sim.model.size() * sizeof(float)), 0)
        << "stage " << stage << ": the rounding changed nothing";
    ASSERT_EQ(sim.rows.size(), fp32.rows.size());
    EXPECT_NEAR(sim.rows.back().train_loss, fp32.rows.back().train_loss, 0.05) << stage;
  }
}

// ResNet-50 cost-only on 16 GPUs: the gradient allreduces dominate; in bf16 they take half the
// bytes and the simulated epoch is shorter.
TEST(Compression, SimulatedTimeReflectsTheCompressedSize) {
  const std::string args =
      " --workers 16 --set sim.cost_only_train_samples=2048 --set strategy.algorithm=ring";
  const std::string scenario = "/scenarios/sim-resnet50-ddp-1024.toml";
  const RunResult fp32 = run_binary("resnet-fp32", args, "", scenario);
  const RunResult bf16 =
      run_binary("resnet-bf16", args + " --set strategy.compression=bf16", "", scenario);
  ASSERT_FALSE(fp32.rows.empty());
  ASSERT_EQ(fp32.rows.size(), bf16.rows.size());
  EXPECT_EQ(2 * total_bytes(bf16), total_bytes(fp32));
  EXPECT_LT(bf16.rows.back().end_s, fp32.rows.back().end_s);
}

// fmnist-mlp, 2 workers on the simulator, 3 epochs of 12,000 samples: fp16 and bf16 end within
// one point of fp32's test accuracy.
TEST(Compression, FmnistMlpAccuracyStaysCloseToFp32) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  const std::string args =
      " --backend sim --workers 2 --strategy ddp --set epochs=3 --set data.train_samples=12000 "
      "--set sim.platform=loopback";
  const std::string scenario = "/scenarios/fmnist-mlp.toml";
  const RunResult fp32 = run_binary("fmnist-fp32", args, "", scenario);
  ASSERT_FALSE(fp32.rows.empty());
  const double reference = fp32.rows.back().test_accuracy;
  EXPECT_GT(reference, 0.8);
  for (const char* wire : {"fp16", "bf16"}) {
    const RunResult half = run_binary(std::string("fmnist-") + wire,
                                      args + " --set strategy.compression=" + wire, "", scenario);
    ASSERT_FALSE(half.rows.empty()) << wire;
    EXPECT_NEAR(half.rows.back().test_accuracy, reference, 0.01) << wire;
  }
}

// PowerSGD at rank 2 on ddp: the simulator and MPI agree bit for bit, and each step allreduces
// (n + m) r elements per weight matrix plus the biases, in fp32 (the MLP 784-256-128-10).
TEST(PowerSgd, SimAndMpiAgreeAndTheBytesFollowTheFormula) {
  const std::string args =
      "--strategy ddp --set strategy.compression=powersgd --set strategy.powersgd_rank=2 "
      "--set strategy.algorithm=ring";
  const RunResult sim = run_binary("powersgd-sim", args + " --backend sim");
  expect_same(sim, run_binary("powersgd-mpi", args + " --backend mpi", mpirun(2)), "powersgd");
  const RunResult fp32 =
      run_binary("powersgd-fp32", "--strategy ddp --set strategy.algorithm=ring --backend sim");
  const uint64_t params = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;
  const uint64_t sent = (256 + 784) * 2 + (128 + 256) * 2 + (10 + 128) * 2 + 256 + 128 + 10;
  ASSERT_EQ(sim.rows.size(), fp32.rows.size());
  for (size_t i = 0; i < sim.rows.size(); ++i)  // at 2 ranks a ring sends each element once
    EXPECT_EQ(sim.rows[i].bytes_sent * params, fp32.rows[i].bytes_sent * sent) << "row " << i;
  EXPECT_LT(sim.rows.back().train_loss, sim.rows.front().train_loss);  // it trains
}

// At rank min(n, m) the factors carry the whole gradient: ddp's run up to rounding.
TEST(PowerSgd, FullRankIsUncompressedDdpUpToRounding) {
  const RunResult full =
      run_binary("powersgd-full",
                 "--strategy ddp --backend sim --set strategy.compression=powersgd "
                 "--set strategy.powersgd_rank=1000");
  const RunResult ddp = run_binary("powersgd-ddp", "--strategy ddp --backend sim");
  ASSERT_FALSE(full.rows.empty());
  ASSERT_EQ(full.rows.size(), ddp.rows.size());
  for (size_t i = 0; i < full.rows.size(); ++i)
    EXPECT_NEAR(full.rows[i].train_loss, ddp.rows[i].train_loss, 1e-3) << "row " << i;
  ASSERT_EQ(full.model.size(), ddp.model.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < full.model.size(); ++i) {
    diff += std::fabs(double{full.model[i]} - ddp.model[i]);
    norm += std::fabs(double{ddp.model[i]});
  }
  EXPECT_LT(diff / norm, 1e-3);
}

std::string refusal(const std::string& args) {
  std::string log;
  const std::string cmd = std::string(SYNCOPATE_BIN) + " run " + SYNCOPATE_SOURCE_DIR +
                          "/tests/cross/small.toml --print-scenario " + args;
  EXPECT_NE(syncopate::run_command(cmd, &log), 0) << cmd << "\n" << log;
  return log;
}

TEST(Compression, RefusesWhatDoesNotCompress) {
  const std::string powersgd = refusal("--strategy epoch_sync --set strategy.compression=powersgd");
  EXPECT_NE(powersgd.find("strategy.compression"), std::string::npos) << powersgd;
  EXPECT_NE(powersgd.find("powersgd compresses ddp's gradients only"), std::string::npos)
      << powersgd;
  const std::string async = refusal("--strategy epoch_async --set strategy.compression=fp16");
  EXPECT_NE(async.find("read only by ddp and hierarchical"), std::string::npos) << async;
  const std::string zero = refusal("--strategy zero --set strategy.compression=powersgd");
  EXPECT_NE(zero.find("powersgd compresses ddp's gradients only"), std::string::npos) << zero;
  const std::string master = refusal(
      "--strategy epoch_sync --set strategy.aggregation=master --set strategy.compression=fp16");
  EXPECT_NE(master.find("through the master"), std::string::npos) << master;
}

// Both NCCL transports reduce in the 16-bit formats (their bits: tests/mpi/nccl_test.cpp, which
// needs a GPU per rank), so the scenario takes them.
TEST(Compression, TheNcclTransportsTakeSixteenBitFormats) {
  for (const std::string transport : {"nccl", "nccl_native"}) {
    std::string log;
    const std::string cmd = std::string(SYNCOPATE_BIN) + " run " + SYNCOPATE_SOURCE_DIR +
                            "/tests/cross/small.toml --print-scenario --backend mpi --set "
                            "mpi.transport=" +
                            transport + " --strategy zero --set strategy.compression=bf16";
    ASSERT_EQ(syncopate::run_command(cmd, &log), 0) << cmd << "\n" << log;
    EXPECT_NE(log.find("transport = '" + transport + "'"), std::string::npos) << log;
    EXPECT_NE(log.find("compression = 'bf16'"), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace compression_test
