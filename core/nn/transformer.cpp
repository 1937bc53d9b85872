// Decoder-only transformers: the built-in configurations and their layer lists.
#include "core/nn/transformer.hpp"

#include <array>
#include <cmath>
#include <utility>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

TransformerConfig gpt2(int64_t width, int64_t heads, int64_t layers) {
  return {.width = width, .heads = heads, .layers = layers};
}

const std::array<std::pair<std::string_view, TransformerConfig>, 5>& builtins() {
  static const std::array<std::pair<std::string_view, TransformerConfig>, 5> table = {{
      {"gpt2", gpt2(768, 12, 12)},
      {"gpt2-medium", gpt2(1024, 16, 24)},
      {"gpt2-large", gpt2(1280, 20, 36)},
      {"gpt2-xl", gpt2(1600, 25, 48)},
      {"llama-7b",
       {.vocabulary = 32000,
        .context = 2048,
        .width = 4096,
        .heads = 32,
        .layers = 32,
        .mlp_ratio = 11008.0 / 4096.0,
        .tied_embeddings = false,
        .llama_style = true}},
  }};
  return table;
}

LayerSpec norm(const TransformerConfig& c) {
  return c.llama_style ? rmsnorm_spec(c.width) : layernorm_spec(c.width);
}

LayerSpec mlp(const TransformerConfig& c, int64_t hidden) {
  if (c.llama_style) return residual_spec({norm(c), swiglu_spec(c.width, hidden, Bias::kNo)});
  return residual_spec(
      {norm(c), dense_spec(c.width, hidden), gelu_spec(), dense_spec(hidden, c.width)});
}

}  // namespace

ModelSpec transformer_spec(const std::string& name, const TransformerConfig& c) {
  const auto hidden =
      static_cast<int64_t>(std::llround(c.mlp_ratio * static_cast<double>(c.width)));
  if (c.context <= 0 || c.layers <= 0 || hidden <= 0) {
    throw UserError("transformer " + name + ": context, layers and mlp_ratio must be positive");
  }
  const Bias bias = c.llama_style ? Bias::kNo : Bias::kYes;
  ModelSpec spec{name, {c.context}, {}};
  spec.layers.push_back(embedding_spec(c.vocabulary, c.width, c.llama_style ? 0 : c.context));
  for (int64_t i = 0; i < c.layers; ++i) {
    spec.layers.push_back(residual_spec({norm(c), attention_spec(c.width, c.heads, bias)}));
    spec.layers.push_back(mlp(c, hidden));
  }
  spec.layers.push_back(norm(c));
  spec.layers.push_back(c.tied_embeddings ? tied_dense_spec(c.width, c.vocabulary)
                                          : dense_spec(c.width, c.vocabulary, Bias::kNo));
  return spec;
}

const TransformerConfig* builtin_transformer(const std::string& name) {
  for (const auto& [n, config] : builtins()) {
    if (n == name) return &config;
  }
  return nullptr;
}

}  // namespace syncopate
