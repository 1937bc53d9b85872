#pragma once
// `syncopate calibrate`: measure this host's compute (per layer, at the scenario's shapes) and its
// MPI transport, and write a host profile and a platform recipe for the simulator from them.
#include <string>
#include <vector>

#include "app/calibrate_fit.hpp"
#include "core/base/function_ref.hpp"
#include "core/nn/cost.hpp"
#include "core/scenario/scenario.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate::app {

struct CalibrateOptions {
  std::string scenario_path;  // empty: the embedded default scenario
  std::vector<std::string> sets;
  std::string out;   // the platform recipe; its profile goes to <dir>/profiles/<stem>-cpu.toml
  int repeats = 30;  // samples of every figure (per rank); medians are taken over them
  // The widest p90 / p10 of a step's timed parts taken as one speed: calibrate warns over it.
  double steady_spread = kSteadyStepSpread;
  std::string command_line;  // for the files' header
};

// Seconds per repeat of one measured piece of compute, with its modelled cost.
struct Series {
  std::string name;
  Cost cost;
  std::vector<double> seconds;
};

struct LayerSeries {
  std::string kind;
  Shape input, output;
  Series forward, backward;
};

struct ComputeSamples {
  int64_t batch = 0;
  std::vector<LayerSeries> layers;
  Series loss, zero_grad, optimizer;
  Series overhead;  // a whole step minus the sum of its timed parts
  Series parts;     // the sum of a step's timed parts (its compute)
  // This rank's pace: the mean seconds of a whole step over the pace window (0: not measured);
  // in a Calibration, every rank's (rank_pace_s).
  double pace_step_s = 0;
  std::vector<double> rank_pace_s;
};

// Runs `repeats` training steps (after a warm-up) of the scenario's model at its per-worker batch
// on the host, timing each layer pass, the loss, zeroing the gradients and the optimizer; then,
// for a window of pace_window_s seconds (none if 0) that begins after start_pace() (calibrate:
// a barrier, so that every rank's window runs at once), whole steps one after another, their
// mean time being pace_step_s.
ComputeSamples time_compute(const Scenario& scenario, int repeats, double pace_window_s,
                            FunctionRef<void()> start_pace);

// Run under mpirun: every rank measures; rank 0 writes the files. Returns the exit code.
int run_calibrate(const CalibrateOptions& options, int* argc, char*** argv);

}  // namespace syncopate::app
