#pragma once
// `syncopate check`: the communication-cost gate for CI. Each scenario runs cost-only on the
// simulator (deterministic, seconds to run) and its communication figures are compared with a
// baseline file; a figure that grew beyond the tolerance is a regression (exit 1).
#include <string>
#include <vector>

namespace syncopate::app {

struct CheckOptions {
  std::vector<std::string> scenarios;
  std::string baseline;           // a TOML file (see README: "The communication-cost check")
  double tolerance = 0.01;        // relative
  bool update = false;            // write the baseline from this run instead of comparing
  std::vector<std::string> sets;  // applied to every scenario
  std::string self_exe;
};

// "1%" -> 0.01, "0.5 %" -> 0.005, "0.02" -> 0.02. Throws UsageError otherwise, naming the
// command's --tolerance.
double parse_tolerance(const std::string& text, const std::string& command = "check");

// Returns the exit code: 0 when no figure regressed, 1 otherwise.
int run_check(const CheckOptions& options);

}  // namespace syncopate::app
