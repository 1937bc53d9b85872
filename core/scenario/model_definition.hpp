#pragma once
// A model written out in a scenario, layer by layer:
//   [model]
//   input = [1, 28, 28]          # one sample's shape
//   [[model.layers]]
//   kind = "dense"
//   units = 256
// Each layer's input shape is the previous layer's output, so a layer names only what it adds
// (dense its units, conv2d its filters); the first misfit is a UserError naming file:line, the
// layer and the expected and actual shapes. The parameters of each kind are in kLayerParameters
// (model_definition.cpp) and the README.
#include <cstdint>
#include <string>

#include "core/nn/model_spec.hpp"
#include "core/scenario/toml_reader.hpp"

namespace syncopate {

// Reads model.input and model.layers (both required) into a description named `name`; shapes
// are checked at `batch` samples.
ModelSpec read_model_definition(TomlReader& reader, const std::string& name, int64_t batch);

// The description as the [model] table's `input` and `layers`: it reads back to the same.
void write_model_definition(const ModelSpec& spec, toml::table& model);

// "kind: parameters" for every kind a definition may use, one per line (for errors and help).
std::string layer_kinds_help();

}  // namespace syncopate
