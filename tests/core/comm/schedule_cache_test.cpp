// ScheduleCache: keys name the schedule actually run, cached steps and traffic are those of
// the core's schedules, and the bounds drop or rebuild without changing a step.
#include "core/comm/schedule_cache.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace syncopate {
namespace {

bool same_steps(const std::vector<Step>& a, const std::vector<Step>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Step &x = a[i], &y = b[i];
    if (x.send_to != y.send_to || x.recv_from != y.recv_from || x.action != y.action ||
        x.send.offset != y.send.offset || x.send.count != y.send.count ||
        x.recv.offset != y.recv.offset || x.recv.count != y.recv.count)
      return false;
  }
  return true;
}

TEST(ScheduleCache, KeysNameTheScheduleThatRuns) {
  const ScheduleCache cache({0, 0, 1, 1}, CacheScope::kOneRank, 2);
  const ScheduleKey auto_key = cache.key(CollectiveKind::kAllreduce, Algorithm::kAuto, 1000, 3);
  EXPECT_NE(auto_key.algorithm, Algorithm::kAuto);
  EXPECT_EQ(auto_key.algorithm,
            resolve_algorithm(Algorithm::kAuto, 4, 4000, std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(auto_key.root, 0) << "allreduce has no root";
  // The algorithm of the other kinds is fixed by the kind; the root matters for trees only.
  EXPECT_EQ(cache.key(CollectiveKind::kBroadcast, Algorithm::kBinomialTree, 9, 2),
            cache.key(CollectiveKind::kBroadcast, Algorithm::kAuto, 9, 2));
  EXPECT_NE(cache.key(CollectiveKind::kBroadcast, Algorithm::kAuto, 9, 2),
            cache.key(CollectiveKind::kBroadcast, Algorithm::kAuto, 9, 1));
  // Reduce-scatters and allgathers run hierarchically across nodes unless the ring is asked for.
  for (const CollectiveKind kind : {CollectiveKind::kAllgather, CollectiveKind::kReduceScatter}) {
    EXPECT_EQ(cache.key(kind, Algorithm::kAuto, 9, 3).algorithm, Algorithm::kHierarchical);
    EXPECT_EQ(cache.key(kind, Algorithm::kAuto, 9, 3),
              cache.key(kind, Algorithm::kHierarchical, 9, 0));
    EXPECT_EQ(cache.key(kind, Algorithm::kRing, 9, 3).algorithm, Algorithm::kRing);
    const ScheduleCache one_node({0, 0, 0}, CacheScope::kOneRank, 1);
    EXPECT_EQ(one_node.key(kind, Algorithm::kAuto, 9, 3).algorithm, Algorithm::kRing);
  }
}

TEST(ScheduleCache, OneRankKeepsThatRanksStepsAndEveryRanksTraffic) {
  const std::vector<int> nodes{0, 0, 0, 1, 1};
  for (int rank = 0; rank < 5; ++rank) {
    ScheduleCache cache(nodes, CacheScope::kOneRank, rank);
    for (CollectiveKind kind :
         {CollectiveKind::kAllreduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllgather,
          CollectiveKind::kBroadcast, CollectiveKind::kReduce, CollectiveKind::kBarrier}) {
      const size_t count = kind == CollectiveKind::kBarrier ? 0 : 23;
      const ScheduleKey key = cache.key(kind, Algorithm::kRing, count, 4);
      const CachedSchedule& e = cache.entry(key);
      const Schedule s = make_schedule(kind, key.algorithm, 5, count, key.root, nodes);
      EXPECT_TRUE(same_steps(e.steps, steps_of_rank(s, rank))) << to_string(kind);
      EXPECT_EQ(e.schedule, nullptr);
      size_t max_recv = 0;
      for (const Step& step : e.steps)
        if (step.recv_from >= 0) max_recv = std::max(max_recv, step.recv.count);
      EXPECT_EQ(e.max_recv, max_recv);
      ASSERT_EQ(e.traffic.size(), 5u);
      for (int r = 0; r < 5; ++r)
        EXPECT_EQ(e.traffic[static_cast<size_t>(r)].bytes_sent, bytes_sent(s, r))
            << to_string(kind) << " rank " << r;
      EXPECT_EQ(&cache.entry(key), &e) << "built once";
    }
  }
}

TEST(ScheduleCache, OneRankStartsAfreshBeyondItsBound) {
  ScheduleCache cache({0, 0}, CacheScope::kOneRank, 1);
  const CachedSchedule* first = &cache.entry(cache.key(CollectiveKind::kAllgather, {}, 1, 0));
  for (size_t n = 2; n <= ScheduleCache::kMaxEntries; ++n)
    cache.entry(cache.key(CollectiveKind::kAllgather, {}, n, 0));
  EXPECT_EQ(&cache.entry(cache.key(CollectiveKind::kAllgather, {}, 1, 0)), first);
  cache.entry(cache.key(CollectiveKind::kAllgather, {}, ScheduleCache::kMaxEntries + 1, 0));
  const CachedSchedule& again = cache.entry(cache.key(CollectiveKind::kAllgather, {}, 1, 0));
  EXPECT_TRUE(same_steps(
      again.steps,
      steps_of_rank(make_schedule(CollectiveKind::kAllgather, Algorithm::kRing, 2, 1, 0), 1)));
}

TEST(ScheduleCache, AllRanksRebuildsDroppedSchedulesIdentically) {
  const int p = 64;  // a ring of 64 ranks and 1 float: 126 rounds x 64 steps
  ScheduleCache cache(std::vector<int>(p, 0), CacheScope::kAllRanks);
  const CachedSchedule& ring =
      cache.entry(cache.key(CollectiveKind::kAllreduce, Algorithm::kRing, 1000, 0));
  ASSERT_NE(ring.schedule, nullptr);
  const std::shared_ptr<const Schedule> before = cache.schedule(ring);
  // Fill the step budget with other schedules: the ring's is dropped, its entry stays.
  const size_t steps_each = before->rounds.size() * static_cast<size_t>(p);
  for (size_t n = 1; n <= ScheduleCache::kMaxSteps / steps_each + 1; ++n)
    cache.entry(cache.key(CollectiveKind::kAllreduce, Algorithm::kRing, 1000 + n, 0));
  EXPECT_EQ(ring.schedule, nullptr);
  const std::shared_ptr<const Schedule> after = cache.schedule(ring);
  ASSERT_EQ(after->rounds.size(), before->rounds.size());
  for (size_t k = 0; k < after->rounds.size(); ++k)
    ASSERT_TRUE(same_steps(after->rounds[k], before->rounds[k])) << "round " << k;
  EXPECT_EQ(ring.messages, static_cast<uint64_t>(2 * (p - 1) * p));
}

}  // namespace
}  // namespace syncopate
