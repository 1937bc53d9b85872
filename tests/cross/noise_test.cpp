// Per-step compute noise on the simulator (sim.noise), through the binary: deterministic given
// its seed, different with another seed, unbiased with the lognormal kind, and it makes ddp wait
// for the slowest worker of each step.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"

namespace noise_test {
namespace {
namespace fs = std::filesystem;

// Cost-only ddp of the small MLP on 4 GPUs of one mn5-acc node, 2 epochs of 9 steps.
fs::path run(const std::string& tag, const std::string& noise) {
  const fs::path out = syncopate::scratch_folder("noise") / tag;
  fs::remove_all(out);
  std::string log;
  EXPECT_EQ(syncopate::run_command(
                std::string(SYNCOPATE_BIN) + " run " + SYNCOPATE_SOURCE_DIR +
                    "/tests/cross/small.toml --backend sim --workers 4 --set sim.mode=cost_only"
                    " --set sim.platform=mn5-acc --set sim.platform_params.nodes=1 --quiet " +
                    noise + " --out " + out.string(),
                &log),
            0)
      << log;
  return out;
}

std::vector<syncopate::EpochMetrics> metrics(const fs::path& dir) {
  return syncopate::read_metrics_csv((dir / "metrics.csv").string());
}

TEST(ComputeNoise, DeterministicUnbiasedAndDdpWaitsForTheSlowest) {
  const std::string lognormal = "--set sim.noise.kind=lognormal --set sim.noise.sigma=0.2";
  const fs::path quiet = run("none", "");
  const fs::path a = run("a", lognormal), b = run("b", lognormal);
  const fs::path other = run("other", lognormal + " --set sim.noise.seed=7");
  EXPECT_EQ(syncopate::read_text(a / "metrics.csv"), syncopate::read_text(b / "metrics.csv"));
  EXPECT_NE(syncopate::read_text(a / "metrics.csv"), syncopate::read_text(other / "metrics.csv"));

  const auto base = metrics(quiet), noisy = metrics(a);
  ASSERT_EQ(base.size(), noisy.size());
  double base_compute = 0, noisy_compute = 0;
  double base_end = 0, noisy_end = 0;
  std::map<int, double> epoch_compute;  // without noise every worker computes alike in an epoch
  for (size_t i = 0; i < base.size(); ++i) {
    const double first = epoch_compute.try_emplace(base[i].epoch, base[i].compute_s).first->second;
    EXPECT_EQ(base[i].compute_s, first) << "no noise: every worker alike, epoch " << base[i].epoch;
    base_compute += base[i].compute_s;
    noisy_compute += noisy[i].compute_s;
    base_end = std::max(base_end, base[i].end_s);
    noisy_end = std::max(noisy_end, noisy[i].end_s);
  }
  EXPECT_NE(noisy[0].compute_s, noisy[1].compute_s);
  // Mean 1: over 72 worker-steps at sigma 0.2 the total stays within 10% (4 standard errors).
  EXPECT_NEAR(noisy_compute / base_compute, 1.0, 0.10);
  // Every step ends at its slowest worker: the run takes longer than without noise.
  EXPECT_GT(noisy_end, base_end);
  EXPECT_EQ(noisy.back().bytes_sent, base.back().bytes_sent);
}

TEST(ComputeNoise, SigmaWithoutANoiseKindIsRefused) {
  std::string log;
  EXPECT_EQ(syncopate::run_command(std::string(SYNCOPATE_BIN) + " run " + SYNCOPATE_SOURCE_DIR +
                                       "/tests/cross/small.toml --set sim.noise.sigma=0.1"
                                       " --print-scenario",
                                   &log),
            1)
      << log;
  EXPECT_NE(log.find("sim.noise.sigma: read only with per-step noise"), std::string::npos) << log;
}

}  // namespace
}  // namespace noise_test
