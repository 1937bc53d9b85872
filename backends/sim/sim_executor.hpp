#pragma once
// The simulator's Executor: simulated time of one worker.
//
// compute(cost, math) runs math (unless cost-only) and advances this worker's clock by the
// profile's measured time of the layer pass when it holds one for the cost's layer key (kind,
// input and output shapes: `syncopate calibrate`), else by
//   max(cost.flops / profile.flops_per_s[cost.kind], cost.bytes / profile.memory_bandwidth),
// all times the worker's slowdown (its node's time-sharing, Platform::cores_per_node, times its
// speed among unequal workers, HostProfile::worker_spread, times its straggler factor), then
// stretched by the worker's [[sim.faults]] stragglers (sim_faults.hpp) from its own clock.
// begin_step() adds the step's fixed overhead (profile.step_overhead_s: the batch copy, kernel
// launches, framework bookkeeping) the same way, outside any compute(), so that it counts as
// idle time, as a measured run's does.
// Compute is lazy: it only adds to the worker's pending time (WorkerState::lag), which is slept
// before the worker's next interaction with other actors, so a step of hundreds of layers costs
// no SimGrid event at all. now() includes the pending time.
//
// With per-step noise (SimOptions::noise), each step's compute is also multiplied by a factor
// drawn from (noise seed, worker, the worker's step count): a step ends with its optimizer
// cost, and the next step draws a new factor. Deterministic given the seed.
//
// all_agree(vote) is a consensus of all workers that leaves every worker's clock where it was
// (zero simulated time); advance(seconds) adds skipped time (steady-state fast-forward).
#include "backends/sim/sim_faults.hpp"
#include "backends/sim/sim_world.hpp"
#include "core/comm/comm.hpp"

namespace syncopate::sim {

struct HostProfile;

// Modelled seconds of `cost` on a host with `profile` (no slowdown).
double compute_seconds(const HostProfile& profile, const Cost& cost);

class SimExecutor final : public Executor {
 public:
  SimExecutor(SimWorld& world, int worker);

  double now() const override { return me_.now(); }
  void compute(const Cost& cost, FunctionRef<void()> math) override;
  void begin_step() override;  // the profile's step overhead, as compute is (lazy, stretched)
  bool cost_only() const override { return world_.options().cost_only; }
  bool all_agree(bool vote) override;
  void advance(double seconds) override;
  // {now(), compute-noise step count}; restoring makes the worker's clock read the saved time
  // (as pending time, slept before its next interaction).
  std::vector<double> clock_state() const override;
  void restore_clock(std::span<const double> state) override;

 private:
  double noise_factor();  // this step's
  // Adds `seconds` of this worker's work (times its slowdown and the step's noise, stretched by
  // its stragglers) to its pending time.
  void spend(double seconds);

  SimWorld& world_;
  WorkerState& me_;
  uint64_t step_ = 0;                    // steps whose compute has ended (optimizer costs seen)
  double factor_ = -1;                   // this step's noise factor; < 0: not drawn yet
  std::vector<SpeedWindow> stragglers_;  // [[sim.faults]] stragglers of this worker
};

}  // namespace syncopate::sim
