// The per-layer summary that `syncopate model` prints: its rows agree with the model's own
// shapes, parameters and costs, and the table shows them.
#include "core/nn/model_summary.hpp"

#include <gtest/gtest.h>

#include "core/nn/model.hpp"

namespace syncopate {
namespace {

TEST(ModelSummary, RowsAndTotalsAreTheModelsOwn) {
  const ModelSummary s = summarize_model(zoo_spec("cnn"), 32);
  const auto model = make_model("cnn", Storage::kShapeOnly);
  ASSERT_EQ(s.layers.size(), static_cast<size_t>(model->num_layers()));
  EXPECT_EQ(s.params, model->num_params());
  EXPECT_DOUBLE_EQ(s.forward_flops, model->forward_flops(32));
  EXPECT_DOUBLE_EQ(s.backward_flops, model->backward_flops(32));
  EXPECT_EQ(s.input, (Shape{32, 1, 28, 28}));
  EXPECT_EQ(s.layers[0].kind, "conv2d");
  EXPECT_EQ(s.layers[0].details, "1 -> 32, 3x3 /1 pad 1");
  EXPECT_EQ(s.layers[0].output, (Shape{32, 32, 28, 28}));
  EXPECT_EQ(s.layers[0].params, 32 * 9 + 32);
  EXPECT_DOUBLE_EQ(s.layers[0].activation_bytes, 4.0 * 32 * 32 * 28 * 28);
  EXPECT_EQ(s.layers.back().output, (Shape{32, 10}));
  // The first layer has parameters: nothing upstream, so its backward has no input gradient.
  EXPECT_DOUBLE_EQ(s.layers[0].backward_flops, s.layers[0].forward_flops);
  const std::string table = format_summary(s);
  EXPECT_NE(table.find("model cnn: input (32,1,28,28) (batch 32)"), std::string::npos) << table;
  EXPECT_NE(table.find("parameters        421,642"), std::string::npos) << table;
  EXPECT_NE(table.find("dense 3136 -> 128"), std::string::npos) << table;
}

TEST(ModelSummary, TransformerBlocksShowTheirParts) {
  const ModelSummary s = summarize_model(zoo_spec("gpt2"), 1);
  EXPECT_EQ(s.params, 124439808);
  EXPECT_EQ(s.layers[1].details, "x + (layernorm, attention)");
  EXPECT_EQ(s.layers[0].details, "50257 x 768 + 1024 positions");
  EXPECT_EQ(s.layers.back().details, "768 -> 50257, tied");
  EXPECT_EQ(s.layers.back().output, (Shape{1, 1024, 50257}));
}

}  // namespace
}  // namespace syncopate
