#pragma once
// `syncopate compare`: two run directories of the same scenario side by side, usually a
// simulated run (A, the prediction) against a measured one (B): per epoch and phase, per worker
// and over all workers, the seconds of each and A's error; the bytes must be equal.
#include <string>

namespace syncopate::app {

struct CompareOptions {
  std::string run_a, run_b;  // run directories: A predicted, B measured (the reference)
  std::string out;           // folder for compare.json; empty: RUN_B itself
  double tolerance = 0.10;   // relative, against B's time of the same epoch (see compare.cpp)
};

// Prints the table and writes compare.json. Returns 0 when every compared figure is within the
// tolerance and the bytes are equal, 1 otherwise. Throws UsageError (exit 2) when the runs cannot
// be compared: a directory that is not a run, unreadable files, runs of different scenarios.
int run_compare(const CompareOptions& options);

}  // namespace syncopate::app
