#pragma once
// Checks made before training starts, so that a run is not lost at its end (or half-way) to a
// mistake that could be seen from the start: a run directory that cannot be written, a model
// that the chosen data cannot feed, data that cannot fit in memory. Each is a UserError.
#include <string>

#include "core/scenario/scenario.hpp"

namespace syncopate::app {

// `dir` (the --out, or runs/<name>) can be created and written: every name in it fits the file
// system, the nearest existing folder above it is a folder and writable. `what` names the
// option in errors ("--out").
void check_run_dir(const std::string& dir, const std::string& what);

// The model can be trained for real on the scenario's data (skipped for cost-only runs, which
// read no data): the data's sample shape is the model's, and synthetic data fits in memory.
void check_model_and_data(const Scenario& scenario);

}  // namespace syncopate::app
