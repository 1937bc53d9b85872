#pragma once
// RoundMaxima: the analytic duration of a streamed schedule (the simulator's analytic fidelity):
// per round, its longest message over its route (with the sender's local pass before it and the
// receiver's after it), no contention; the rounds one after the other.
// On a platform whose routes are all alike this is each algorithm's closed form (ring:
// 2(p-1) alpha + 2(p-1)/p n beta).
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/comm/collective_schedule.hpp"

namespace syncopate::sim {

class RoundMaxima final : public ScheduleSink {
 public:
  // The time of a message of `count` floats from rank `from` to rank `to`.
  using MessageSeconds = std::function<double(int from, int to, size_t count)>;
  // The local passes around a message of `count` floats whose receiver applies `action`: the
  // sender's before it (an encoding, none when `forwarded`) and the receiver's after it.
  using PassSeconds = std::function<double(RecvAction action, size_t count, bool forwarded)>;
  // `passes` empty: none. With `forwarding` (a 16-bit wire format), a message is `forwarded`
  // when its sender received and copied the same segment in the round before, and in a ring
  // phase that copies from its second round on (its first round is taken to encode). The real
  // backend (forwards_received) looks at the sender's previous step, idle rounds skipped: the two
  // differ only where a rank idles between receiving a segment and sending it on.
  explicit RoundMaxima(MessageSeconds seconds, PassSeconds passes = {}, bool forwarding = false)
      : seconds_(std::move(seconds)),
        passes_(std::move(passes)),
        forwarding_(forwarding && passes_) {}  // without passes, nothing to save

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
  double seconds(int from, int to, size_t count, RecvAction action, bool forwarded);
  bool forwarded(const ScheduledMessage& m) const;
  void received(const ScheduledMessage& m);

  // A rank's receive in a streamed message.
  struct Received {
    size_t round = SIZE_MAX;
    Segment segment;
    RecvAction action = RecvAction::kReduce;
  };

  MessageSeconds seconds_;
  PassSeconds passes_;
  bool forwarding_;
  std::vector<double> longest_;  // per round
  // With forwarding_: per rank, its two latest receives among the streamed messages. When a
  // rank's message of round k is timed, its receive of round k may be recorded already; the one
  // of round k - 1 decides.
  std::vector<std::array<Received, 2>> received_;
};

}  // namespace syncopate::sim
