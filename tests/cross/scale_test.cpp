// The simulator at scale, through the binary: cost-only ResNet-50 ddp on 4,096 GPUs of mn5-acc
// (1,024 nodes) completes, and every worker carries a ring allreduce's volume on every step; the
// scale benchmarks (and the fuzzing script) refuse settings they would ignore.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"

namespace scale_test {
namespace {
namespace fs = std::filesystem;

TEST(Scale, FourThousandGpuDdpEpochCompletesWithRingVolumes) {
  const fs::path out = syncopate::scratch_folder("scale") / "resnet50-4096";
  fs::remove_all(out);
  std::string log;
  ASSERT_EQ(
      syncopate::run_command("cd " + std::string(SYNCOPATE_SOURCE_DIR) + " && " + SYNCOPATE_BIN +
                                 " run scenarios/sim-resnet50-ddp-1024.toml --workers 4096"
                                 " --set sim.platform_params.nodes=1024 --quiet --out " +
                                 out.string(),
                             &log),
      0)
      << log;
  const std::vector<syncopate::EpochMetrics> rows =
      syncopate::read_metrics_csv((out / "metrics.csv").string());
  ASSERT_EQ(rows.size(), 4096u);
  // ImageNet's 1,281,167 samples at one per GPU: 313 steps, each one allreduce of ResNet-50's
  // 25,557,032 float gradients, of which a ring (or reduce-scatter + allgather) sends
  // 2 (W - 1) / W per rank. Chunks of unequal size make ranks differ by a few bytes per step.
  const double workers = 4096, steps = 313, gradient_bytes = 4.0 * 25557032;
  const double expected = steps * 2 * (workers - 1) / workers * gradient_bytes;
  uint64_t sent = 0, received = 0;
  for (const syncopate::EpochMetrics& e : rows) {
    sent += e.bytes_sent;
    received += e.bytes_recv;
    EXPECT_NEAR(static_cast<double>(e.bytes_sent), expected, 1e-5 * expected) << e.worker;
    EXPECT_GT(e.end_s, 0.0) << e.worker;
    EXPECT_LT(e.end_s, 60.0) << e.worker;  // 4.6 s of simulated time when measured
  }
  EXPECT_EQ(sent, received);  // every byte sent is received by someone
}

// The scale benchmarks take their settings from the environment: an argument, an unknown STEPS or
// a GPU count that the 4-GPU nodes cannot hold is refused before anything runs, not ignored.
// So is a fuzzing time that libFuzzer would read as "no limit".
TEST(Scripts, RefuseArgumentsAndSettingsTheyWouldIgnore) {
  const std::string bench = std::string(SYNCOPATE_SOURCE_DIR) + "/bench/";
  const std::string fuzz = std::string(SYNCOPATE_SOURCE_DIR) + "/scripts/fuzz.sh";
  const struct {
    std::string command;
    const char* message;
  } cases[] = {
      {bench + "sim_scale.sh --gpus 1024", "sim_scale.sh: takes no arguments (got '--gpus 1024')"},
      {"STEPS=two " + bench + "sim_scale.sh", "sim_scale.sh: STEPS='two'; allowed: epoch, one"},
      {"GPUS='1024 1026' " + bench + "sim_scale.sh",
       "sim_scale.sh: GPUS='1024 1026': '1026'; allowed: positive multiples of 4"},
      {"GPUS=many " + bench + "sim_scale.sh", "'many'; allowed: positive multiples of 4"},
      {bench + "sim_fidelity.sh 256", "sim_fidelity.sh: takes no arguments (got '256')"},
      {fuzz + " 20s", "fuzz: seconds per target '20s'; allowed: a whole number >= 1"},
      {fuzz + " 0", "fuzz: seconds per target '0'"},
      {fuzz + " 5 6", "fuzz: at most one argument"},
  };
  for (const auto& c : cases) {
    std::string log;
    EXPECT_EQ(syncopate::run_command(c.command, &log), 2) << c.command << "\n" << log;
    EXPECT_NE(log.find(c.message), std::string::npos) << c.command << "\n" << log;
    EXPECT_EQ(log.find("GPUs  fidelity"), std::string::npos) << "a grid ran: " << c.command;
  }
}

}  // namespace
}  // namespace scale_test
