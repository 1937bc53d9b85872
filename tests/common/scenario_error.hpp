#pragma once
// The error a scenario file's text gets: what the tests of refused input check.
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/scenario/scenario.hpp"

namespace syncopate {

// The UserError message of parsing `text` as the file "exp.toml" (its lines from line 1) with
// the overrides `sets`; "" if it parses.
inline std::string scenario_error(const std::string& text,
                                  const std::vector<std::string>& sets = {}) {
  try {
    parse_scenario(text, "exp.toml", sets);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace syncopate
