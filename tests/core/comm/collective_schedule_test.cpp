// Collective schedules: every algorithm and p = 1..17 against the direct reduction, traffic, steps
// per rank.
#include "core/comm/collective_schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/comm/comm.hpp"

namespace syncopate {
namespace {

using Buffers = std::vector<std::vector<float>>;

struct ScheduleCase {
  Algorithm algorithm;
  std::vector<int> node_of_rank;  // empty except for kHierarchical
  std::string name;
};

// Every algorithm for p ranks; hierarchical with 1-4 nodes where N divides p, with the ranks of a
// node contiguous (r / L) and interleaved (r % N, node ids not starting at 0).
std::vector<ScheduleCase> cases_for(int p) {
  std::vector<ScheduleCase> cases = {{Algorithm::kRing, {}, "ring"},
                                     {Algorithm::kRabenseifner, {}, "rabenseifner"},
                                     {Algorithm::kRecursiveDoubling, {}, "recursive_doubling"},
                                     {Algorithm::kBinomialTree, {}, "binomial_tree"},
                                     {Algorithm::kMaster, {}, "master"}};
  for (int nodes = 1; nodes <= 4; ++nodes) {
    if (p % nodes != 0) continue;
    std::vector<int> contiguous, interleaved;
    for (int r = 0; r < p; ++r) {
      contiguous.push_back(r / (p / nodes));
      interleaved.push_back(10 - r % nodes);
    }
    cases.push_back(
        {Algorithm::kHierarchical, contiguous, "hierarchical/contiguous/" + std::to_string(nodes)});
    cases.push_back({Algorithm::kHierarchical, interleaved,
                     "hierarchical/interleaved/" + std::to_string(nodes)});
  }
  return cases;
}

std::vector<size_t> counts_for(int p) { return {0, 1, static_cast<size_t>(p - 1), 1000, 1001}; }

enum class Values { kIntegers, kPositiveReals, kSignedReals };

Buffers random_buffers(int p, size_t count, uint32_t seed, Values values) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> integer(-1000, 1000);
  std::uniform_real_distribution<float> positive(0.5f, 1.5f), signed_real(-1.0f, 1.0f);
  Buffers data(static_cast<size_t>(p), std::vector<float>(count));
  for (auto& buffer : data)
    for (float& x : buffer)
      x = values == Values::kIntegers        ? static_cast<float>(integer(gen))
          : values == Values::kPositiveReals ? positive(gen)
                                             : signed_real(gen);
  return data;
}

Buffers run(const Schedule& schedule, Buffers data, ReduceOp op) {
  std::vector<std::span<float>> spans(data.begin(), data.end());
  execute_in_memory(schedule, spans, op);
  return data;
}

// Independent structural check: every send meets a receive of the same size in the same round,
// and every segment lies inside the buffer.
::testing::AssertionResult well_formed(const Schedule& s) {
  for (size_t k = 0; k < s.rounds.size(); ++k) {
    if (s.rounds[k].size() != static_cast<size_t>(s.ranks))
      return ::testing::AssertionFailure() << "round " << k << " size";
    for (int r = 0; r < s.ranks; ++r) {
      const Step& step = s.rounds[k][static_cast<size_t>(r)];
      if (step.send.offset + step.send.count > s.count ||
          step.recv.offset + step.recv.count > s.count)
        return ::testing::AssertionFailure() << "round " << k << " rank " << r << " out of range";
      if (step.send_to < 0) continue;
      const Step& peer = s.rounds[k][static_cast<size_t>(step.send_to)];
      if (step.send_to == r || peer.recv_from != r || peer.recv.count != step.send.count)
        return ::testing::AssertionFailure() << "round " << k << " rank " << r << " unmatched";
    }
  }
  return ::testing::AssertionSuccess();
}

int sends_of(const Schedule& s, int rank) {
  int n = 0;
  for (const auto& round : s.rounds) n += round[static_cast<size_t>(rank)].send_to >= 0;
  return n;
}
int recvs_of(const Schedule& s, int rank) {
  int n = 0;
  for (const auto& round : s.rounds) n += round[static_cast<size_t>(rank)].recv_from >= 0;
  return n;
}

int log2_exact(int p) { return std::countr_zero(static_cast<unsigned>(p)); }

// The whole sweep: p = 1..17, every algorithm, every count.
template <typename Body>
void for_all_cases(Body body) {
  for (int p = 1; p <= 17; ++p)
    for (const ScheduleCase& c : cases_for(p))
      for (size_t count : counts_for(p)) {
        SCOPED_TRACE(c.name + " p=" + std::to_string(p) + " count=" + std::to_string(count));
        const Schedule s = make_allreduce_schedule(c.algorithm, p, count, c.node_of_rank);
        ASSERT_EQ(s.algorithm, c.algorithm);
        ASSERT_TRUE(well_formed(s));
        body(p, count, s);
      }
}

TEST(CollectiveSchedule, AllreduceIntegerSumIsExactOnEveryRank) {
  for_all_cases([](int p, size_t count, const Schedule& s) {
    const Buffers in = random_buffers(p, count, 11u * p + count, Values::kIntegers);
    const Buffers out = run(s, in, ReduceOp::kSum);
    for (size_t i = 0; i < count; ++i) {
      int64_t sum = 0;
      for (const auto& b : in) sum += static_cast<int64_t>(b[i]);
      for (int r = 0; r < p; ++r)
        ASSERT_EQ(out[static_cast<size_t>(r)][i], static_cast<float>(sum)) << "r=" << r;
    }
  });
}

// Real data: every rank bit-identical, and within 1e-5 of a double-precision sum. Positive data
// makes the relative error meaningful; signed data exercises cancellation and signed zeros for
// the bitwise agreement.
TEST(CollectiveSchedule, AllreduceRealDataIsBitIdenticalAndAccurate) {
  for_all_cases([](int p, size_t count, const Schedule& s) {
    for (Values values : {Values::kPositiveReals, Values::kSignedReals}) {
      const Buffers in = random_buffers(p, count, 7u * p + count, values);
      const Buffers out = run(s, in, ReduceOp::kSum);
      for (size_t i = 0; i < count; ++i) {
        double ref = 0;
        for (const auto& b : in) ref += b[i];
        const uint32_t bits0 = std::bit_cast<uint32_t>(out[0][i]);
        for (int r = 1; r < p; ++r)
          ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(r)][i]), bits0) << "r=" << r;
        if (values == Values::kPositiveReals) {
          ASSERT_LE(std::abs(out[0][i] - ref), 1e-5 * std::abs(ref)) << "i=" << i;
        }
      }
    }
  });
}

TEST(CollectiveSchedule, AllreduceMaxIsExact) {
  for_all_cases([](int p, size_t count, const Schedule& s) {
    const Buffers in = random_buffers(p, count, 3u * p + count, Values::kSignedReals);
    const Buffers out = run(s, in, ReduceOp::kMax);
    for (size_t i = 0; i < count; ++i) {
      float m = -std::numeric_limits<float>::infinity();
      for (const auto& b : in) m = std::max(m, b[i]);
      for (int r = 0; r < p; ++r) ASSERT_EQ(out[static_cast<size_t>(r)][i], m) << "r=" << r;
    }
  });
}

// The mean of integers: the sum is exact, so the correctly rounded quotient is the reference
// (rounding the exact quotient to double and then to float is innocuous for division).
TEST(CollectiveSchedule, AllreduceAvgAfterFinish) {
  for_all_cases([](int p, size_t count, const Schedule& s) {
    const Buffers in = random_buffers(p, count, 5u * p + count, Values::kIntegers);
    Buffers out = run(s, in, ReduceOp::kAvg);
    for (auto& b : out) finish(ReduceOp::kAvg, p, b);
    for (size_t i = 0; i < count; ++i) {
      int64_t sum = 0;
      for (const auto& b : in) sum += static_cast<int64_t>(b[i]);
      const float expected = static_cast<float>(static_cast<double>(sum) / p);
      for (int r = 0; r < p; ++r) ASSERT_EQ(out[static_cast<size_t>(r)][i], expected);
    }
  });
}

TEST(CollectiveSchedule, FinishDividesExactly) {
  for (int p = 1; p <= 17; ++p) {
    std::vector<float> data(2000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) + 0.25f;
    const std::vector<float> before = data;
    finish(ReduceOp::kAvg, p, data);
    for (size_t i = 0; i < data.size(); ++i)
      ASSERT_EQ(data[i], static_cast<float>(static_cast<double>(before[i]) / p)) << p << " " << i;
    finish(ReduceOp::kSum, p, data);
    finish(ReduceOp::kMax, p, data);
    EXPECT_EQ(data[1], static_cast<float>(1.25 / p));
  }
}

TEST(CollectiveSchedule, ReduceScatterLeavesRankIWithBlockI) {
  for (int p = 1; p <= 17; ++p)
    for (size_t count : counts_for(p)) {
      const Schedule s = make_reduce_scatter_schedule(p, count);
      ASSERT_TRUE(well_formed(s));
      ASSERT_EQ(s.rounds.size(), static_cast<size_t>(p - 1));
      const Buffers in = random_buffers(p, count, 13u * p + count, Values::kIntegers);
      const Buffers out = run(s, in, ReduceOp::kSum);
      for (int r = 0; r < p; ++r) {
        const BlockRange b = block_of(count, p, r);
        for (size_t i = b.offset; i < b.offset + b.count; ++i) {
          int64_t sum = 0;
          for (const auto& buf : in) sum += static_cast<int64_t>(buf[i]);
          ASSERT_EQ(out[static_cast<size_t>(r)][i], static_cast<float>(sum)) << p << " " << r;
        }
      }
    }
}

TEST(CollectiveSchedule, AllgatherFromBlockIOnRankI) {
  for (int p = 1; p <= 17; ++p)
    for (size_t count : counts_for(p)) {
      const Schedule s = make_allgather_schedule(p, count);
      ASSERT_TRUE(well_formed(s));
      Buffers in(static_cast<size_t>(p),
                 std::vector<float>(count, std::numeric_limits<float>::quiet_NaN()));
      for (int r = 0; r < p; ++r) {
        const BlockRange b = block_of(count, p, r);
        for (size_t i = b.offset; i < b.offset + b.count; ++i)
          in[static_cast<size_t>(r)][i] = static_cast<float>(i) * 3.0f + 1.0f;
      }
      const Buffers out = run(s, in, ReduceOp::kSum);
      for (int r = 0; r < p; ++r)
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[static_cast<size_t>(r)][i], static_cast<float>(i) * 3.0f + 1.0f);
    }
}

// N nodes of L ranks, numbered node by node.
std::vector<int> node_major(int nodes, int local) {
  std::vector<int> node_of_rank;
  for (int r = 0; r < nodes * local; ++r) node_of_rank.push_back(r / local);
  return node_of_rank;
}

// The grouped layout gives every rank a block of its block_of size, the blocks tile the buffer,
// and the two copies are inverse permutations.
TEST(GatherLayout, GroupedBlocksKeepTheirSizesAndTileTheBuffer) {
  for (int nodes = 2; nodes <= 5; ++nodes)
    for (int local = 2; local <= 4; ++local) {
      const int p = nodes * local;
      const GatherLayout layout = gather_layout(node_major(nodes, local));
      ASSERT_EQ(layout.per_node, local);
      ASSERT_EQ(layout.ranks, p);
      for (size_t count = 0; count <= 3 * static_cast<size_t>(p) + 1; ++count) {
        SCOPED_TRACE(std::to_string(nodes) + "x" + std::to_string(local) + " count " +
                     std::to_string(count));
        std::vector<int> owner(count, -1);
        for (int r = 0; r < p; ++r) {
          const Segment b = layout.block(count, r);
          ASSERT_EQ(b.count, block_of(count, p, r).count);
          for (size_t i = b.offset; i < b.offset + b.count; ++i) {
            ASSERT_LT(i, count);
            ASSERT_EQ(owner[i], -1) << "blocks overlap";
            owner[i] = r;
          }
        }
        ASSERT_TRUE(std::find(owner.begin(), owner.end(), -1) == owner.end());
        std::vector<float> caller(count), grouped(count), back(count);
        for (size_t i = 0; i < count; ++i) caller[i] = static_cast<float>(i);
        layout.to_schedule(caller, grouped);
        for (int r = 0; r < p; ++r) {
          const Segment to = layout.block(count, r);
          const BlockRange from = block_of(count, p, r);
          for (size_t i = 0; i < to.count; ++i)
            ASSERT_EQ(grouped[to.offset + i], caller[from.offset + i]);
        }
        layout.to_caller(grouped, back);
        ASSERT_EQ(back, caller);
      }
    }
}

TEST(GatherLayout, InPlaceUnlessTheRanksFormEqualNodesNumberedNodeByNode) {
  EXPECT_FALSE(gather_layout(std::vector<int>{3, 3, 7, 7, 1, 1}).in_place());
  EXPECT_TRUE(gather_layout(std::vector<int>{0, 0, 0, 0}).in_place()) << "one node";
  EXPECT_TRUE(gather_layout(std::vector<int>{0, 1, 0, 1}).in_place()) << "interleaved";
  EXPECT_TRUE(gather_layout(std::vector<int>{0, 0, 1, 1, 1}).in_place()) << "uneven";
  EXPECT_TRUE(gather_layout(std::vector<int>{0, 0, 0, 1, 1, 1, 1, 1}).in_place()) << "uneven";
  EXPECT_TRUE(gather_layout(std::vector<int>{0, 0, 1, 1, 0, 0}).in_place()) << "node split";
  EXPECT_TRUE(gather_layout(std::vector<int>{0, 1, 2}).in_place()) << "one rank per node";
  EXPECT_TRUE(gather_layout(std::vector<int>{5}).in_place());
  const GatherLayout one_per_node = gather_layout(std::vector<int>{0, 1, 2});
  EXPECT_EQ(one_per_node.block(10, 2).offset, block_of(10, 3, 2).offset);
}

// A reduce-scatter's input goes into the layout (a plain copy in place), and a gathered buffer
// comes back to the caller's layout in place: the round trip is the identity, and rank r's block
// of the caller's buffer lands where the layout keeps it.
TEST(GatherLayout, IntoTheScheduleAndBackToTheCaller) {
  const GatherLayout grouped = gather_layout(std::vector<int>{0, 0, 0, 1, 1, 1});
  ASSERT_FALSE(grouped.in_place());
  std::vector<float> caller(23);
  for (size_t i = 0; i < caller.size(); ++i) caller[i] = static_cast<float>(i);
  std::vector<float> work(3, -1.0f), scratch;
  grouped.into_schedule(caller, work);
  ASSERT_EQ(work.size(), caller.size());
  for (int r = 0; r < 6; ++r) {
    const BlockRange from = block_of(caller.size(), 6, r);
    const Segment to = grouped.block(caller.size(), r);
    ASSERT_EQ(to.count, from.count);
    for (size_t i = 0; i < from.count; ++i)
      EXPECT_EQ(work[to.offset + i], caller[from.offset + i]) << "rank " << r << " element " << i;
  }
  grouped.back_to_caller(work, scratch);
  EXPECT_EQ(work, caller);
  const GatherLayout flat = gather_layout(std::vector<int>{0, 0, 0});
  flat.into_schedule(caller, work);
  EXPECT_EQ(work, caller);
  std::vector<float> same = caller;
  flat.back_to_caller(same, scratch);
  EXPECT_EQ(same, caller);
}

// Across nodes of equal size, the reduce-scatter and allgather run a ring inside every node and
// one across nodes per local index: in the grouped layout, rank r ends with its block reduced
// (exactly, on integers), every rank with every block; each rank sends (N - 1)/N of its shard of
// L across nodes (a flat ring over nodes numbered node by node: (p - 1)/p of the buffer, through
// one rank per node).
TEST(CollectiveSchedule, HierarchicalReduceScatterAndAllgatherAcrossNodes) {
  for (int nodes = 2; nodes <= 4; ++nodes)
    for (int local = 2; local <= 4; ++local)
      for (const size_t count : {size_t{0}, size_t{5}, size_t{1001}}) {
        const int p = nodes * local;
        SCOPED_TRACE(std::to_string(nodes) + "x" + std::to_string(local) + " count " +
                     std::to_string(count));
        const std::vector<int> node_of_rank = node_major(nodes, local);
        const GatherLayout layout = gather_layout(node_of_rank);
        const Schedule rs = make_schedule(CollectiveKind::kReduceScatter, Algorithm::kAuto, p,
                                          count, 0, node_of_rank);
        const Schedule ag = make_schedule(CollectiveKind::kAllgather, Algorithm::kHierarchical, p,
                                          count, 0, node_of_rank);
        ASSERT_EQ(rs.algorithm, Algorithm::kHierarchical);
        ASSERT_EQ(ag.algorithm, Algorithm::kHierarchical);
        ASSERT_TRUE(well_formed(rs));
        ASSERT_TRUE(well_formed(ag));
        EXPECT_EQ(rs.rounds.size(), static_cast<size_t>(local - 1 + nodes - 1));

        const Buffers in = random_buffers(p, count, 7u * p + count, Values::kIntegers);
        Buffers grouped = in;
        for (int r = 0; r < p; ++r) layout.to_schedule(in[r], grouped[r]);
        const Buffers reduced = run(rs, grouped, ReduceOp::kSum);
        for (int r = 0; r < p; ++r) {
          const Segment mine = layout.block(count, r);
          const BlockRange caller = block_of(count, p, r);
          for (size_t i = 0; i < mine.count; ++i) {
            int64_t sum = 0;
            for (const auto& buf : in) sum += static_cast<int64_t>(buf[caller.offset + i]);
            ASSERT_EQ(reduced[static_cast<size_t>(r)][mine.offset + i], static_cast<float>(sum));
          }
        }

        Buffers blocks(static_cast<size_t>(p),
                       std::vector<float>(count, std::numeric_limits<float>::quiet_NaN()));
        for (int r = 0; r < p; ++r) {
          const Segment mine = layout.block(count, r);
          const BlockRange caller = block_of(count, p, r);
          for (size_t i = 0; i < mine.count; ++i)
            blocks[static_cast<size_t>(r)][mine.offset + i] =
                static_cast<float>(caller.offset + i) * 3.0f + 1.0f;
        }
        const Buffers gathered = run(ag, blocks, ReduceOp::kSum);
        for (int r = 0; r < p; ++r) {
          std::vector<float> all(count);
          layout.to_caller(gathered[static_cast<size_t>(r)], all);
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(all[i], static_cast<float>(i) * 3.0f + 1.0f) << "rank " << r;
        }

        for (const Schedule* s : {&rs, &ag})
          for (int r = 0; r < p; ++r) {
            // Across nodes, every block of its shard but the rank's own (reduce-scatter) or the
            // next one's in the ring (allgather).
            const int kept = s == &rs ? r : (r + local) % p;
            size_t across = 0, total = 0;
            for (const auto& round : s->rounds) {
              const Step& step = round[static_cast<size_t>(r)];
              if (step.send_to < 0) continue;
              total += step.send.count;
              if (step.send_to / local != r / local) across += step.send.count;
            }
            const size_t shard = block_of(count, local, r % local).count;
            EXPECT_EQ(across, shard - layout.block(count, kept).count) << "rank " << r;
            // Inside nodes, every shard of L but the rank's own (reduce-scatter) or the next's.
            const int inside_kept = s == &rs ? r % local : (r + 1) % local;
            EXPECT_EQ(total - across, count - block_of(count, local, inside_kept).count);
          }
      }
}

TEST(CollectiveSchedule, BroadcastAndReduceForEveryRoot) {
  for (int p = 1; p <= 17; ++p)
    for (int root = 0; root < p; ++root)
      for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " root=" + std::to_string(root));
        const Buffers in = random_buffers(p, count, 17u * p + root, Values::kSignedReals);
        const Schedule bcast = make_broadcast_schedule(p, count, root);
        ASSERT_TRUE(well_formed(bcast));
        const Buffers b = run(bcast, in, ReduceOp::kSum);
        for (int r = 0; r < p; ++r) ASSERT_EQ(b[static_cast<size_t>(r)], in[root]);

        const Buffers ints = random_buffers(p, count, 19u * p + root, Values::kIntegers);
        const Schedule reduce = make_reduce_schedule(p, count, root);
        ASSERT_TRUE(well_formed(reduce));
        const Buffers red = run(reduce, ints, ReduceOp::kSum);
        for (size_t i = 0; i < count; ++i) {
          int64_t sum = 0;
          for (const auto& buf : ints) sum += static_cast<int64_t>(buf[i]);
          ASSERT_EQ(red[static_cast<size_t>(root)][i], static_cast<float>(sum));
        }
        // Textbook message counts: each non-root sends (reduce) / receives (bcast) exactly once.
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(sends_of(reduce, r), r == root ? 0 : 1);
          EXPECT_EQ(recvs_of(bcast, r), r == root ? 0 : 1);
          EXPECT_EQ(recvs_of(reduce, r) == 0, sends_of(bcast, r) == 0);
        }
        const size_t depth = p == 1 ? 0 : std::bit_width(static_cast<unsigned>(p - 1));
        EXPECT_EQ(reduce.rounds.size(), depth);
        EXPECT_EQ(bcast.rounds.size(), depth);
      }
}

TEST(CollectiveSchedule, TextbookMessageCounts) {
  for (int p = 1; p <= 17; ++p) {
    const size_t count = 1001;
    const Schedule ring = make_allreduce_schedule(Algorithm::kRing, p, count);
    const Schedule rd = make_allreduce_schedule(Algorithm::kRecursiveDoubling, p, count);
    const Schedule rab = make_allreduce_schedule(Algorithm::kRabenseifner, p, count);
    const Schedule master = make_allreduce_schedule(Algorithm::kMaster, p, count);
    EXPECT_EQ(ring.rounds.size(), static_cast<size_t>(2 * (p - 1)));
    EXPECT_EQ(master.rounds.size(), static_cast<size_t>(2 * (p - 1)));
    const bool pow2 = (p & (p - 1)) == 0;
    const int lg = log2_exact(std::bit_floor(static_cast<unsigned>(p)));
    EXPECT_EQ(rd.rounds.size(), static_cast<size_t>(lg + (pow2 ? 0 : 2)));
    EXPECT_EQ(rab.rounds.size(), static_cast<size_t>(2 * lg + (pow2 ? 0 : 2)));
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(sends_of(ring, r), 2 * (p - 1));
      EXPECT_EQ(recvs_of(ring, r), 2 * (p - 1));
      EXPECT_EQ(sends_of(master, r), r == 0 ? p - 1 : 1);
      EXPECT_EQ(recvs_of(master, r), r == 0 ? p - 1 : 1);
      if (pow2) {
        EXPECT_EQ(sends_of(rd, r), lg);
        EXPECT_EQ(sends_of(rab, r), 2 * lg);
        // Rabenseifner moves (p-1)/p of the buffer each way, up to one element per block sent.
        const double ideal = 2.0 * (p - 1) / p * count * 4;
        EXPECT_LE(std::abs(static_cast<double>(bytes_sent(rab, r)) - ideal), 8.0 * (p - 1));
      }
      EXPECT_EQ(bytes_sent(rd, r), static_cast<size_t>(sends_of(rd, r)) * count * 4);
    }
  }
}

TEST(CollectiveSchedule, RingBytesSent) {
  for (int p = 1; p <= 17; ++p)
    for (size_t count : counts_for(p)) {
      const Schedule s = make_allreduce_schedule(Algorithm::kRing, p, count);
      for (int r = 0; r < p; ++r) {
        // Reduce-scatter sends every block but r's own, allgather every block but (r+1)'s.
        const size_t expected =
            (2 * count - block_of(count, p, r).count - block_of(count, p, (r + 1) % p).count) * 4;
        EXPECT_EQ(bytes_sent(s, r), expected);
        const double ideal = 2.0 * (p - 1) / p * static_cast<double>(count) * 4;
        EXPECT_LE(std::abs(static_cast<double>(bytes_sent(s, r)) - ideal), 8.0);
      }
    }
}

TEST(CollectiveSchedule, HierarchicalCrossesNodesOnlyInTheMiddlePhase) {
  for (int p = 2; p <= 16; ++p)
    for (int nodes = 2; nodes <= 4; ++nodes) {
      if (p % nodes != 0) continue;
      const int local = p / nodes;
      std::vector<int> node_of_rank;
      for (int r = 0; r < p; ++r) node_of_rank.push_back(r % nodes);
      const Schedule s = make_allreduce_schedule(Algorithm::kHierarchical, p, 1000, node_of_rank);
      ASSERT_EQ(s.rounds.size(), static_cast<size_t>(2 * (local - 1) + 2 * (nodes - 1)));
      for (int r = 0; r < p; ++r) {
        int cross = 0, inside = 0;
        for (const auto& round : s.rounds) {
          const int to = round[static_cast<size_t>(r)].send_to;
          if (to < 0) continue;
          (node_of_rank[static_cast<size_t>(to)] == node_of_rank[static_cast<size_t>(r)] ? inside
                                                                                         : cross)++;
        }
        EXPECT_EQ(cross, 2 * (nodes - 1)) << p << " " << nodes;
        EXPECT_EQ(inside, 2 * (local - 1)) << p << " " << nodes;
      }
    }
}

TEST(CollectiveSchedule, HierarchicalFallsBackToRingForUnevenNodes) {
  const std::vector<int> nodes = {0, 0, 0, 1, 1};
  const Schedule s = make_allreduce_schedule(Algorithm::kHierarchical, 5, 101, nodes);
  EXPECT_EQ(s.algorithm, Algorithm::kRing);
  const Buffers in = random_buffers(5, 101, 1, Values::kIntegers);
  const Buffers out = run(s, in, ReduceOp::kSum);
  for (size_t i = 0; i < 101; ++i) {
    float sum = 0;
    for (const auto& b : in) sum += b[i];  // exact: small integers
    for (const auto& b : out) ASSERT_EQ(b[i], sum);
  }
  EXPECT_THROW(make_allreduce_schedule(Algorithm::kHierarchical, 5, 10, {}), UserError);
}

TEST(CollectiveSchedule, ResolveAlgorithm) {
  const std::vector<int> one_node(8, 3), two_nodes = {0, 0, 0, 0, 1, 1, 1, 1};
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRabenseifner, Algorithm::kRecursiveDoubling,
                      Algorithm::kBinomialTree, Algorithm::kHierarchical, Algorithm::kMaster}) {
    EXPECT_EQ(resolve_algorithm(a, 8, 1 << 20, two_nodes), a);
    EXPECT_EQ(resolve_algorithm(a, 6, 16, {}), a);
  }
  EXPECT_EQ(resolve_algorithm(Algorithm::kAuto, 8, 16, two_nodes), Algorithm::kHierarchical);
  EXPECT_EQ(resolve_algorithm(Algorithm::kAuto, 8, 65535, one_node), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(resolve_algorithm(Algorithm::kAuto, 8, 65536, one_node), Algorithm::kRabenseifner);
  EXPECT_EQ(resolve_algorithm(Algorithm::kAuto, 6, 65536, {}), Algorithm::kRing);
  EXPECT_EQ(resolve_algorithm(Algorithm::kAuto, 6, 100, {}), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(make_allreduce_schedule(Algorithm::kAuto, 6, 1 << 20).algorithm, Algorithm::kRing);
}

TEST(CollectiveSchedule, MaxIsCommutativeBitForBit) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<float, float>> pairs = {
      {0.0f, -0.0f}, {1.0f, 2.0f}, {-1.0f, nan}, {nan, -nan}, {-3.0f, -3.0f}};
  for (auto [a, b] : pairs) {
    float x = a, y = b;
    apply_action(RecvAction::kReduce, ReduceOp::kMax, std::span<float>(&x, 1), {&b, 1});
    apply_action(RecvAction::kReduce, ReduceOp::kMax, std::span<float>(&y, 1), {&a, 1});
    EXPECT_EQ(std::bit_cast<uint32_t>(x), std::bit_cast<uint32_t>(y)) << a << " " << b;
  }
  float z = -0.0f;
  const float pz = 0.0f;
  apply_action(RecvAction::kReduce, ReduceOp::kMax, std::span<float>(&z, 1), {&pz, 1});
  EXPECT_FALSE(std::signbit(z));
}

// A segment received encoded: every action and op in one pass gives the bits of decoding it and
// applying the action to the decoded floats.
TEST(CollectiveSchedule, WireActionsGiveTheBitsOfDecodingFirst) {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  for (WireFormat wire : {WireFormat::kFp16, WireFormat::kBf16}) {
    std::vector<float> held(1001), sent(1001);
    for (size_t i = 0; i < held.size(); ++i) {
      held[i] = round_to_wire(dist(gen), wire);
      sent[i] = dist(gen);
    }
    std::vector<uint16_t> encoded(sent.size());
    encode_wire(sent, wire, encoded);
    std::vector<float> decoded(sent.size()), scratch(sent.size() + 3);
    decode_wire(encoded, wire, decoded);
    for (auto [action, op] : {std::pair{RecvAction::kCopy, ReduceOp::kSum},
                              {RecvAction::kReduce, ReduceOp::kSum},
                              {RecvAction::kReduce, ReduceOp::kAvg},
                              {RecvAction::kReduce, ReduceOp::kMax}}) {
      std::vector<float> want = held, got = held;
      apply_action(action, op, want, decoded, wire);
      apply_wire_action(action, op, got, encoded, wire, scratch);
      size_t differ = 0;
      for (size_t i = 0; i < want.size(); ++i)
        differ += std::bit_cast<uint32_t>(want[i]) != std::bit_cast<uint32_t>(got[i]);
      EXPECT_EQ(differ, 0u) << to_string(wire) << " action " << static_cast<int>(action) << " op "
                            << static_cast<int>(op);
      EXPECT_NE(want, held);  // the action changed the buffer
    }
  }
  std::vector<float> dst(4), scratch(3);
  std::vector<uint16_t> src(4);
  EXPECT_THROW(
      apply_wire_action(RecvAction::kReduce, ReduceOp::kMax, dst, src, WireFormat::kFp16, scratch),
      InternalError);
}

// kAvg's division: the correctly rounded quotient for every rank count, whether it divides or
// (p a power of two) multiplies by the exact reciprocal; subnormal quotients and specials too.
// A ring allgather's steps after the first send on what the step before received; a ring
// allreduce's allgather starts from a block it reduced; a reduction step never forwards.
TEST(CollectiveSchedule, ForwardsReceivedIsARingAllgathersSendingOnOfItsCopies) {
  const int p = 5;
  for (int r = 0; r < p; ++r) {
    const std::vector<Step> gather = steps_of_rank(make_allgather_schedule(p, 1000), r);
    ASSERT_EQ(gather.size(), static_cast<size_t>(p - 1));
    EXPECT_FALSE(forwards_received(nullptr, gather[0])) << "rank " << r;
    for (size_t k = 1; k < gather.size(); ++k)
      EXPECT_TRUE(forwards_received(&gather[k - 1], gather[k])) << "rank " << r << " step " << k;
    const std::vector<Step> ring =
        steps_of_rank(make_allreduce_schedule(Algorithm::kRing, p, 1000), r);
    ASSERT_EQ(ring.size(), static_cast<size_t>(2 * (p - 1)));
    for (size_t k = 1; k < ring.size(); ++k)
      EXPECT_EQ(forwards_received(&ring[k - 1], ring[k]), k >= static_cast<size_t>(p))
          << "rank " << r << " step " << k;
  }
  Step copied;
  copied.recv_from = 2;
  copied.recv = {0, 10};
  Step next;
  next.send_to = 1;
  next.send = {0, 10};
  EXPECT_TRUE(forwards_received(&copied, next));
  next.send = {0, 9};  // part of it
  EXPECT_FALSE(forwards_received(&copied, next));
  next.send = {0, 10};
  copied.action = RecvAction::kReduce;
  EXPECT_FALSE(forwards_received(&copied, next));
  copied.action = RecvAction::kCopy;
  next.send_to = -1;  // nothing sent
  EXPECT_FALSE(forwards_received(&copied, next));
}

TEST(CollectiveSchedule, DivisionByRanksGivesTheCorrectlyRoundedQuotient) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               3.0f,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 100000; ++i) values.push_back(std::bit_cast<float>(any_bits(gen)));
  for (int p = 1; p <= 16; ++p) {
    std::vector<float> divided = values;
    divide_by_ranks(p, divided);
    size_t differ = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const float want = values[i] / static_cast<float>(p);
      differ += std::isnan(want)
                    ? !std::isnan(divided[i])
                    : std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(divided[i]);
    }
    EXPECT_EQ(differ, 0u) << "p=" << p;
  }
  std::vector<float> one{1.0f};
  EXPECT_THROW(divide_by_ranks(0, one), InternalError);
}

TEST(CollectiveSchedule, ExecuteRejectsMalformedSchedules) {
  Schedule s = make_allreduce_schedule(Algorithm::kRing, 3, 9);
  s.rounds[0][1].recv_from = -1;  // rank 0's message to 1 is never received
  Buffers data(3, std::vector<float>(9, 1.0f));
  EXPECT_THROW(run(s, data, ReduceOp::kSum), InternalError);
  const Schedule ok = make_allreduce_schedule(Algorithm::kRing, 3, 9);
  EXPECT_THROW(run(ok, Buffers(2, std::vector<float>(9)), ReduceOp::kSum), InternalError);
  EXPECT_THROW(run(ok, Buffers(3, std::vector<float>(8)), ReduceOp::kSum), InternalError);
  std::vector<float> a(3), b(4);
  EXPECT_THROW(apply_action(RecvAction::kCopy, ReduceOp::kSum, a, b), InternalError);
}

}  // namespace
// What a distributed backend executes: each rank's steps out of make_schedule, run rank by rank
// with message passing in memory, must give what the whole schedule gives in memory.
TEST(CollectiveSchedule, StepsOfEachRankReproduceTheWholeSchedule) {
  const std::vector<int> nodes{0, 0, 1, 1, 2};
  for (const CollectiveKind kind :
       {CollectiveKind::kAllreduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllgather,
        CollectiveKind::kBroadcast, CollectiveKind::kReduce})
    for (const Algorithm algorithm : {Algorithm::kRing, Algorithm::kRabenseifner,
                                      Algorithm::kHierarchical, Algorithm::kMaster}) {
      const int p = 5;
      const size_t n = 23;
      const Schedule schedule = make_schedule(kind, algorithm, p, n, /*root=*/3, nodes);
      ASSERT_EQ(schedule.ranks, p);
      ASSERT_EQ(schedule.count, n);
      // Run each rank's steps in lockstep (round by round), messages through mailboxes.
      std::vector<std::vector<float>> buffers, reference;
      for (int r = 0; r < p; ++r) {
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((r + 1) * 3 + int(i % 5));
        buffers.push_back(v);
      }
      reference = buffers;
      std::vector<std::span<float>> spans(reference.begin(), reference.end());
      execute_in_memory(schedule, spans, ReduceOp::kSum);

      std::vector<std::vector<Step>> mine;
      size_t total = 0;
      for (int r = 0; r < p; ++r) {
        mine.push_back(steps_of_rank(schedule, r));
        for (const Step& step : mine.back()) EXPECT_TRUE(step.send_to >= 0 || step.recv_from >= 0);
        total += mine.back().size();
      }
      size_t busy = 0;
      for (const auto& round : schedule.rounds)
        for (const Step& step : round) busy += step.send_to >= 0 || step.recv_from >= 0;
      EXPECT_EQ(total, busy);
      // Lockstep over the original rounds: rank r's k-th own step is its k-th busy round.
      std::vector<size_t> next(static_cast<size_t>(p), 0);
      for (const auto& round : schedule.rounds) {
        std::vector<std::vector<float>> sent(static_cast<size_t>(p));
        std::vector<const Step*> steps(static_cast<size_t>(p), nullptr);
        for (int r = 0; r < p; ++r) {
          const Step& step = round[static_cast<size_t>(r)];
          if (step.send_to < 0 && step.recv_from < 0) continue;
          const Step& own = mine[static_cast<size_t>(r)][next[static_cast<size_t>(r)]++];
          ASSERT_EQ(own.send_to, step.send_to);
          ASSERT_EQ(own.recv_from, step.recv_from);
          steps[static_cast<size_t>(r)] = &own;
          if (own.send_to >= 0)
            sent[static_cast<size_t>(r)].assign(
                buffers[static_cast<size_t>(r)].begin() + static_cast<long>(own.send.offset),
                buffers[static_cast<size_t>(r)].begin() +
                    static_cast<long>(own.send.offset + own.send.count));
        }
        for (int r = 0; r < p; ++r) {
          const Step* own = steps[static_cast<size_t>(r)];
          if (own == nullptr || own->recv_from < 0) continue;
          apply_action(
              own->action, ReduceOp::kSum,
              std::span(buffers[static_cast<size_t>(r)]).subspan(own->recv.offset, own->recv.count),
              sent[static_cast<size_t>(own->recv_from)]);
        }
      }
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(next[static_cast<size_t>(r)], mine[static_cast<size_t>(r)].size());
      EXPECT_EQ(buffers, reference) << static_cast<int>(kind) << " " << to_string(algorithm);
    }
}

}  // namespace syncopate
