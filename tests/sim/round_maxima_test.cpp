// RoundMaxima: ring phases timed in closed form give, bit for bit, the duration that the same
// schedule's messages give one by one, whatever the routes; and with a 16-bit format's passes,
// the same forwarding.
#include "backends/sim/round_maxima.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/comm/collective_schedule.hpp"

namespace syncopate::sim {
namespace {

// A message's time on a fabric where every pair of ranks has its own latency and bandwidth (a
// hash of the pair), so that the longest message of a round depends on which pairs carry the
// larger blocks.
double uneven_seconds(int from, int to, size_t count) {
  const auto h = static_cast<unsigned>(from * 7919 + to * 104729) % 97u;
  const double latency = 1e-6 * (1 + h % 13), bandwidth = 1e9 * (1 + h % 7);
  return latency + 4.0 * static_cast<double>(count) / bandwidth;
}

// Local passes that tell every case apart: an encoding unless forwarded, and the receiver's
// reduction or copy, each at its own speed.
double passes(RecvAction action, size_t count, bool forwarded) {
  const double n = static_cast<double>(count);
  return (forwarded ? 0.0 : 1e-10 * n) + (action == RecvAction::kReduce ? 3e-10 : 2e-11) * n;
}

// The same duration from every message of the stored schedule, round by round; with
// `forwarding`, with the passes above.
double by_message(const Schedule& s, bool forwarding = false) {
  RoundMaxima rounds(uneven_seconds, forwarding ? RoundMaxima::PassSeconds(passes) : nullptr,
                     forwarding);
  for (size_t k = 0; k < s.rounds.size(); ++k)
    for (size_t r = 0; r < s.rounds[k].size(); ++r)
      if (const Step& step = s.rounds[k][r]; step.send_to >= 0)
        rounds.message({.round = k,
                        .from = static_cast<int>(r),
                        .to = step.send_to,
                        .segment = step.send,
                        .action = s.rounds[k][static_cast<size_t>(step.send_to)].action});
  return rounds.total();
}

TEST(RoundMaxima, RingPhasesInClosedFormEqualTheirMessages) {
  for (int p : {2, 3, 8, 12, 20}) {
    for (int per_node : {1, 2, 4}) {
      if (p % per_node != 0) continue;
      std::vector<int> nodes;
      for (int r = 0; r < p; ++r) nodes.push_back(r / per_node);
      for (size_t count : {size_t{0}, size_t{5}, size_t{96}, size_t{1001}, size_t{4099}}) {
        for (const auto& [kind, algorithm] :
             {std::pair{CollectiveKind::kAllreduce, Algorithm::kRing},
              std::pair{CollectiveKind::kAllreduce, Algorithm::kHierarchical},
              std::pair{CollectiveKind::kAllreduce, Algorithm::kRabenseifner},
              std::pair{CollectiveKind::kReduceScatter, Algorithm::kRing},
              std::pair{CollectiveKind::kAllgather, Algorithm::kRing}}) {
          SCOPED_TRACE(std::string(to_string(kind)) + " " + std::string(to_string(algorithm)) +
                       " p=" + std::to_string(p) + " per node " + std::to_string(per_node) +
                       " count " + std::to_string(count));
          const Schedule schedule = make_schedule(kind, algorithm, p, count, 0, nodes);
          RoundMaxima streamed(uneven_seconds);
          stream_schedule(kind, algorithm, p, count, 0, nodes, streamed);
          const double expected = by_message(schedule);
          EXPECT_EQ(streamed.total(), expected);
          EXPECT_GT(expected, 0.0);
          // With a 16-bit format's passes: a ring phase that copies forwards from its second
          // round, as the messages one by one find it from their senders' receives.
          RoundMaxima wire(uneven_seconds, passes, true);
          stream_schedule(kind, algorithm, p, count, 0, nodes, wire);
          EXPECT_DOUBLE_EQ(wire.total(), by_message(schedule, true));
        }
      }
    }
  }
}

}  // namespace
}  // namespace syncopate::sim
