// SimExecutor: compute as simulated time from the host profile, fast-forward votes.
#include "backends/sim/sim_executor.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/sim/platform/platform.hpp"
#include "core/base/rng.hpp"

namespace syncopate::sim {

const LayerTime* find_layer_time(const HostProfile& profile, const LayerKey& key) {
  if (key.pass == Pass::kNone) return nullptr;
  for (const LayerTime& layer : profile.layers) {
    if (layer.kind == key.kind && std::ranges::equal(layer.input, key.input) &&
        std::ranges::equal(layer.output, key.output))
      return &layer;
  }
  return nullptr;
}

double compute_seconds(const HostProfile& profile, const Cost& cost) {
  if (const LayerTime* measured = find_layer_time(profile, cost.layer))
    return cost.layer.pass == Pass::kForward ? measured->forward_s : measured->backward_s;
  double seconds = 0;
  if (cost.flops > 0) {
    const double speed = profile.flops_per_s[static_cast<size_t>(cost.kind)];
    if (!(speed > 0))
      throw UserError("sim: host profile '" + profile.name + "': flops_per_s of '" +
                      std::string(to_string(cost.kind)) + "' is " + std::to_string(speed) +
                      "; allowed: > 0");
    seconds = cost.flops / speed;
  }
  if (cost.bytes > 0) {
    if (!(profile.memory_bandwidth > 0))
      throw UserError("sim: host profile '" + profile.name + "': memory_bandwidth is " +
                      std::to_string(profile.memory_bandwidth) + "; allowed: > 0");
    seconds = std::max(seconds, cost.bytes / profile.memory_bandwidth);
  }
  return seconds;
}

SimExecutor::SimExecutor(SimWorld& world, int worker)
    : world_(world),
      me_(world.worker(worker)),
      stragglers_(straggler_windows(world.options().faults, worker)) {}

void SimExecutor::compute(const Cost& cost, FunctionRef<void()> math) {
  if (!world_.options().cost_only) math();
  ++me_.events;
  const HostProfile& profile = world_.platform().profile;
  spend(compute_seconds(profile, cost) * profile.compute_skew);
  if (cost.kind == OpKind::kOptimizer) {  // the step's compute ends: the next draws anew
    ++step_;
    factor_ = -1;
  }
}

void SimExecutor::begin_step() {
  const double overhead = world_.platform().profile.step_overhead_s;
  if (overhead > 0) spend(overhead);
}

void SimExecutor::spend(double seconds) {
  const double work = seconds * me_.slowdown * noise_factor();
  me_.lag += stragglers_.empty() ? work : stretched_seconds(me_.now(), work, stragglers_);
}

double SimExecutor::noise_factor() {
  const ComputeNoise& noise = world_.options().noise;
  if (noise.kind == NoiseKind::kNone) return 1;
  if (factor_ >= 0) return factor_;
  Rng rng({.seed = noise.seed,
           .worker = static_cast<uint32_t>(me_.id),
           .epoch = static_cast<uint32_t>(step_ >> 32),
           .purpose = RngPurpose::kComputeNoise,
           .extra = static_cast<uint32_t>(step_)});
  const double z = rng.normal();
  factor_ = noise.kind == NoiseKind::kLognormal
                ? std::exp(noise.sigma * z - noise.sigma * noise.sigma / 2)
                : std::max(0.0, 1 + noise.sigma * z);
  return factor_;
}

bool SimExecutor::all_agree(bool vote) { return world_.all_agree(me_.id, vote); }

void SimExecutor::advance(double seconds) {
  SYNC_CHECK(seconds >= 0, "seconds=" << seconds);
  me_.lag += seconds;
}

std::vector<double> SimExecutor::clock_state() const { return {now(), static_cast<double>(step_)}; }

void SimExecutor::restore_clock(std::span<const double> state) {
  SYNC_CHECK(state.size() == 2, "clock state of " << state.size() << " numbers");
  SYNC_CHECK(state[0] >= now(), "resuming at " << state[0] << " s, the clock reads " << now());
  me_.lag += state[0] - now();
  step_ = static_cast<uint64_t>(state[1]);
  factor_ = -1;
}

}  // namespace syncopate::sim
