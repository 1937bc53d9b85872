// A tiny decoder-style transformer written out in a scenario (embedding with positions, an
// attention block and an MLP block with skips, layer norms) trains for real: on sequences of token
// ids read from a CSV file it learns to count a token (regression, mse).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/comm/local_backend.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/trainer.hpp"
#include "tests/common/scratch.hpp"

namespace syncopate {
namespace {

// 512 sequences of 8 tokens in [0, 6); the target is how many are 2, over 8.
std::string write_counting_csv() {
  const std::string path = (scratch_folder("tokens") / "counting.csv").string();
  std::ofstream out(path);
  out << "t0,t1,t2,t3,t4,t5,t6,t7,count\n";
  std::mt19937 gen(5);
  for (int row = 0; row < 512; ++row) {
    int twos = 0;
    for (int t = 0; t < 8; ++t) {
      const int token = static_cast<int>(gen() % 6);
      twos += token == 2;
      out << token << ",";
    }
    out << twos / 8.0 << "\n";
  }
  return path;
}

std::string tiny_transformer(const std::string& csv) {
  return R"(name = "tiny-transformer"
seed = 3
epochs = 6
batch_size = 16
loss = "mse"
eval_every_epoch = false
[data]
dataset = "csv"
path = ")" +
         csv +
         R"("
targets = ["count"]
normalize = false
[optimizer]
kind = "adam"
[schedule]
lr = 0.003
[model]
input = [8]
[[model.layers]]
kind = "embedding"
vocabulary = 6
width = 16
positions = 8
[[model.layers]]
kind = "residual"
layers = [{ kind = "layernorm" }, { kind = "attention", heads = 2 }]
[[model.layers]]
kind = "residual"
layers = [{ kind = "layernorm" }, { kind = "dense", units = 32 }, { kind = "gelu" },
          { kind = "dense", units = 16 }]
[[model.layers]]
kind = "layernorm"
[[model.layers]]
kind = "flatten"
[[model.layers]]
kind = "dense"
units = 1
)";
}

TEST(TinyTransformer, TrainsForRealOnTokenSequences) {
  const std::string csv = write_counting_csv();
  const Scenario s = parse_scenario(tiny_transformer(csv), "tiny.toml");
  const TrainData data = prepare_data(s, false);
  LocalCommunicator comm;
  WallClockExecutor exec;
  const WorkerReport r = train_worker(s, data, comm, exec);
  std::filesystem::remove(csv);
  ASSERT_EQ(r.epochs.size(), 6u);
  EXPECT_EQ(static_cast<int64_t>(r.final_params.size()), num_params(s.model.spec()));
  // The mean's variance is about 0.016; a model that counts does far better than predicting it.
  EXPECT_LT(r.epochs.back().train_loss, 0.5 * r.epochs.front().train_loss);
  EXPECT_LT(r.epochs.back().train_loss, 0.008);
}

TEST(TinyTransformer, ModelsWithCostOnlyLayersAreRefusedForRealTraining) {
  const std::string text = R"(name = "heads"
data.dataset = "synthetic"
data.train_samples = 8
data.test_samples = 8
[model]
input = [4]
[[model.layers]]
kind = "embedding"
vocabulary = 5
width = 4
[[model.layers]]
kind = "residual"
layers = [{ kind = "swiglu", hidden = 8 }]
[[model.layers]]
kind = "tied_dense"
vocabulary = 5
)";
  const Scenario s = parse_scenario(text, "heads.toml");
  const TrainData data = prepare_data(s, false);
  LocalCommunicator comm;
  WallClockExecutor exec;
  try {
    train_worker(s, data, comm, exec);
    ADD_FAILURE() << "a cost-only layer trained for real";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("heads.toml: model heads: layer 1 (residual) has no "
                                         "math, only costs; run it cost-only"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(first_cost_only_layer(zoo_spec("gpt2")), 26);     // the tied output projection
  EXPECT_EQ(first_cost_only_layer(zoo_spec("llama-7b")), 2);  // the first SwiGLU block
  EXPECT_EQ(first_cost_only_layer(zoo_spec("resnet50")), 1);  // batchnorm2d
  EXPECT_EQ(first_cost_only_layer(zoo_spec("cnn")), -1);
}

}  // namespace
}  // namespace syncopate
