#pragma once
// `syncopate model NAME_OR_SCENARIO`: a model's summary per layer (output shape, parameters,
// forward and backward FLOPs, activation bytes at the batch size) and its totals, or (--toml)
// its description written as a scenario's [model] table; --kinds lists the layer kinds.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace syncopate::app {

struct ModelOptions {
  std::string model;              // a zoo name, a scenario file or a shipped scenario's name
  std::vector<std::string> sets;  // scenario overrides
  std::optional<int64_t> batch;   // default: the scenario's batch_size (64 for a zoo name)
  bool toml = false;
  bool kinds = false;  // list the layer kinds instead
};

CLI::App* declare_model(CLI::App& cli, ModelOptions& options);
int run_model(const ModelOptions& options);

}  // namespace syncopate::app
