#pragma once
// Fitting the network model of a platform (link latency and bandwidth, per-message overheads,
// piecewise bandwidth and latency factors, as SMPI has them) to ping-pong timings over sizes.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace syncopate::app {

struct PingPongPoint {
  double bytes = 0;
  double seconds = 0;  // one way (half a round trip), the median of the repeats
};

struct FactorEntry {  // a [network] table's [from_bytes, factor]
  double from_bytes = 0;
  double factor = 1;
};

struct TransportFit {
  double latency_s = 0, bandwidth_Bps = 0;  // the link's: the smallest and the largest size's
  double send_overhead_s = 0, recv_overhead_s = 0;
  // From 0 ascending, one entry per ping-pong size; latency_factor stays empty (1 everywhere):
  // the size-dependent part of the time goes to the bandwidth, which ping-pong medians over sizes
  // determine point by point, where two unknowns per size would be fitted to noise.
  std::vector<FactorEntry> bandwidth_factor, latency_factor;
  std::vector<PingPongPoint> points;  // the medians it reproduces (made non-decreasing)
};

// The model one_way(s) = overheads + latency x lat_factor(s) + s / (bandwidth x bw_factor(s))
// fitted to `points` (ascending sizes, at least 2), the overheads measured apart (send: a
// blocking eager send; receive: taking a message that has arrived). Times are first made
// non-decreasing in size, from the largest down (load only slows messages down: a median above a
// larger message's is lowered to it). The latency is the line
// through the two smallest sizes at 0 bytes (between half the smallest's time and all of it) less
// the overheads (scaled down if they exceed 95% of it); the bandwidth
// the largest size's effective one, s / (t - overheads - latency), its factor 1. Each other size
// gets the factor that reproduces its time, from halfway (geometric mean) between it and the
// size before (the first from 0, with the second size's factor), clamped to (1e-6, 1e6].
TransportFit fit_transport(std::span<const PingPongPoint> points, double send_overhead_s,
                           double recv_overhead_s);

// The fit's one-way seconds at `bytes` (what the simulator predicts for one message).
double fitted_seconds(const TransportFit& fit, double bytes);

// How the link carries two messages that cross (ranks 0 and 1 sending to each other at once),
// from the medians at the sizes measured both ways: `ratio` is the median over those sizes of
// the exchange's time over the one-way time; a ratio nearer 2 than 1 (>= 1.5) makes the link
// shared (gpu_link.duplex = "shared": each direction gets half), else split. No size measured
// both ways: split, ratio 0.
struct DuplexFit {
  bool shared = false;
  double ratio = 0;
  size_t sizes = 0;
};
DuplexFit fit_duplex(std::span<const PingPongPoint> one_way,
                     std::span<const PingPongPoint> exchange);

// A local pass's speeds ([network] reduce_bandwidth or copy_bandwidth: [from_bytes, bytes per
// second]) from its median seconds at ascending sizes: each size's bytes / seconds, from halfway
// (geometric mean) between it and the size before, the first from 0; clamped to (0, 1e15].
std::vector<FactorEntry> fit_speeds(std::span<const PingPongPoint> points);

// A host profile's compute_skew: the median of a step's timed parts over the sum of the parts'
// medians (each timing is skewed to the right, so the medians sum short of a step's), within
// the range a profile accepts, [0.5, 2]; 1 without parts.
double compute_skew(double step_median_s, double sum_of_medians_s);

// How long every rank runs whole training steps at once to set its pace (rank_pace_s), from
// which worker_spread is fitted: seconds, about a 1-worker epoch of fmnist-mlp on this machine.
// The measured ranks' inequality lasts that long and longer: in the 2-worker runs of the
// validation of 2026-12-07 19:59 UTC, the same rank computed slowest in all three epochs in 32
// of 42 runs (README, "Unequal workers").
inline constexpr double kPaceWindowS = 0.5;

// The estimate of a host profile's worker_spread (calibrate writes it as a comment: README,
// "Unequal workers") from every rank's mean step time over the same window: the standard
// deviation of their logs over c4(n), which makes it unbiased for normal draws (c4(2) = 0.798);
// within [0, 0.5], the range a profile accepts; 0 with fewer than 2 ranks or a time that is not
// positive.
double worker_spread(std::span<const double> rank_step_s);

// The widest p90 / p10 of a step's timed parts that calibrate takes as one speed. Over the 132
// calibrations of the validation by validate.sh --calibrate run on a 2-core machine (2026-12-07
// 03:02 UTC; README, "Calibration"), the median spread was
// 1.28x and 113 lay within 1.5x. The runs simulated on those were predicted within 8.5% at the
// median, those on the 19 wider ones within 16.7%, and the worst of all (67%) on the widest
// (2.07x). Only fmnist-mlp's runs show the difference (19.6% against 13.5%), fmnist-cnn's not
// (6.1% against 6.6%). analysis/validation/summarize.py groups runs at this threshold too.
inline constexpr double kSteadyStepSpread = 1.5;

// A warning when a step's timed parts (seconds, every rank's pooled) spread wider than
// steady_spread from p10 to p90, naming the spread and the median; empty otherwise.
std::string unsteady_step_warning(const std::vector<double>& step_seconds,
                                  double steady_spread = kSteadyStepSpread);

}  // namespace syncopate::app
