#pragma once
// A model's summary per layer, as torchinfo prints it: output shape, parameters, forward and
// backward FLOPs and activation bytes at a batch size, and the totals. Built from the
// description through the cost-only model, so it holds for models of any size.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/nn/model_spec.hpp"

namespace syncopate {

struct LayerSummary {
  std::string kind, details;  // e.g. "dense", "784 -> 256"
  Shape output;               // with the batch
  int64_t params = 0;
  double forward_flops = 0, backward_flops = 0;  // as the simulator charges them
  double activation_bytes = 0;                   // the layer's output, float32
};

struct ModelSummary {
  std::string name;
  Shape input;  // with the batch
  int64_t batch = 0;
  std::vector<LayerSummary> layers;
  int64_t params = 0;
  double forward_flops = 0, backward_flops = 0, activation_bytes = 0;
};

ModelSummary summarize_model(const ModelSpec& spec, int64_t batch);
// The table and the totals, as `syncopate model` prints them.
std::string format_summary(const ModelSummary& summary);

// A quantity with a decimal SI prefix, three significant digits: si(3.52e9, "B") = "3.52 GB",
// si(999, "B") = "999 B"; without a unit si(3.52e9) = "3.52 G", si(999) = "999".
std::string si(double v, std::string_view unit = "");

}  // namespace syncopate
