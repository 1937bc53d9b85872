#pragma once
// Reading a host profile's measured layers: the [[layer]] tables `syncopate calibrate` writes.
#include <string>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "core/scenario/toml_reader.hpp"

namespace syncopate::sim::detail {

// The array of tables `key` (e.g. "layer"), each {kind, input, output, forward_s, backward_s}:
// empty when absent. Errors (UserError) name file:line: key[i].field.
std::vector<LayerTime> read_layer_times(TomlReader& reader, const std::string& key);

}  // namespace syncopate::sim::detail
