#pragma once
// Decoder-only transformers as model descriptions (GPT-2 and LLaMA style), for cost-only
// simulation: a sequence of `context` token ids is one sample, so a scenario's batch_size counts
// sequences.
#include <cstdint>
#include <string>

#include "core/nn/model_spec.hpp"

namespace syncopate {

struct TransformerConfig {
  int64_t vocabulary = 50257;
  int64_t context = 1024;  // tokens per sequence (the sample)
  int64_t width = 768;     // d_model
  int64_t heads = 12;
  int64_t layers = 12;
  double mlp_ratio = 4.0;       // the MLP's hidden width over the width (rounded to an integer)
  bool tied_embeddings = true;  // the output projection is the token table, transposed
  // GPT-2: LayerNorm, biases, learned positions, a GELU MLP. LLaMA: RMSNorm, no biases, rotary
  // positions (no parameters), a SwiGLU MLP.
  bool llama_style = false;
};

// GPT-2's block: x + attention(layernorm(x)), then x + mlp(layernorm(x)) with mlp = dense(C,
// rC), gelu, dense(rC, C); after the blocks a final layernorm and the output projection (tied:
// tied_dense; else a dense layer without bias). LLaMA's: rmsnorm, attention without biases,
// swiglu.
ModelSpec transformer_spec(const std::string& name, const TransformerConfig& config);

// The built-in configurations: gpt2, gpt2-medium, gpt2-large, gpt2-xl (OpenAI's, 1,024 tokens,
// tied embeddings) and llama-7b (Touvron et al. 2023: 4,096 wide, 32 layers and heads, SwiGLU
// hidden 11,008, 2,048 tokens, untied). Null for other names.
const TransformerConfig* builtin_transformer(const std::string& name);

}  // namespace syncopate
