// Cross-backend equivalence: the same scenario and seed on the simulator (emulation) and on real
// MPI processes gives the same per-epoch losses and final weights, bit for bit (the backends run
// the same collective schedules, so the same additions in the same order), and every strategy runs
// under mpirun at 1, 2 and 4 ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"

#if defined(SYNCOPATE_HAVE_NCCL)
#include "backends/cuda/device.hpp"
#endif

namespace cross_backend_test {
namespace {
namespace fs = std::filesystem;

const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";

fs::path scratch_dir() { return syncopate::scratch_folder("cross"); }

using syncopate::mpirun;

// Runs a command; returns its exit status and combined output.
int run(const std::string& cmd, std::string* output = nullptr) {
  const fs::path log = scratch_dir() / "last.log";
  const int status = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  if (output) *output = text.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

struct RunFiles {
  std::map<std::pair<int, int>, double> loss;  // (worker, epoch) -> train_loss
  std::vector<float> model;
};

RunFiles read_run(const fs::path& dir) {
  RunFiles r;
  for (const syncopate::EpochMetrics& e :
       syncopate::read_metrics_csv((dir / "metrics.csv").string()))
    r.loss[{e.worker, e.epoch}] = e.train_loss;
  std::ifstream model(dir / "model.bin", std::ios::binary);
  model.seekg(0, std::ios::end);
  r.model.resize(static_cast<size_t>(model.tellg()) / sizeof(float));
  model.seekg(0);
  model.read(reinterpret_cast<char*>(r.model.data()),
             static_cast<std::streamsize>(r.model.size() * sizeof(float)));
  return r;
}

// Each strategy's own settings: a scenario refuses those that its strategy does not read.
std::string knobs_of(const std::string& strategy) {
  // Several buckets for the MLP's 0.9 MiB of gradients.
  if (strategy == "ddp" || strategy == "hierarchical") return "--set strategy.bucket_mb=0.25";
  if (strategy == "epoch_sync") return "--set strategy.every=4 --set data.blocks=6";
  if (strategy == "epoch_async") return "--set data.blocks=6";
  if (strategy == "local_sgd") return "--set strategy.every=4";
  // Streaming: two fragments, staggered by two steps.
  if (strategy == "diloco") return "--set strategy.every=4 --set strategy.fragments=2";
  if (strategy == "zero") return "--set strategy.stage=2 --set strategy.bucket_mb=0.25";
  return "";
}

std::string syncopate(const std::string& strategy, int workers, const std::string& out,
                      const std::string& extra = "") {
  return std::string(SYNCOPATE_BIN) + " run " + kScenario + " --strategy " + strategy + " " +
         knobs_of(strategy) + " --workers " + std::to_string(workers) + " --out " + out + " " +
         extra;
}

// Runs `strategy` on the simulator and under mpirun with 2 ranks (plus `mpi_extra`), and
// expects the same losses and final weights, bit for bit: the transports run the same schedules,
// so the same additions in the same order (only mpi.transport = "nccl_native" rounds
// differently, and it is not compared here).
void expect_mpi_equals_sim(const std::string& strategy, const std::string& mpi_extra,
                           const std::string& tag) {
  const fs::path sim = scratch_dir() / ("sim-" + strategy);
  const fs::path real = scratch_dir() / (tag + "-" + strategy);
  std::string log;
  if (!fs::exists(sim / "summary.json")) {
    ASSERT_EQ(run(syncopate(strategy, 2, sim.string(), "--backend sim"), &log), 0) << log;
  }
  ASSERT_EQ(
      run(mpirun(2) + " " + syncopate(strategy, 2, real.string(), "--backend mpi " + mpi_extra),
          &log),
      0)
      << log;
  const RunFiles a = read_run(sim), b = read_run(real);
  ASSERT_EQ(a.loss.size(), 4u);  // 2 workers x 2 epochs
  ASSERT_EQ(a.loss.size(), b.loss.size());
  // metrics.csv holds shortest round-trip decimals: equal doubles are equal text.
  for (const auto& [key, loss] : a.loss)
    EXPECT_EQ(loss, b.loss.at(key))
        << strategy << " worker " << key.first << " epoch " << key.second;
  ASSERT_EQ(a.model.size(), 235146u);
  ASSERT_EQ(a.model.size(), b.model.size());
  size_t differing = 0, first = a.model.size();
  for (size_t i = 0; i < a.model.size(); ++i)
    if (std::memcmp(&a.model[i], &b.model[i], sizeof(float)) != 0) {
      ++differing;
      first = std::min(first, i);
    }
  EXPECT_EQ(differing, 0u) << strategy << ": model.bin differs in " << differing
                           << " floats, the first at " << first;
}

class SimVsMpi : public ::testing::TestWithParam<std::string> {};

TEST_P(SimVsMpi, SameLossesAndWeights) { expect_mpi_equals_sim(GetParam(), "", "mpi"); }

INSTANTIATE_TEST_SUITE_P(Strategies, SimVsMpi,
                         ::testing::Values("ddp", "epoch_sync", "local_sgd", "hierarchical",
                                           "diloco", "zero"));

// mpi.transport = "nccl" runs the same schedules through NCCL between two GPUs: the same bits
// as the simulator. Without two GPUs (or without NCCL) every rank reports the same clear error.
class SimVsNccl : public ::testing::TestWithParam<std::string> {};

TEST_P(SimVsNccl, SameLossesAndWeights) {
#if defined(SYNCOPATE_HAVE_NCCL)
  if (syncopate::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  expect_mpi_equals_sim(GetParam(), "--set mpi.transport=nccl", "nccl");
#else
  GTEST_SKIP() << "built without NCCL";
#endif
}

INSTANTIATE_TEST_SUITE_P(Strategies, SimVsNccl,
                         ::testing::Values("ddp", "epoch_sync", "local_sgd", "hierarchical",
                                           "diloco", "zero"));

TEST(MpiFaults, NcclTransportItCannotServeIsReportedOnEveryRank) {
#if defined(SYNCOPATE_HAVE_NCCL)
  if (syncopate::cuda::device_count() >= 2) GTEST_SKIP() << "2 CUDA devices: NCCL can run";
  const std::string reason = "NCCL needs one CUDA device per rank";
#else
  const std::string reason = "needs a build with CUDA and NCCL";
#endif
  std::string log;
  const fs::path out = scratch_dir() / "nccl-refused";
  EXPECT_NE(run(mpirun(2) + " " +
                    syncopate("ddp", 2, out.string(), "--backend mpi --set mpi.transport=nccl"),
                &log),
            0);
  // One line per rank naming the key, the value and the reason.
  size_t count = 0;
  std::stringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.find("error on rank") != std::string::npos &&
        line.find("mpi.transport: \"nccl\"") != std::string::npos &&
        line.find(reason) != std::string::npos)
      ++count;
  EXPECT_EQ(count, 2u) << log;
  EXPECT_FALSE(fs::exists(out));
}

// Every strategy runs to completion under mpirun at 1, 2 and 4 ranks, and the run directory
// written by rank 0 holds every rank's rows.
class EveryStrategyUnderMpi : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(EveryStrategyUnderMpi, RunsAndRecordsEveryRank) {
  const auto& [strategy, ranks] = GetParam();
  const fs::path out = scratch_dir() / ("all-" + strategy + "-" + std::to_string(ranks));
  std::string log;
  ASSERT_EQ(
      run(mpirun(ranks) + " " + syncopate(strategy, ranks, out.string(), "--backend mpi"), &log), 0)
      << log;
  const RunFiles r = read_run(out);
  EXPECT_EQ(r.loss.size(), static_cast<size_t>(2 * ranks));
  for (const auto& [key, loss] : r.loss) EXPECT_TRUE(std::isfinite(loss) && loss > 0);
  ASSERT_TRUE(fs::exists(out / "summary.json"));
  // This machine's shared memory sends by single copy (CMA), used from 2 ranks on.
  const std::string summary = syncopate::read_text(out / "summary.json");
  EXPECT_NE(summary.find(std::string("\"shared_memory_single_copy\": ") + (ranks > 1 ? "1" : "0")),
            std::string::npos)
      << summary;
  // The tests run under OMPI_MCA_mpi_yield_when_idle=1: waiting ranks yielded.
  EXPECT_NE(summary.find("\"mpi_yield_when_idle\": 1"), std::string::npos) << summary;
}

// Time counts training only: every rank's first epoch starts at a common time 0 taken after MPI
// start-up and data loading (reading Fashion-MNIST takes a few tenths of a second), not when the
// process started.
TEST(MpiTiming, TrainingTimeExcludesStartUpAndDataLoading) {
  const fs::path out = scratch_dir() / "timing";
  std::string log;
  ASSERT_EQ(run(mpirun(2) + " " + std::string(SYNCOPATE_BIN) + " run " + SYNCOPATE_SOURCE_DIR +
                    "/scenarios/fmnist-mlp.toml --backend mpi --workers 2 --strategy ddp" +
                    " --epochs 1 --set data.train_samples=1000 --set data.test_samples=100" +
                    " --quiet --out " + out.string(),
                &log),
            0)
      << log;
  for (const syncopate::EpochMetrics& e : syncopate::read_metrics_csv(out / "metrics.csv"))
    EXPECT_LT(e.start_s, 0.2) << "rank " << e.worker;  // 0.7 s when it included loading
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategyUnderMpi,
                         ::testing::Combine(::testing::Values("serial", "ddp", "epoch_sync",
                                                              "epoch_async", "local_sgd",
                                                              "hierarchical", "diloco", "zero"),
                                            ::testing::Values(1, 2, 4)));

TEST(MpiFaults, WrongRankCountIsReportedOnEveryRank) {
  std::string log;
  const fs::path out = scratch_dir() / "wrong-count";
  EXPECT_NE(run(mpirun(2) + " " + syncopate("ddp", 3, out.string(), "--backend mpi"), &log), 0);
  size_t count = 0;
  for (size_t at = log.find("error on rank"); at != std::string::npos;
       at = log.find("error on rank", at + 1))
    ++count;
  EXPECT_EQ(count, 2u) << log;
  EXPECT_FALSE(fs::exists(out));
}

TEST(MpiFaults, NanLossEndsTheJobNamingWorkerEpochAndStep) {
  std::string log;
  const fs::path out = scratch_dir() / "nan";
  EXPECT_NE(run("timeout 120 " + mpirun(2) + " " +
                    syncopate("ddp", 2, out.string(),
                              "--backend mpi --set schedule.lr=1000 --set data.normalize=false"),
                &log),
            0);
  // Both ranks diverge at the same step (ddp: the same averaged gradients); the message names
  // the worker, the epoch and the step.
  EXPECT_TRUE(log.find("worker 0, epoch 0, step ") != std::string::npos ||
              log.find("worker 1, epoch 0, step ") != std::string::npos)
      << log;
  EXPECT_NE(log.find("the training loss is"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out / "summary.json"));
}

// A rank that dies mid-training (SIGKILL): the job ends with a message naming it, in bounded
// time, instead of hanging.
TEST(MpiFaults, ARankThatDiesEndsTheJob) {
  const fs::path out = scratch_dir() / "killed";
  const std::string train = syncopate("ddp", 2, out.string(), "--backend mpi --epochs 500");
  // Rank 1 starts training, then is killed after a second; rank 0 trains on.
  const std::string script = "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then " + train +
                             " & pid=$!; sleep 1; kill -9 $pid; wait $pid; exit 137; else exec " +
                             train + "; fi";
  std::string log;
  const auto start = std::chrono::steady_clock::now();
  const int status = run("timeout 120 " + mpirun(2) + " bash -c '" + script + "'", &log);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(status, 124) << "the job hung until the timeout:\n" << log;
  EXPECT_LT(seconds, 60.0) << log;
  // Open MPI names the process as [[job,1],rank] and says how it ended.
  EXPECT_NE(log.find(",1],1]"), std::string::npos) << log;
  EXPECT_NE(log.find("non-zero status"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out / "summary.json"));
}

// A rank that hangs (SIGSTOP) mid-training: the other one's watchdog ends the job, and its
// message, naming the rank, the operation and the timeout, reaches the user before MPI_Abort.
TEST(MpiFaults, AHangingPeerEndsTheJobWithTheWatchdogsMessage) {
  const fs::path out = scratch_dir() / "stopped";
  const std::string train = syncopate("ddp", 2, out.string(), "--backend mpi --epochs 500");
  // Rank 1 starts training (MPI is up when the process has its 5 threads), then stops after a
  // second; a detached sleeper kills it later in case mpirun's clean-up does not reach it.
  const std::string script =
      "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then " + train +
      " & pid=$!; while [ $(ls /proc/$pid/task | wc -l) -lt 5 ]; do sleep 0.2; done; sleep 1; "
      "kill -STOP $pid; (sleep 40; kill -9 $pid) & wait $pid; exit 1; else exec " +
      train + "; fi";
  std::string log;
  const int status = run(
      "SYNCOPATE_MPI_WATCHDOG_S=3 timeout 120 " + mpirun(2) + " bash -c '" + script + "'", &log);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(status, 124) << "the job hung until the timeout:\n" << log;
  EXPECT_NE(log.find("error on rank 0: communication failed: "), std::string::npos) << log;
  EXPECT_NE(log.find("a peer died or hangs (timeout 3 s"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out / "summary.json"));
}

}  // namespace
}  // namespace cross_backend_test
