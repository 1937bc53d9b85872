// stream_schedule: every message of every schedule without storing it, and the traffic-only
// cache built from it (the simulator's analytic cost-only form: O(ranks) memory per schedule).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/comm/collective_schedule.hpp"
#include "core/comm/schedule_cache.hpp"

namespace syncopate {
namespace {

using Message = std::tuple<size_t, int, int, size_t, size_t, RecvAction>;

std::vector<Message> stored_messages(const Schedule& s) {
  std::vector<Message> out;
  for (size_t k = 0; k < s.rounds.size(); ++k)
    for (size_t r = 0; r < s.rounds[k].size(); ++r) {
      const Step& step = s.rounds[k][r];
      if (step.send_to < 0) continue;
      const Step& peer = s.rounds[k][static_cast<size_t>(step.send_to)];
      out.emplace_back(k, static_cast<int>(r), step.send_to, step.send.offset, step.send.count,
                       peer.action);
    }
  return out;
}

std::vector<int> nodes_of(int p, int per_node) {
  std::vector<int> nodes;
  for (int r = 0; r < p; ++r) nodes.push_back(r / per_node);
  return nodes;
}

// The same messages, rounds and per-rank traffic.
void expect_same_traffic(const CachedSchedule& b, const CachedSchedule& a) {
  EXPECT_EQ(b.messages, a.messages);
  EXPECT_EQ(b.rounds, a.rounds);
  ASSERT_EQ(b.traffic.size(), a.traffic.size());
  for (size_t r = 0; r < a.traffic.size(); ++r) {
    EXPECT_EQ(b.traffic[r].bytes_sent, a.traffic[r].bytes_sent) << r;
    EXPECT_EQ(b.traffic[r].bytes_recv, a.traffic[r].bytes_recv) << r;
    EXPECT_EQ(b.traffic[r].sends, a.traffic[r].sends) << r;
  }
}

struct StreamCase {
  CollectiveKind kind;
  Algorithm algorithm;
  int root;
};

TEST(ScheduleStream, EmitsExactlyTheMessagesOfTheStoredSchedule) {
  const std::vector<StreamCase> cases = {
      {CollectiveKind::kAllreduce, Algorithm::kRing, 0},
      {CollectiveKind::kAllreduce, Algorithm::kRabenseifner, 0},
      {CollectiveKind::kAllreduce, Algorithm::kRecursiveDoubling, 0},
      {CollectiveKind::kAllreduce, Algorithm::kBinomialTree, 0},
      {CollectiveKind::kAllreduce, Algorithm::kHierarchical, 0},
      {CollectiveKind::kAllreduce, Algorithm::kMaster, 0},
      {CollectiveKind::kAllreduce, Algorithm::kAuto, 0},
      {CollectiveKind::kReduceScatter, Algorithm::kRing, 0},
      {CollectiveKind::kAllgather, Algorithm::kRing, 0},
      {CollectiveKind::kBroadcast, Algorithm::kBinomialTree, 1},
      {CollectiveKind::kReduce, Algorithm::kBinomialTree, 2},
      {CollectiveKind::kBarrier, Algorithm::kRecursiveDoubling, 0},
  };
  for (int p : {3, 4, 6, 8, 12}) {
    for (int per_node : {1, 2, 3}) {
      const std::vector<int> nodes = nodes_of(p, per_node);
      for (const StreamCase& c : cases) {
        const size_t count = c.kind == CollectiveKind::kBarrier ? 0 : 1001;
        const Schedule s = make_schedule(c.kind, c.algorithm, p, count, c.root, nodes);
        std::vector<Message> streamed;
        EachMessage sink([&](const ScheduledMessage& m) {
          streamed.emplace_back(m.round, m.from, m.to, m.segment.offset, m.segment.count, m.action);
        });
        const ScheduleOutline outline =
            stream_schedule(c.kind, c.algorithm, p, count, c.root, nodes, sink);
        std::sort(streamed.begin(), streamed.end());
        SCOPED_TRACE(std::string(to_string(c.kind)) + " " + std::string(to_string(c.algorithm)) +
                     " p=" + std::to_string(p) + " per node " + std::to_string(per_node));
        EXPECT_EQ(outline.algorithm, s.algorithm);
        EXPECT_EQ(outline.rounds, s.rounds.size());
        EXPECT_EQ(streamed, stored_messages(s));
      }
    }
  }
}

TEST(ScheduleStream, TrafficOnlyCacheHasTheTrafficOfWholeSchedulesAndNoSteps) {
  const std::vector<int> nodes = nodes_of(12, 4);
  ScheduleCache whole(nodes, CacheScope::kAllRanks);
  ScheduleCache traffic(nodes, CacheScope::kTrafficOnly);
  for (size_t count : {size_t{10}, size_t{1000}, size_t{1} << 20}) {
    const ScheduleKey key = whole.key(CollectiveKind::kAllreduce, Algorithm::kAuto, count, 0);
    const CachedSchedule& a = whole.entry(key);
    size_t messages = 0;
    EachMessage count_them([&](const ScheduledMessage&) { ++messages; });
    const CachedSchedule& b = traffic.entry(key, &count_them);
    EXPECT_EQ(b.algorithm, a.algorithm);
    expect_same_traffic(b, a);
    EXPECT_EQ(messages, a.messages) << "the sink sees every message once";
    EXPECT_EQ(b.schedule, nullptr);
    EXPECT_TRUE(b.steps.empty());
    messages = 0;  // a found entry streams its messages again for a sink
    EXPECT_EQ(&traffic.entry(key, &count_them), &b);
    EXPECT_EQ(messages, a.messages);
  }
}

// Ring phases streamed whole carry their traffic in closed form: every count (with and without a
// remainder over the ring, fewer elements than ranks, none), every ring schedule and the
// hierarchical allreduce over nodes of 1 to 4 ranks give each rank the stored schedule's bytes
// and messages.
TEST(ScheduleStream, RingPhasesCarryTheStoredSchedulesTraffic) {
  for (int p : {2, 5, 8, 12}) {
    for (int per_node : {1, 2, 4}) {
      if (p % per_node != 0) continue;
      const std::vector<int> nodes = nodes_of(p, per_node);
      ScheduleCache whole(nodes, CacheScope::kAllRanks);
      ScheduleCache traffic(nodes, CacheScope::kTrafficOnly);
      for (size_t count : {size_t{0}, size_t{3}, size_t{96}, size_t{1001}}) {
        for (const auto& [kind, algorithm] :
             {std::pair{CollectiveKind::kAllreduce, Algorithm::kRing},
              std::pair{CollectiveKind::kAllreduce, Algorithm::kHierarchical},
              std::pair{CollectiveKind::kReduceScatter, Algorithm::kRing},
              std::pair{CollectiveKind::kAllgather, Algorithm::kRing}}) {
          SCOPED_TRACE(std::string(to_string(kind)) + " " + std::string(to_string(algorithm)) +
                       " p=" + std::to_string(p) + " per node " + std::to_string(per_node) +
                       " count " + std::to_string(count));
          const ScheduleKey key = whole.key(kind, algorithm, count, 0, WireFormat::kBf16);
          const CachedSchedule& a = whole.entry(key);
          const CachedSchedule& b = traffic.entry(key);
          expect_same_traffic(b, a);
        }
      }
    }
  }
}

// The form that lets the simulator time a hierarchical allreduce over thousands of nodes: the
// schedule of 4,096 ranks (2,052 rounds, 8.4 M steps, 470 MB stored) is never stored.
TEST(ScheduleStream, ThousandsOfRanksCostTheirTrafficOnly) {
  ScheduleCache traffic(nodes_of(4096, 4), CacheScope::kTrafficOnly);
  const ScheduleKey key =
      traffic.key(CollectiveKind::kAllreduce, Algorithm::kAuto, size_t{25} << 18, 0);
  const CachedSchedule& e = traffic.entry(key);
  EXPECT_EQ(e.algorithm, Algorithm::kHierarchical);
  EXPECT_EQ(e.rounds, 2u * 1023 + 2 * 3);
  EXPECT_EQ(e.schedule, nullptr);
  EXPECT_TRUE(e.steps.empty());
  // Each rank: 3 + 2 * 1023 + 3 messages, ring volumes of its shard.
  EXPECT_EQ(e.traffic[17].sends, 3u + 2 * 1023 + 3);
  EXPECT_EQ(e.messages, 4096u * (3 + 2 * 1023 + 3));
}

}  // namespace
}  // namespace syncopate
