#pragma once
// RoundMaxima: the analytic duration of a streamed schedule (the simulator's analytic fidelity):
// per round, its longest message over its route (and the receiver's local pass, a reduction, after
// it), no contention; the rounds one after the other.
// On a platform whose routes are all alike this is each algorithm's closed form (ring:
// 2(p-1) alpha + 2(p-1)/p n beta).
#include <cstddef>
#include <functional>
#include <vector>

#include "core/comm/collective_schedule.hpp"

namespace syncopate::sim {

class RoundMaxima final : public ScheduleSink {
 public:
  // The time of a message of `count` floats from rank `from` to rank `to`.
  using MessageSeconds = std::function<double(int from, int to, size_t count)>;
  // The receiver's local pass after a message of `count` floats whose action is `action`.
  using ActionSeconds = std::function<double(RecvAction action, size_t count)>;
  explicit RoundMaxima(MessageSeconds seconds, ActionSeconds action = {})
      : seconds_(std::move(seconds)), action_(std::move(action)) {}

  void message(const ScheduledMessage& m) override;
  // A ring phase of m ranks in O(m log m) rather than its m (m - 1) messages, with the same
  // result bit for bit: its blocks have base or base + 1 elements (block_of), and in round k the
  // pairs (ring[i], ring[i + 1]) that carry a larger one are the cyclic range of `extra` pairs
  // from i = k + shift; the round's longest message is the larger of two range maxima.
  void ring(const RingPhase& phase) override;
  // The sum of the rounds' longest messages, in round order.
  double total() const;

 private:
  double& round(size_t k);
  double seconds(int from, int to, size_t count, RecvAction action);

  MessageSeconds seconds_;
  ActionSeconds action_;
  std::vector<double> longest_;  // per round
};

}  // namespace syncopate::sim
