#pragma once
// The platform files' own value kinds on top of core's TomlReader: quantities with units
// ("450GBps", "1us", "67Tf") and dimension lists ("8x8x4"), and a reader whose overrides name
// themselves "file: override key=value" in errors.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backends/sim/platform/platform_recipe.hpp"
#include "core/scenario/toml_reader.hpp"

namespace syncopate::sim::detail {

// The file read with `overrides` (dotted key -> text) applied.
TomlReader open_platform_file(const std::string& path,
                              const std::map<std::string, std::string>& overrides = {});

// A bandwidth, time or speed: a TOML number in base units (B/s, s, flop/s) or a string with a
// unit ("450GBps", "200Gbps", "1us", "67Tf"). Must be > 0, or >= 0 when `zero_ok`.
double quantity(TomlReader& reader, std::string_view key, Quantity kind,
                std::optional<double> fallback, bool zero_ok = false);
// A list of positive integers: a TOML array [8, 8, 4], a string "8x8x4" or one integer.
std::vector<unsigned long> dims(TomlReader& reader, std::string_view key);

}  // namespace syncopate::sim::detail
