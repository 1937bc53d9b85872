// Models written out in a scenario: the same description as the zoo's, the same training bit for
// bit, shape inference and its errors (file:line, layer, expected vs got), bad layer tables, and
// the resolved scenario loading back to the same model.
#include "core/scenario/model_definition.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/base/check.hpp"
#include "core/comm/local_backend.hpp"
#include "core/nn/model.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/trainer.hpp"
#include "tests/common/serial_defaults.hpp"

namespace syncopate {
namespace {

// The embedded default scenario with its [model] table replaced by `model` (TOML text).
std::string with_model(const std::string& model) {
  std::string text = default_scenario_text();
  const std::string named = "[model]\nname = \"mlp\"\n";
  const size_t at = text.find(named);
  EXPECT_NE(at, std::string::npos);
  return text.replace(at, named.size(), model);
}

const char* kMlpLayers = R"([model]
input = [1, 28, 28]
[[model.layers]]
kind = "flatten"
[[model.layers]]
kind = "dense"
units = 256
[[model.layers]]
kind = "relu"
[[model.layers]]
kind = "dense"
units = 128
[[model.layers]]
kind = "relu"
[[model.layers]]
kind = "dense"
units = 10
)";

const std::vector<std::string> kSmall = {
    "data.dataset=synthetic", "data.train_samples=512", "data.test_samples=128", "epochs=2",
    "batch_size=32",          "schedule.lr=0.05",       "schedule.kind=constant"};

Scenario parse_model_text(const std::string& text, const std::vector<std::string>& sets = {}) {
  return parse_scenario(text, "model.toml", serial_defaults(sets));
}

// The UserError message of parsing `text`.
std::string model_error(const std::string& text) {
  try {
    parse_model_text(text);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

WorkerReport train_one_worker(const Scenario& s) {
  const TrainData data = prepare_data(s, false);
  LocalCommunicator comm;
  WallClockExecutor exec;
  return train_worker(s, data, comm, exec);
}

TEST(ModelDefinition, TheMlpWrittenAsLayersIsTheZoosMlp) {
  const Scenario s = parse_model_text(with_model(kMlpLayers));
  ASSERT_TRUE(s.model.definition.has_value());
  const ModelSpec mine = s.model.spec(), zoo = zoo_spec("mlp");
  EXPECT_EQ(mine.sample_shape, zoo.sample_shape);
  ASSERT_EQ(mine.layers.size(), zoo.layers.size());
  for (size_t i = 0; i < zoo.layers.size(); ++i) {
    EXPECT_EQ(mine.layers[i].kind, zoo.layers[i].kind) << i;
    EXPECT_EQ(mine.layers[i].in, zoo.layers[i].in) << i;
    EXPECT_EQ(mine.layers[i].out, zoo.layers[i].out) << i;
  }
  EXPECT_EQ(num_params(mine), 235146);
}

TEST(ModelDefinition, TheMlpWrittenAsLayersTrainsBitForBitAsTheBuiltInOne) {
  const WorkerReport named = train_one_worker(parse_model_text(default_scenario_text(), kSmall));
  const WorkerReport written = train_one_worker(parse_model_text(with_model(kMlpLayers), kSmall));
  ASSERT_EQ(named.final_params.size(), 235146u);
  EXPECT_EQ(named.final_params, written.final_params);
  ASSERT_EQ(named.epochs.size(), written.epochs.size());
  for (size_t e = 0; e < named.epochs.size(); ++e)
    EXPECT_EQ(named.epochs[e].train_loss, written.epochs[e].train_loss);
  // Another seed gives other weights: the comparison above can fail.
  EXPECT_NE(train_one_worker(parse_model_text(with_model(kMlpLayers),
                                              [] {
                                                auto sets = kSmall;
                                                sets.push_back("seed=9");
                                                return sets;
                                              }()))
                .final_params,
            named.final_params);
}

TEST(ModelDefinition, ResolvedScenarioLoadsBackToTheSameModel) {
  const std::string residual = R"([model]
input = [3, 16, 16]
[[model.layers]]
kind = "conv2d"
filters = 8
kernel = 3
padding = 1
[[model.layers]]
kind = "residual"
layers = [{ kind = "conv2d", filters = 8, kernel = 3, padding = 1 }, { kind = "tanh" }]
[[model.layers]]
kind = "avgpool2d"
size = 4
stride = 2
[[model.layers]]
kind = "dropout"
rate = 0.3
[[model.layers]]
kind = "flatten"
[[model.layers]]
kind = "dense"
units = 10
bias = false
)";
  const Scenario s = parse_model_text(with_model(residual));
  const Scenario again = parse_model_text(s.resolved_toml);
  ASSERT_TRUE(again.model.definition.has_value());
  EXPECT_EQ(again.resolved_toml, s.resolved_toml);
  EXPECT_EQ(num_params(again.model.spec()), num_params(s.model.spec()));
  EXPECT_EQ(output_shape(again.model.spec(), 2), (Shape{2, 10}));
  // conv 3*8*9+8, residual conv 8*8*9+8, dense (8*7*7)*10 without bias.
  EXPECT_EQ(num_params(s.model.spec()), 224 + 584 + 3920);
  EXPECT_NE(s.resolved_toml.find("kind = 'residual'"), std::string::npos) << s.resolved_toml;
  // A named model's resolved scenario keeps the name only.
  const Scenario named = parse_model_text(default_scenario_text());
  EXPECT_NE(named.resolved_toml.find("name = 'mlp'"), std::string::npos) << named.resolved_toml;
  EXPECT_EQ(named.resolved_toml.find("layers"), std::string::npos);
}

TEST(ModelDefinition, FirstShapeMismatchNamesFileLineLayerAndShapes) {
  std::string text = kMlpLayers;
  text += "[[model.layers]]\nkind = \"conv2d\"\nfilters = 4\nkernel = 3\n";
  const std::string message = model_error(with_model(text));
  // The conv2d table is the seventh layer (index 6).
  EXPECT_NE(message.find("model.toml:"), std::string::npos) << message;
  EXPECT_NE(message.find("model.layers[6] (conv2d)"), std::string::npos) << message;
  EXPECT_NE(message.find("expected input (B,C,H,W), got (64,10)"), std::string::npos) << message;
  // A pooling window larger than its input.
  const std::string pool = model_error(
      with_model("[model]\ninput = [1, 4, 4]\n[[model.layers]]\nkind = \"maxpool2d\"\nsize = 5\n"));
  EXPECT_NE(pool.find("model.layers[0] (maxpool2d)"), std::string::npos) << pool;
  EXPECT_NE(pool.find("got (64,1,4,4)"), std::string::npos) << pool;
  // A residual whose layers change the shape.
  const std::string skip =
      model_error(with_model("[model]\ninput = [8]\n[[model.layers]]\nkind = \"residual\"\n"
                             "layers = [{ kind = \"dense\", units = 4 }]\n"));
  EXPECT_NE(skip.find("model.layers[0] (residual)"), std::string::npos) << skip;
  EXPECT_NE(skip.find("turn (64,8) into (64,4)"), std::string::npos) << skip;
}

TEST(ModelDefinition, ErrorLinesPointAtTheLayer) {
  const std::string text =
      "name = \"x\"\n[model]\ninput = [4]\n[[model.layers]]\nkind = \"dense\"\nunits = 2\n"
      "[[model.layers]]\nkind = \"dense\"\nunits = 0\n";
  const std::string message = model_error(text);
  EXPECT_NE(message.find("model.toml:9: model.layers[1] (dense).units: 0 is out of range"),
            std::string::npos)
      << message;
}

TEST(ModelDefinition, UnknownKindListsTheAllowedOnes) {
  const std::string message = model_error(
      with_model("[model]\ninput = [4]\n[[model.layers]]\nkind = \"lstm\"\nunits = 2\n"));
  EXPECT_NE(message.find("model.layers[0].kind: unknown layer kind 'lstm'; allowed: dense, "
                         "conv2d, maxpool2d"),
            std::string::npos)
      << message;
  for (const char* kind : {"gelu", "layernorm", "embedding", "attention", "residual"})
    EXPECT_NE(message.find(kind), std::string::npos) << kind;
}

TEST(ModelDefinition, MissingUnknownAndContradictoryParametersAreClear) {
  const auto layer = [](const std::string& body) {
    return model_error(with_model("[model]\ninput = [2, 8, 8]\n[[model.layers]]\n" + body));
  };
  const std::string missing = layer("kind = \"conv2d\"\nkernel = 3\n");
  EXPECT_NE(missing.find("model.layers[0] (conv2d).filters: required parameter is missing; "
                         "conv2d takes filters, kernel, stride, padding, bias"),
            std::string::npos)
      << missing;
  const std::string unknown = layer("kind = \"maxpool2d\"\nsize = 2\nunits = 3\n");
  EXPECT_NE(unknown.find("(maxpool2d).units: unknown parameter; maxpool2d takes size, stride, "
                         "padding"),
            std::string::npos)
      << unknown;
  const std::string padding = layer("kind = \"maxpool2d\"\nsize = 2\npadding = 2\n");
  EXPECT_NE(padding.find("(maxpool2d).padding: must be at most size / 2"), std::string::npos)
      << padding;
  const std::string heads = model_error(
      with_model("[model]\ninput = [4, 6]\n[[model.layers]]\nkind = \"attention\"\nheads = 4\n"));
  EXPECT_NE(heads.find("(attention).heads: 4 heads do not divide the width 6"), std::string::npos)
      << heads;
  const std::string rate = layer("kind = \"dropout\"\nrate = 1.5\n");
  EXPECT_NE(rate.find("(dropout).rate: must be in [0, 1)"), std::string::npos) << rate;
  const std::string type = layer("kind = \"conv2d\"\nfilters = \"many\"\nkernel = 3\n");
  EXPECT_NE(type.find("(conv2d).filters: expected an integer"), std::string::npos) << type;
  for (const std::string& m : {missing, unknown, padding, heads, rate, type})
    EXPECT_EQ(m.rfind("model.toml:", 0), 0u) << m;
}

TEST(ModelDefinition, NamedAndWrittenOutAtOnceIsRefused) {
  std::string both = kMlpLayers;
  both.insert(std::string("[model]\n").size(), "name = \"cnn\"\n");
  const std::string message = model_error(with_model(both));
  EXPECT_NE(message.find("model.name: a model is named (model.name) or written out"),
            std::string::npos)
      << message;
  const std::string no_layers = model_error(with_model("[model]\ninput = [4]\n"));
  EXPECT_NE(no_layers.find("model.layers: required key is missing"), std::string::npos)
      << no_layers;
  const std::string no_input =
      model_error(with_model("[model]\n[[model.layers]]\nkind = \"relu\"\n"));
  EXPECT_NE(no_input.find("model.input: required key is missing"), std::string::npos) << no_input;
  const std::string bad_input = model_error(with_model("[model]\ninput = [0, 3]\n"));
  EXPECT_NE(bad_input.find("model.input: expected one sample's shape"), std::string::npos)
      << bad_input;
}

TEST(ModelDefinition, TransformerNamesAreZooNamesOfTheScenario) {
  const Scenario s = parse_model_text(default_scenario_text(), {"model.name=gpt2"});
  EXPECT_EQ(num_params(s.model.spec()), 124439808);
  EXPECT_EQ(s.model.spec().sample_shape, (Shape{1024}));
}

}  // namespace
}  // namespace syncopate
