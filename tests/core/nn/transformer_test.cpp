// The transformer descriptions against published figures: GPT-2's parameter counts (tied
// embeddings), LLaMA-7B's, per-layer counts, and training FLOPs against Narayanan et al.'s
// closed form (SC'21): 72 B s l h^2 (1 + s / 6h + V / 12 l h) for forward plus backward.
#include "core/nn/transformer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "core/nn/model.hpp"
#include "core/nn/model_summary.hpp"

namespace syncopate {
namespace {

TEST(Transformer, Gpt2ParameterCountsArePublishedOnes) {
  EXPECT_EQ(num_params(zoo_spec("gpt2")), 124439808);
  EXPECT_EQ(num_params(zoo_spec("gpt2-medium")), 354823168);
  EXPECT_EQ(num_params(zoo_spec("gpt2-large")), 774030080);
  EXPECT_EQ(num_params(zoo_spec("gpt2-xl")), 1557611200);
  // Untied, the output projection adds the token table once more.
  TransformerConfig untied = *builtin_transformer("gpt2");
  untied.tied_embeddings = false;
  EXPECT_EQ(num_params(transformer_spec("gpt2-untied", untied)), 124439808 + 50257 * 768);
}

TEST(Transformer, Llama7bIsAbout6Point7BillionParameters) {
  const int64_t n = num_params(zoo_spec("llama-7b"));
  // 32000 x 4096 twice (untied), 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096), final norm.
  EXPECT_EQ(n,
            2 * 32000LL * 4096 + 32 * (4 * 4096LL * 4096 + 3 * 4096LL * 11008 + 2 * 4096) + 4096);
  EXPECT_EQ(n, 6738415616);
  EXPECT_NEAR(static_cast<double>(n) / 1e9, 6.7, 0.05);
}

TEST(Transformer, PerLayerParametersOfGpt2) {
  const ModelSpec spec = zoo_spec("gpt2");
  ASSERT_EQ(spec.layers.size(), 1u + 2 * 12 + 2);
  EXPECT_EQ(spec.sample_shape, (Shape{1024}));
  const int64_t c = 768;
  EXPECT_EQ(num_params(spec.layers[0]), (50257 + 1024) * c);         // wte + wpe
  EXPECT_EQ(num_params(spec.layers[1]), 2 * c + 4 * c * c + 4 * c);  // ln_1 + attention
  EXPECT_EQ(num_params(spec.layers[2]), 2 * c + 8 * c * c + 5 * c);  // ln_2 + mlp
  EXPECT_EQ(num_params(spec.layers[25]), 2 * c);                     // ln_f
  EXPECT_EQ(num_params(spec.layers[26]), 0);                         // tied head
  EXPECT_EQ(output_shape(spec, 2), (Shape{2, 1024, 50257}));
}

TEST(Transformer, TrainingFlopsMatchNarayanansClosedForm) {
  for (const char* name : {"gpt2", "gpt2-xl"}) {
    const ModelSpec spec = zoo_spec(name);
    const TransformerConfig& c = *builtin_transformer(name);
    const ModelSummary s = summarize_model(spec, 2);
    const double b = 2, seq = static_cast<double>(c.context), l = static_cast<double>(c.layers);
    const double h = static_cast<double>(c.width), v = static_cast<double>(c.vocabulary);
    const double published = 72 * b * seq * l * h * h * (1 + seq / (6 * h) + v / (12 * l * h));
    const double ours = s.forward_flops + s.backward_flops;
    // Ours also counts biases, norms, GELU, softmax and the residual adds: a little more.
    EXPECT_GT(ours, published) << name;
    EXPECT_LT(ours, 1.02 * published) << name;
    // And a sequence is the sample: twice the batch, twice the FLOPs.
    const ModelSummary four = summarize_model(spec, 4);
    EXPECT_DOUBLE_EQ(four.forward_flops, 2 * s.forward_flops) << name;
  }
}

TEST(Transformer, BuildsAsACostOnlyModel) {
  const auto model = make_model("gpt2-xl", Storage::kShapeOnly);
  EXPECT_EQ(model->num_params(), 1557611200);
  model->set_batch(1);
  EXPECT_EQ(model->output().shape(), (Shape{1, 1024, 50257}));
  EXPECT_EQ(model->forward_cost(1).kind, OpKind::kGemm);  // the attention block
  EXPECT_EQ(builtin_transformer("gpt3"), nullptr);
}

}  // namespace
}  // namespace syncopate
