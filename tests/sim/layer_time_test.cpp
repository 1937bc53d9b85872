// Measured per-layer times in a host profile ([[layer]] tables, `syncopate calibrate`): reading
// them, their errors, and the simulator's compute model using them for matching layer passes
// while every other cost keeps the op kind's speed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/base/check.hpp"
#include "core/nn/model.hpp"
#include "tests/common/scratch.hpp"

namespace syncopate::sim {
namespace {

namespace fs = std::filesystem;

const std::string kHead = R"(name = "measured"
memory_bandwidth = 1e10
step_overhead = 0
[flops_per_s]
gemm = 1e11
conv = 1e11
pool = 1e10
elementwise = 1e10
loss = 1e10
optimizer = 1e10
)";

// A dense 784 -> 10 layer measured at batch 4, and relu at [4, 10].
const std::string kLayers = R"(
[[layer]]
kind = "dense"
input = [4, 784]
output = [4, 10]
forward_s = 0.25
backward_s = 0.5

[[layer]]
kind = "relu"
input = [4, 10]
output = [4, 10]
forward_s = 0.125
backward_s = 0
)";

std::string write_profile(const std::string& name, const std::string& text) {
  const fs::path path = scratch_folder("layer-time") / (name + ".toml");
  std::ofstream(path) << text;
  return path.string();
}

std::unique_ptr<Model> dense_relu(int64_t batch) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(dense(784, 10));
  layers.push_back(relu());
  auto model =
      std::make_unique<Model>("dense-relu", Shape{784}, std::move(layers), Storage::kShapeOnly);
  model->set_batch(batch);
  return model;
}

TEST(LayerTime, MatchingPassesTakeTheMeasuredTime) {
  const HostProfile profile = load_host_profile(write_profile("measured", kHead + kLayers));
  ASSERT_EQ(profile.layers.size(), 2u);
  const auto model = dense_relu(4);
  EXPECT_DOUBLE_EQ(compute_seconds(profile, model->forward_cost(0)), 0.25);
  EXPECT_DOUBLE_EQ(compute_seconds(profile, model->backward_cost(0)), 0.5);
  EXPECT_DOUBLE_EQ(compute_seconds(profile, model->forward_cost(1)), 0.125);
  EXPECT_DOUBLE_EQ(compute_seconds(profile, model->backward_cost(1)), 0.0);
}

TEST(LayerTime, OtherShapesAndCostsUseTheKindSpeed) {
  const HostProfile measured = load_host_profile(write_profile("measured", kHead + kLayers));
  const HostProfile plain = load_host_profile(write_profile("plain", kHead));
  EXPECT_TRUE(plain.layers.empty());
  const auto model = dense_relu(8);  // another batch: no measured entry
  const Cost forward = model->forward_cost(0);
  EXPECT_EQ(forward.layer.pass, Pass::kForward);
  EXPECT_DOUBLE_EQ(compute_seconds(measured, forward), compute_seconds(plain, forward));
  EXPECT_DOUBLE_EQ(compute_seconds(plain, forward),
                   std::max(forward.flops / 1e11, forward.bytes / 1e10));
  const Cost optimizer{.flops = 100, .bytes = 1e6, .kind = OpKind::kOptimizer};
  EXPECT_DOUBLE_EQ(compute_seconds(measured, optimizer), 1e6 / 1e10);
}

void expect_error(const std::string& layers, const std::string& expected,
                  const std::string& before = "") {
  const std::string path = write_profile("bad", before + kHead + layers);
  try {
    load_host_profile(path);
    ADD_FAILURE() << "no error for " << layers;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(LayerTime, BadEntriesNameTheirLineAndField) {
  expect_error("[[layer]]\nkind = \"dense\"\ninput = [4, 784]\noutput = [4, 10]\nforward_s = 1\n",
               ":11: layer[0].backward_s: required key is missing");
  expect_error(
      "[[layer]]\nkind = \"dense\"\ninput = \"4x784\"\noutput = [4, 10]\nforward_s = 1\n"
      "backward_s = 1\n",
      "layer[0].input: expected a shape");
  expect_error(
      "[[layer]]\nkind = \"dense\"\ninput = [4]\noutput = [4]\nforward_s = -1\nbackward_s = 1\n",
      "layer[0].forward_s: expected seconds");
  expect_error(
      "[[layer]]\nkind = \"dense\"\ninput = [4]\noutput = [4]\nforward_s = 1\nbackward_s = 1\n"
      "speed = 3\n",
      "layer[0].speed: unknown key");
  expect_error(kLayers +
                   "[[layer]]\nkind = \"relu\"\ninput = [4, 10]\noutput = [4, 10]\n"
                   "forward_s = 1\nbackward_s = 1\n",
               "layer[2]: the same kind, input and output as layer[1]");
  expect_error("", ":1: layer: expected [[layer]] tables", "layer = 3\n");
}

// The profile's factors: compute_skew (default 1, within [0.5, 2]) and worker_spread (default 0,
// within [0, 0.5]), each refused out of its range or as text, naming its line.
TEST(LayerTime, ProfileFactorsAreReadWithinTheirRanges) {
  const HostProfile plain = load_host_profile(write_profile("plain", kHead));
  EXPECT_EQ(plain.compute_skew, 1.0);
  EXPECT_EQ(plain.worker_spread, 0.0);
  const HostProfile set = load_host_profile(
      write_profile("set", "compute_skew = 1.04\nworker_spread = 0.03\n" + kHead));
  EXPECT_EQ(set.compute_skew, 1.04);
  EXPECT_EQ(set.worker_spread, 0.03);
  for (const char* bad :
       {"compute_skew = 3\n", "compute_skew = \"high\"\n", "compute_skew = 0.4\n",
        "worker_spread = 0.7\n", "worker_spread = -0.1\n", "worker_spread = \"wide\"\n"}) {
    const std::string text(bad);
    expect_error("", ":1: " + text.substr(0, text.find(' ')), text);
  }
}

}  // namespace
}  // namespace syncopate::sim
