// The steady-state fast-forward's decision: when, and how many steps, to skip.
#include "core/train/fast_forward.hpp"

#include <algorithm>
#include <cmath>

#include "core/base/check.hpp"

namespace syncopate {

bool StepDelta::same_as(const StepDelta& o) const {
  const auto close = [](double a, double b) {
    return std::abs(a - b) <= 1e-9 * std::max({std::abs(a), std::abs(b), 1e-12});
  };
  return close(time, o.time) && close(compute, o.compute) && close(comm, o.comm) &&
         close(idle, o.idle) && sent == o.sent && recv == o.recv && close(comm_total, o.comm_total);
}

StepDelta& StepDelta::operator+=(const StepDelta& o) {
  time += o.time;
  compute += o.compute;
  comm += o.comm;
  idle += o.idle;
  sent += o.sent;
  recv += o.recv;
  comm_total += o.comm_total;
  return *this;
}

Skip FastForward::after_step(const StepDelta& delta, size_t k, std::span<const PlannedStep> steps,
                             int64_t sync, Executor& exec) {
  if (!on_) return {};
  const size_t period = static_cast<size_t>(std::max<int64_t>(sync, 1));
  keep_ = std::max(keep_, 2 * period);
  recent_.push_back(delta);
  ++steps_;
  while (recent_.size() > keep_) recent_.pop_front();
  if (steps_ % period != 0) return {};
  const auto periods = static_cast<int64_t>(steps_ / period);
  // Tries after 3..8 periods of steady state, then at powers of two: soon, and cheaply.
  if (periods < 3 || (periods > 8 && (periods & (periods - 1)) != 0)) return {};
  size_t limit = k + 1;  // the first step that must run
  while (limit + 1 < steps.size() && steps[limit].size == steps[k].size &&
         !steps[limit].block_begin)
    ++limit;
  const size_t remaining = (limit - (k + 1)) / period;
  const StepDelta last = sum(steps_ - period, steps_);
  const StepDelta before = sum(steps_ - 2 * period, steps_ - period);
  const bool vote = remaining > 0 && last.same_as(before);
  if (!(sync > 0 ? exec.all_agree(vote) : vote)) return {};
  steps_ = 0;
  recent_.clear();
  const double r = static_cast<double>(remaining);
  return {remaining * period,
          {r * last.time, r * last.compute, r * last.comm, r * last.idle, remaining * last.sent,
           remaining * last.recv, r * last.comm_total}};
}

StepDelta FastForward::sum(size_t from, size_t to) const {
  const size_t first = steps_ - recent_.size();  // the step of recent_[0]
  SYNC_CHECK(from >= first && to <= steps_,
             "steps " << from << ".." << to << " of " << first << ".." << steps_ << " held");
  StepDelta d;
  for (size_t i = from; i < to; ++i) d += recent_[i - first];
  return d;
}

}  // namespace syncopate
