// A tiny decoder-only transformer written out in a scenario (tests/cross/tiny-transformer.toml:
// embedding with positions, causal attention and GELU MLP blocks with skips and layer norms)
// trains for real through the syncopate binary: in emulation on the simulator at 2 workers
// (ddp) its loss is finite and falls below that of predicting the mean, and under mpirun at 2
// ranks it gives the same losses and final weights, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"

namespace tiny_transformer_test {
namespace {
namespace fs = std::filesystem;

const std::string kSource = SYNCOPATE_SOURCE_DIR;
constexpr size_t kParams = 2609;       // embedding 224, blocks 1,152 + 1,104, norm 32, head 129
constexpr double kTargetVar = 0.0182;  // the targets' variance: predicting their mean
constexpr int kEpochs = 6;

using syncopate::mpirun;

std::string run_tiny(const fs::path& out, const std::string& extra) {
  return std::string(SYNCOPATE_BIN) + " run " + kSource + "/tests/cross/tiny-transformer.toml" +
         " --set 'data.path=\"" + kSource + "/tests/cross/tokens.csv\"' --quiet --out " +
         out.string() + " " + extra;
}

std::map<std::pair<int, int>, double> losses(const fs::path& dir) {
  std::map<std::pair<int, int>, double> out;
  for (const syncopate::EpochMetrics& e : syncopate::read_metrics_csv(dir / "metrics.csv"))
    out[{e.worker, e.epoch}] = e.train_loss;
  return out;
}

std::vector<float> weights(const fs::path& dir) {
  std::ifstream model(dir / "model.bin", std::ios::binary);
  model.seekg(0, std::ios::end);
  std::vector<float> w(static_cast<size_t>(model.tellg()) / sizeof(float));
  model.seekg(0);
  model.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(w.size() * 4));
  return w;
}

TEST(TinyTransformerThroughTheBinary, LearnsInEmulationAndMpiGivesTheSameBits) {
  const fs::path dir = syncopate::scratch_folder("tiny-transformer");
  const fs::path sim = dir / "sim", mpi = dir / "mpi";
  std::string log;
  ASSERT_EQ(syncopate::run_command(run_tiny(sim, "--backend sim"), &log), 0) << log;
  const auto sim_loss = losses(sim);
  ASSERT_EQ(sim_loss.size(), size_t{2 * kEpochs});
  for (int worker = 0; worker < 2; ++worker) {
    const double first = sim_loss.at({worker, 0}), last = sim_loss.at({worker, kEpochs - 1});
    EXPECT_TRUE(std::isfinite(first) && std::isfinite(last)) << first << " " << last;
    EXPECT_LT(last, 0.1 * first) << "worker " << worker;
    EXPECT_LT(last, kTargetVar) << "worker " << worker;  // it counts better than the mean
  }
  const std::vector<float> a = weights(sim);
  ASSERT_EQ(a.size(), kParams);

  ASSERT_EQ(syncopate::run_command(mpirun(2) + " " + run_tiny(mpi, "--backend mpi"), &log), 0)
      << log;
  const auto mpi_loss = losses(mpi);
  ASSERT_EQ(mpi_loss.size(), sim_loss.size());
  for (const auto& [key, loss] : sim_loss)
    EXPECT_EQ(loss, mpi_loss.at(key)) << "worker " << key.first << " epoch " << key.second;
  const std::vector<float> b = weights(mpi);
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace tiny_transformer_test
