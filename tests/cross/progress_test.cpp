// The progress of `syncopate run`: redrawn in place under a pseudo-terminal, plain lines when
// piped, nothing with --quiet, and under mpirun from rank 0 only.
#include <gtest/gtest.h>

#include <string>

#include "tests/common/run_command.hpp"

namespace progress_test {
namespace {

const std::string kBin = SYNCOPATE_BIN;
const std::string kRun = kBin +
                         " run --epochs 2 --set data.train_samples=4000"
                         " --set data.test_samples=500 --out ";

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string out_dir(const std::string& name) {
  return (syncopate::scratch_folder("progress") / name).string();
}

TEST(Progress, PipedOutputGetsPlainLines) {
  std::string out;
  ASSERT_EQ(syncopate::run_command(kRun + out_dir("piped"), &out), 0) << out;
  EXPECT_EQ(count(out, "\r"), 0u) << out;
  EXPECT_NE(out.find("epoch 1/2  step "), std::string::npos) << out;
  EXPECT_NE(out.find("epoch 2/2  step 16/16  loss "), std::string::npos) << out;
  EXPECT_NE(out.find("simulated "), std::string::npos) << out;
}

TEST(Progress, ATerminalGetsOneLineRedrawnInPlace) {
  std::string out;
  // script(1) runs the command on a pseudo-terminal.
  ASSERT_EQ(syncopate::run_command("script -qec '" + kRun + out_dir("tty") + "' /dev/null", &out),
            0)
      << out;
  EXPECT_GE(count(out, "\r\033[K"), 2u) << out;  // redrawn, at least at each epoch's end
  EXPECT_NE(out.find("\r\033[Kepoch 2/2  step 16/16"), std::string::npos) << out;
}

TEST(Progress, QuietPrintsNone) {
  std::string out;
  ASSERT_EQ(syncopate::run_command(kRun + out_dir("quiet") + " --quiet", &out), 0) << out;
  EXPECT_EQ(out.find("epoch 1/2  step"), std::string::npos) << out;
  EXPECT_NE(out.find("final test accuracy"), std::string::npos) << out;
}

TEST(Progress, UnderMpiOnlyRankZeroPrints) {
  std::string out;
  ASSERT_EQ(syncopate::run_command(syncopate::mpirun(2) + " " + kRun + out_dir("mpi") +
                                       " --backend mpi --workers 2 --strategy ddp",
                                   &out),
            0)
      << out;
  // ddp: 4000 samples in global batches of 2 x 64, 32 steps; one line per epoch, not one per rank.
  EXPECT_EQ(count(out, "epoch 2/2  step 32/32  loss"), 1u) << out;
  EXPECT_NE(out.find("  time "), std::string::npos) << out;  // measured, not simulated
}

}  // namespace
}  // namespace progress_test
