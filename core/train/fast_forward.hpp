#pragma once
// Steady-state fast-forward of cost-only runs: once the last two synchronisation periods of
// steps changed the records by exactly the same amounts, the steps up to the next step that
// must run are skipped, and the worker loop applies what they would have added.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "core/comm/comm.hpp"
#include "core/train/epoch_plan.hpp"

namespace syncopate {

// Everything a step changes in the records, to detect and extrapolate steady state.
struct StepDelta {
  double time = 0, compute = 0, comm = 0, idle = 0;
  uint64_t sent = 0, recv = 0;
  double comm_total = 0;
  bool same_as(const StepDelta& other) const;
  StepDelta& operator+=(const StepDelta& other);
};

// Steps skipped after the one just run, and what they would have added to the records
// (`delta.time` is how far the worker's clock must move).
struct Skip {
  size_t steps = 0;
  StepDelta delta;
};

// Every step's delta is recorded; once the last two periods (of sync_period steps, the
// strategy's synchronisation period) cost exactly the same, whole periods are skipped. Never
// skipped: a step of another batch size, a block's first step (its hooks run), and the epoch's
// last step. Workers that synchronise every period decide together (Executor::all_agree, at the
// same step on every worker); others decide alone.
class FastForward {
 public:
  enum class Use { kOff, kOn };
  explicit FastForward(Use use) : on_(use == Use::kOn) {}

  // Step k of `steps` has just run and changed the records by `delta`: the steps to skip now
  // (none most of the time, and always none when off).
  Skip after_step(const StepDelta& delta, size_t k, std::span<const PlannedStep> steps,
                  int64_t sync_period, Executor& exec);
  // The deltas held now: at most the last two periods (of the longest period seen), however
  // many steps ran since the last skip (noise keeps steps from repeating: a whole epoch).
  size_t held() const { return recent_.size(); }

 private:
  // The sum of the deltas of steps from .. to - 1, counted since the last skip (all held).
  StepDelta sum(size_t from, size_t to) const;
  bool on_;
  size_t steps_ = 0;              // steps recorded since the last skip
  size_t keep_ = 0;               // deltas to hold: two periods
  std::deque<StepDelta> recent_;  // the deltas of steps steps_ - recent_.size() .. steps_ - 1
};

}  // namespace syncopate
