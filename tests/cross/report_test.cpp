// `syncopate report` on real run directories written by the binary: a simulated run and a sweep
// get report.md and their plots; a directory that is neither is refused with exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/run_command.hpp"

namespace report_test {
namespace {
namespace fs = std::filesystem;

const std::string kBin = SYNCOPATE_BIN;
const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/scenarios/fmnist-mlp.toml";

fs::path scratch() { return syncopate::scratch_folder("report"); }
int run(const std::string& cmd, std::string* output) { return syncopate::run_command(cmd, output); }
std::string read(const fs::path& path) { return syncopate::read_text(path); }

TEST(Report, SimulatedRunGetsItsReportAndPlots) {
  const fs::path dir = scratch() / "run";
  fs::remove_all(dir);
  std::string out;
  ASSERT_EQ(run(kBin + " run " + kScenario +
                    " --backend sim --workers 2 --strategy epoch_sync --epochs 2"
                    " --set data.train_samples=1024 --set data.test_samples=256 --out " +
                    dir.string(),
                &out),
            0)
      << out;
  ASSERT_EQ(run(kBin + " report " + dir.string(), &out), 0) << out;
  const std::string md = read(dir / "report.md");
  EXPECT_NE(md.find("| strategy | epoch_sync |"), std::string::npos) << md;
  EXPECT_NE(md.find("training time (simulated s)"), std::string::npos) << md;
  for (const char* png : {"accuracy.png", "phases.png", "bytes.png", "timeline.png"}) {
    EXPECT_TRUE(fs::exists(dir / png)) << png;
    EXPECT_NE(md.find(std::string("(") + png + ")"), std::string::npos) << png;
  }
}

TEST(Report, SweepGetsScalingPlots) {
  const fs::path dir = scratch() / "sweep";
  fs::remove_all(dir);
  std::string out;
  ASSERT_EQ(run(kBin + " sweep " + kScenario +
                    " --set backend=sim --set sim.mode=cost_only --set sim.fidelity=analytic"
                    " --set eval_every_epoch=false --set data.train_samples=4096"
                    " --strategy ddp,epoch_sync --workers 2,4 --quiet --out " +
                    dir.string(),
                &out),
            0)
      << out;
  ASSERT_EQ(run(kBin + " report " + dir.string(), &out), 0) << out;
  EXPECT_NE(read(dir / "report.md").find("4 of 4 points finished."), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "scaling.png"));
}

TEST(Report, NeitherARunNorASweepExitsWith2) {
  std::string out;
  const fs::path empty = scratch() / "empty";
  fs::create_directories(empty);
  EXPECT_EQ(run(kBin + " report " + empty.string(), &out), 2);
  EXPECT_NE(out.find("not a run directory"), std::string::npos) << out;
}

}  // namespace
}  // namespace report_test
