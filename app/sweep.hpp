#pragma once
// `syncopate sweep`: the cross product of a scenario's settings, one run directory per point.
//
// A sweep directory holds sweep.json (the scenario text and the grid: what makes two sweeps the
// same), runs/<point>/ (each point's run directory, complete only when the run finished),
// runs/<point>.log (its output) and sweep.csv (one row per point: the grid values, the run
// directory and the summary figures; empty cells for points that have not finished).
#include <string>
#include <vector>

namespace syncopate::app {

// One axis of the grid: a scenario key and its values (TOML values, bare words are strings).
struct SweepAxis {
  std::string key;     // "workers", "strategy.name", "sim.fidelity", ...
  std::string column;  // its sweep.csv column: "workers", "strategy", or the key
  std::vector<std::string> values;
};

// One point: the overrides that make it, in axis order, and its directory name under runs/.
struct SweepPoint {
  std::vector<std::string> sets;  // "key=value"
  std::vector<std::string> values;
  std::string name;
};

struct SweepOptions {
  std::string scenario_path;      // empty: the embedded default scenario
  std::vector<std::string> sets;  // applied to every point, before the grid's
  std::vector<SweepAxis> axes;
  std::string out;  // the sweep directory
  int jobs = 0;     // points run at once; 0: one per core
  bool emit_slurm = false;
  bool quiet = false;
  std::string collect;   // non-empty: only (re)build DIR/sweep.csv
  std::string self_exe;  // this program (to run the points)
};

// "a,b,[1, 2]" -> {"a", "b", "[1, 2]"}: commas inside brackets, braces or quotes do not split.
// Throws UserError (naming `what`) on an empty list or an empty item.
std::vector<std::string> split_values(const std::string& text, const std::string& what);

// The cross product, the first axis varying slowest. Throws UserError on an empty grid.
std::vector<SweepPoint> expand_grid(const std::vector<SweepAxis>& axes);

// Runs (or, with emit_slurm, writes a Slurm job-array script for) every point that has not
// finished, then writes sweep.csv. Returns the exit code: 0 when every point finished.
int run_sweep(const SweepOptions& options);

}  // namespace syncopate::app
