// diloco through the binary: at outer lr 1 without momentum it is local_sgd bit for bit (the
// simulator at 2 and 3 workers, MPI at 2 ranks); with the paper's outer optimizer it trains and
// differs; with one worker on the local backend at outer lr 1 it is serial SGD.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cross/binary_run.hpp"

namespace diloco_test {
namespace {
namespace fs = std::filesystem;

using syncopate::testing::expect_same;
using syncopate::testing::RunResult;

// Runs the small cross-backend scenario with `args` into a fresh folder `tag`.
RunResult run_binary(const std::string& tag, const std::string& args,
                     const std::string& launcher = "") {
  return syncopate::testing::run_binary("diloco", tag, args, launcher);
}

using syncopate::mpirun;

const std::string kPlainOuter = " --set strategy.outer_lr=1 --set strategy.outer_momentum=0";

// 600 samples, batch 16: 19 steps per epoch at 2 workers, 13 at 3; H = 4 leaves steps after the
// last synchronisation, so both end with one more average.
TEST(Diloco, OuterLrOneWithoutMomentumIsLocalSgdBitForBit) {
  // loopback holds 2 GPUs; 3 workers run on one mn5-acc node.
  for (const char* workers : {"2", "3"}) {
    const std::string platform =
        std::string(workers) == "3" ? " --set sim.platform=mn5-acc --set sim.fidelity=flow" : "";
    const std::string common =
        std::string(" --backend sim --workers ") + workers + " --set strategy.every=4" + platform;
    const RunResult local =
        run_binary(std::string("local_sgd-") + workers, "--strategy local_sgd" + common);
    const RunResult diloco =
        run_binary(std::string("diloco-") + workers, "--strategy diloco" + common + kPlainOuter);
    expect_same(diloco, local, std::string("sim, workers ") + workers);
  }
  const std::string mpi = " --backend mpi --workers 2 --set strategy.every=4";
  expect_same(run_binary("mpi-diloco", "--strategy diloco" + mpi + kPlainOuter, mpirun(2)),
              run_binary("mpi-local_sgd", "--strategy local_sgd" + mpi, mpirun(2)), "mpi, 2 ranks");
}

// The paper's outer optimizer (lr 0.7, Nesterov momentum 0.9) trains: the loss falls from the
// first epoch to the second, and the weights are not local_sgd's.
TEST(Diloco, ThePapersOuterOptimizerTrainsAndDiffersFromLocalSgd) {
  const std::string common = " --backend sim --workers 2 --set strategy.every=4";
  const RunResult diloco = run_binary("paper", "--strategy diloco" + common);
  const RunResult local = run_binary("paper-local_sgd", "--strategy local_sgd" + common);
  ASSERT_EQ(diloco.rows.size(), 4u);
  for (const syncopate::EpochMetrics& e : diloco.rows) EXPECT_TRUE(std::isfinite(e.train_loss));
  for (const syncopate::EpochMetrics& e : diloco.rows)
    if (e.epoch == 1) {
      const auto first = std::find_if(diloco.rows.begin(), diloco.rows.end(), [&](const auto& f) {
        return f.epoch == 0 && f.worker == e.worker;
      });
      ASSERT_NE(first, diloco.rows.end());
      EXPECT_LT(e.train_loss, first->train_loss) << "worker " << e.worker;
    }
  ASSERT_EQ(diloco.model.size(), local.model.size());
  EXPECT_NE(
      std::memcmp(diloco.model.data(), local.model.data(), diloco.model.size() * sizeof(float)), 0);
}

// One worker on the local backend: the outer step at lr 1 without momentum is the identity, so
// diloco is serial SGD, bit for bit (with streaming fragments too).
TEST(Diloco, OneWorkerOnTheLocalBackendIsSerial) {
  const RunResult serial =
      run_binary("local-serial", "--strategy serial --backend local --workers 1");
  const RunResult diloco =
      run_binary("local-diloco",
                 "--strategy diloco --backend local --workers 1 --set strategy.every=4"
                 " --set strategy.fragments=2" +
                     kPlainOuter);
  ASSERT_FALSE(serial.model.empty());
  ASSERT_EQ(serial.model.size(), diloco.model.size());
  EXPECT_EQ(
      std::memcmp(serial.model.data(), diloco.model.data(), serial.model.size() * sizeof(float)),
      0);
}

// A sweep over the outer learning rate, then its report (cost-only: the outer update moves no
// bytes of its own, so both points send the same).
TEST(Diloco, SweepsOverTheOuterLearningRateAndReports) {
  const fs::path dir = syncopate::scratch_folder("diloco") / "sweep";
  const std::string bin = SYNCOPATE_BIN;
  std::string log;
  ASSERT_EQ(syncopate::run_command(
                bin + " sweep " + SYNCOPATE_SOURCE_DIR + "/tests/cross/small.toml" +
                    " --set backend=sim --set sim.mode=cost_only --set sim.fidelity=analytic"
                    " --set eval_every_epoch=false --set data.train_samples=4096 --strategy"
                    " diloco --set strategy.every=4 --set strategy.outer_lr=0.7,1 --workers 2"
                    " --quiet --out " +
                    dir.string(),
                &log),
            0)
      << log;
  const std::string csv = syncopate::read_text(dir / "sweep.csv");
  EXPECT_NE(csv.find("diloco,2,0.7,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("diloco,2,1,"), std::string::npos) << csv;
  ASSERT_EQ(syncopate::run_command(bin + " report " + dir.string(), &log), 0) << log;
  EXPECT_NE(syncopate::read_text(dir / "report.md").find("2 of 2 points finished."),
            std::string::npos);
}

}  // namespace
}  // namespace diloco_test
