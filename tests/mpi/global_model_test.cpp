// The epoch_async global model on MPI one-sided communication, for both placements.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "tests/mpi/mpi_test_env.hpp"

namespace syncopate::mpi::testing {
namespace {

constexpr size_t kFloats = 4096;
constexpr int kMergesPerRank = 3;

// Values are small dyadic numbers, so with weights 1/2 every merge is exact in float: the
// predecessor of a snapshot s made from local l is exactly 2s - l.
std::vector<float> initial_global() {
  std::vector<float> g(kFloats);
  for (size_t j = 0; j < kFloats; ++j) g[j] = static_cast<float>(j % 5);
  return g;
}
std::vector<float> local_of(int rank, int merge) {
  const float v = 8.0f * static_cast<float>(rank * kMergesPerRank + merge + 1);
  std::vector<float> l(kFloats);
  for (size_t j = 0; j < kFloats; ++j) l[j] = v + static_cast<float>(j % 3);
  return l;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

class MpiSharedModel : public ::testing::TestWithParam<GlobalModelPlacement> {};

TEST_P(MpiSharedModel, ConcurrentMergesFormOneSequentialChain) {
  MpiCommunicator& comm = world();
  const int p = comm.size();
  const std::unique_ptr<SharedModel> global =
      comm.create_shared_model(initial_global(), GetParam());
  std::vector<float> snapshots;  // this rank's, merge after merge
  for (int m = 0; m < kMergesPerRank; ++m) {
    std::vector<float> local = local_of(comm.rank(), m);
    global->merge(local, MergeRule{0.5f, 0.5f});
    snapshots.insert(snapshots.end(), local.begin(), local.end());
  }
  const size_t merges = static_cast<size_t>(p * kMergesPerRank);
  std::vector<float> all(merges * kFloats);
  MPI_Allgather(snapshots.data(), static_cast<int>(snapshots.size()), MPI_FLOAT, all.data(),
                static_cast<int>(snapshots.size()), MPI_FLOAT, comm.handle());
  comm.barrier();
  // Read the final global with a merge that keeps it: 1 * global + 0 * local.
  std::vector<float> final_global(kFloats, 0.0f);
  if (comm.rank() == 0) global->merge(final_global, MergeRule{1.0f, 0.0f});
  comm.broadcast(final_global, 0);

  // Merge i = rank * kMergesPerRank + m. Find each merge's predecessor: the initial global
  // (-1) or another merge's snapshot. A sequential order is one chain through all merges.
  const std::vector<float> initial = initial_global();
  auto snapshot = [&](size_t i) {
    return std::span<const float>(all).subspan(i * kFloats, kFloats);
  };
  std::vector<int> successor_of_initial;
  std::vector<std::vector<size_t>> successors(merges);
  for (size_t i = 0; i < merges; ++i) {
    const std::vector<float> local =
        local_of(static_cast<int>(i) / kMergesPerRank, static_cast<int>(i) % kMergesPerRank);
    std::vector<float> before(kFloats);
    for (size_t j = 0; j < kFloats; ++j) before[j] = 2.0f * snapshot(i)[j] - local[j];
    int matches = 0;
    if (same_bits(before, initial)) {
      successor_of_initial.push_back(static_cast<int>(i));
      ++matches;
    }
    for (size_t k = 0; k < merges; ++k)
      if (k != i && same_bits(before, snapshot(k))) {
        successors[k].push_back(i);
        ++matches;
      }
    ASSERT_EQ(matches, 1) << "merge " << i << " did not start from exactly one earlier global "
                          << "(torn or lost update)";
  }
  ASSERT_EQ(successor_of_initial.size(), 1u);
  std::vector<int> last_merge_of_rank(static_cast<size_t>(p), -1);
  size_t current = static_cast<size_t>(successor_of_initial[0]);
  for (size_t visited = 1;; ++visited) {
    const int rank = static_cast<int>(current) / kMergesPerRank;
    const int m = static_cast<int>(current) % kMergesPerRank;
    EXPECT_EQ(m, last_merge_of_rank[static_cast<size_t>(rank)] + 1)
        << "rank " << rank << "'s merges out of program order";
    last_merge_of_rank[static_cast<size_t>(rank)] = m;
    ASSERT_LE(successors[current].size(), 1u) << "two merges read the same global";
    if (successors[current].empty()) {
      EXPECT_EQ(visited, merges) << "the chain misses merges";
      EXPECT_TRUE(same_bits(final_global, snapshot(current)))
          << "the final global is not the last merge's snapshot";
      break;
    }
    current = successors[current][0];
  }
}

// Many merges of a large model at once, with rule {1, 1} (global += local, exact in float for
// these integers): no update may be lost or torn, whatever the order.
TEST_P(MpiSharedModel, ManyLargeConcurrentMergesLoseNoUpdate) {
  MpiCommunicator& comm = world();
  const int p = comm.size();
  constexpr size_t kLarge = size_t{1} << 18;
  constexpr int kMerges = 10;
  auto pattern = [](size_t j) { return static_cast<float>(1 + j % 3); };
  const std::unique_ptr<SharedModel> global =
      comm.create_shared_model(std::vector<float>(kLarge, 0.0f), GetParam());
  // Merge id i = rank * kMerges + m adds (i + 1) * pattern; the global is always S * pattern.
  std::vector<float> sums;  // S after each of this rank's merges
  std::vector<float> local(kLarge);
  for (int m = 0; m < kMerges; ++m) {
    const float id = static_cast<float>(comm.rank() * kMerges + m + 1);
    for (size_t j = 0; j < kLarge; ++j) local[j] = id * pattern(j);
    global->merge(local, MergeRule{1.0f, 1.0f});
    const float s = local[0];
    size_t torn = 0;
    for (size_t j = 0; j < kLarge; ++j) torn += local[j] != s * pattern(j) ? 1 : 0;
    EXPECT_EQ(torn, 0u) << "merge " << m << " returned a torn snapshot";
    sums.push_back(s);
  }
  std::vector<float> all(static_cast<size_t>(p * kMerges));
  MPI_Allgather(sums.data(), kMerges, MPI_FLOAT, all.data(), kMerges, MPI_FLOAT, comm.handle());
  comm.barrier();
  std::vector<float> final_global(kLarge, 0.0f);
  if (comm.rank() == 0) global->merge(final_global, MergeRule{1.0f, 0.0f});
  comm.broadcast(final_global, 0);

  const int n = p * kMerges;
  EXPECT_EQ(final_global[kLarge - 1], static_cast<float>(n * (n + 1) / 2) * pattern(kLarge - 1))
      << "updates were lost";
  // Sequential order: sorted by S, each merge starts from the previous one's S.
  std::vector<std::pair<float, int>> order;
  for (int i = 0; i < n; ++i) order.emplace_back(all[static_cast<size_t>(i)], i);
  std::sort(order.begin(), order.end());
  float previous = 0.0f;
  for (const auto& [s, i] : order) {
    EXPECT_EQ(s - static_cast<float>(i + 1), previous) << "merge " << i << " read a stale global";
    previous = s;
  }
}

TEST_P(MpiSharedModel, MergesInRankOrderFollowTheRule) {
  MpiCommunicator& comm = world();
  const MergeRule rule{0.25f, 0.75f};
  const std::unique_ptr<SharedModel> shared =
      comm.create_shared_model(std::vector<float>(100, 2.0f), GetParam());
  double expected = 2.0;  // global after the merges so far, in double precision
  std::vector<float> snapshot;
  for (int turn = 0; turn < comm.size(); ++turn) {
    expected = 0.25 * expected + 0.75 * (turn + 1);
    const CommCounters before = comm.counters();
    if (turn == comm.rank()) {
      snapshot.assign(100, static_cast<float>(turn + 1));
      shared->merge(snapshot, rule);
    }
    const CommCounters after = comm.counters();
    comm.barrier();
    if (turn == comm.rank()) {
      for (const float x : snapshot) ASSERT_NEAR(x, expected, 1e-5);
      // master: the model to the master and back, on every rank (rank 0's window stands in for
      // the master); migrating: fetched from the previous merger (none before rank 0's turn).
      const uint64_t model = 100 * sizeof(float);
      const bool master = GetParam() == GlobalModelPlacement::kMaster;
      EXPECT_EQ(after.bytes_sent - before.bytes_sent, master ? model : 0u) << "turn " << turn;
      EXPECT_EQ(after.bytes_recv - before.bytes_recv, master || turn > 0 ? model : 0u)
          << "turn " << turn;
    }
  }
  // apply_merge_rule on its own, against the same closed form.
  std::vector<float> global(3, 4.0f);
  apply_merge_rule(rule, global, std::vector<float>(3, 8.0f));
  EXPECT_EQ(global, std::vector<float>(3, 7.0f));  // 0.25 * 4 + 0.75 * 8
}

INSTANTIATE_TEST_SUITE_P(Placements, MpiSharedModel,
                         ::testing::Values(GlobalModelPlacement::kMaster,
                                           GlobalModelPlacement::kMigrating),
                         [](const ::testing::TestParamInfo<GlobalModelPlacement>& param_info) {
                           return param_info.param == GlobalModelPlacement::kMaster ? "master"
                                                                                    : "migrating";
                         });

}  // namespace
}  // namespace syncopate::mpi::testing
