// Point-to-point, counters, split, the scenario check, the watchdog and the executor.
#include "backends/mpi/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backends/mpi/mpi_detail.hpp"
#include "tests/mpi/mpi_test_env.hpp"

namespace syncopate::mpi::testing {
namespace {

// Pairs (0,1), (2,3), ...; -1 for an odd last rank.
int partner_of(int rank, int size) {
  const int partner = rank ^ 1;
  return partner < size ? partner : -1;
}

// The schedules' mid-sized messages follow Open MPI's shared-memory setting, read through the MPI
// tool interface after MPI_Init. Single copy (CMA) is this machine's default; ctest also runs
// this binary with it off (mpi.np2.single_copy_off). A single rank has no shared-memory peer, and
// Open MPI then closes the transport.
TEST(MpiRuntime, ReadsWhetherSharedMemorySendsBySingleCopy) {
  const char* setting = std::getenv("OMPI_MCA_btl_vader_single_copy_mechanism");
  const bool expected =
      world().size() > 1 && (setting == nullptr || (std::string_view(setting) != "none" &&
                                                    std::string_view(setting) != "emulated"));
  EXPECT_EQ(detail::shared_memory_single_copy(), expected) << (setting ? setting : "(default)");
}

// How a waiting rank waits, read the same way: ctest runs this binary under
// OMPI_MCA_mpi_yield_when_idle=1; by hand, without it, Open MPI yields only where it knows that
// its ranks outnumber the cores.
TEST(MpiRuntime, ReadsWhetherWaitingRanksYield) {
  const std::optional<bool> yields = Runtime::waiting_ranks_yield();
  ASSERT_TRUE(yields.has_value()) << "Open MPI has mpi_yield_when_idle";
  if (const char* setting = std::getenv("OMPI_MCA_mpi_yield_when_idle")) {
    EXPECT_EQ(*yields, std::string_view(setting) != "0") << setting;
  }
}

TEST(MpiPointToPoint, MessagesDoNotMatchCollectivesInBetween) {
  MpiCommunicator& comm = world();
  const int partner = partner_of(comm.rank(), comm.size());
  if (comm.size() == 1) GTEST_SKIP() << "needs 2 ranks";
  // A small (eager) message is sent, then a collective with the same peer runs, then the
  // message is received: with a shared tag the collective would have taken it.
  const std::vector<float> message(10, static_cast<float>(comm.rank() + 100));
  std::vector<float> sum(10, static_cast<float>(comm.rank()));
  std::vector<float> got(10, -1.0f);
  if (partner >= 0) comm.send(message, partner);
  comm.allreduce(sum, {ReduceOp::kSum, Algorithm::kRing});
  if (partner >= 0) comm.recv(got, partner);
  const float rank_sum = static_cast<float>(comm.size() * (comm.size() - 1) / 2);
  EXPECT_EQ(sum, std::vector<float>(10, rank_sum));
  if (partner >= 0) {
    EXPECT_EQ(got, std::vector<float>(10, static_cast<float>(partner + 100)));
  }
}

TEST(MpiPointToPoint, LargeMessageBothWaysWithOrderedSendRecv) {
  MpiCommunicator& comm = world();
  const int partner = partner_of(comm.rank(), comm.size());
  if (partner < 0) GTEST_SKIP() << "no partner";
  std::vector<float> mine = input_of(comm.rank(), 1 << 20, 800), got(1 << 20);
  if (comm.rank() % 2 == 0) {
    comm.send(mine, partner);
    comm.recv(got, partner);
  } else {
    comm.recv(got, partner);
    comm.send(mine, partner);
  }
  EXPECT_EQ(got, input_of(partner, got.size(), 800));
}

TEST(MpiCounters, RingAllreduceAndPointToPointCountBytesOnTheWire) {
  MpiCommunicator& comm = world();
  const int p = comm.size();
  const size_t n = 1200;  // divisible by 1, 2, 3, 4: every ring block has n / p floats
  const CommCounters before = comm.counters();
  std::vector<float> data(n, 1.0f);
  comm.allreduce(data, {ReduceOp::kSum, Algorithm::kRing});
  const CommCounters after = comm.counters();
  // Ring: p - 1 reduce-scatter and p - 1 allgather rounds of one block each way.
  const uint64_t ring_bytes = 2ull * static_cast<uint64_t>(p - 1) * (n / p) * sizeof(float);
  EXPECT_EQ(after.bytes_sent - before.bytes_sent, ring_bytes);
  EXPECT_EQ(after.bytes_recv - before.bytes_recv, ring_bytes);
  EXPECT_EQ(data, std::vector<float>(n, static_cast<float>(p)));

  const int partner = partner_of(comm.rank(), p);
  if (partner < 0) return;
  const std::vector<float> message(10, 1.0f);
  std::vector<float> got(10);
  if (comm.rank() % 2 == 0) {
    comm.send(message, partner);
    comm.recv(got, partner);
  } else {
    comm.recv(got, partner);
    comm.send(message, partner);
  }
  const CommCounters last = comm.counters();
  EXPECT_EQ(last.bytes_sent - after.bytes_sent, 40u);
  EXPECT_EQ(last.bytes_recv - after.bytes_recv, 40u);
}

TEST(MpiSplit, NodeGroupsFollowSharedMemoryDomains) {
  MpiCommunicator& comm = world();
  const auto nodes = comm.node_of_rank();
  ASSERT_EQ(nodes.size(), static_cast<size_t>(comm.size()));
  EXPECT_EQ(nodes[0], 0) << "node numbers follow the leaders' rank order";
  EXPECT_EQ(comm.num_nodes(), *std::max_element(nodes.begin(), nodes.end()) + 1);

  std::unique_ptr<MpiCommunicator> group = comm.split_mpi(comm.node(), comm.rank());
  const int members = static_cast<int>(std::count(nodes.begin(), nodes.end(), comm.node()));
  const int before_me =
      static_cast<int>(std::count(nodes.begin(), nodes.begin() + comm.rank(), comm.node()));
  EXPECT_EQ(group->size(), members);
  EXPECT_EQ(group->rank(), before_me);
  EXPECT_EQ(group->node(), 0);
  EXPECT_EQ(group->num_nodes(), 1);
  std::vector<float> ranks(3, static_cast<float>(comm.rank()));
  group->allreduce(ranks, {ReduceOp::kSum, Algorithm::kRing});
  float expected = 0;
  for (int r = 0; r < comm.size(); ++r)
    if (nodes[static_cast<size_t>(r)] == comm.node()) expected += static_cast<float>(r);
  EXPECT_EQ(ranks, std::vector<float>(3, expected));
}

TEST(MpiSplit, ParityGroupsAreRankedByKeyThenOldRank) {
  MpiCommunicator& comm = world();
  const int p = comm.size(), rank = comm.rank();
  // key = -rank: the highest rank of each parity comes first.
  std::unique_ptr<Communicator> group = comm.split(rank % 2, -rank);
  int size = 0, higher = 0;
  float rank_sum = 0;
  for (int r = rank % 2; r < p; r += 2) {
    ++size;
    higher += r > rank ? 1 : 0;
    rank_sum += static_cast<float>(r);
  }
  EXPECT_EQ(group->size(), size);
  EXPECT_EQ(group->rank(), higher);
  std::vector<float> data(7, static_cast<float>(rank));
  group->allreduce(data, {ReduceOp::kSum, Algorithm::kRecursiveDoubling});
  EXPECT_EQ(data, std::vector<float>(7, rank_sum));
  group->barrier();
}

TEST(MpiScenarioCheck, DifferentTextsFailOnEveryRank) {
  MpiCommunicator& comm = world();
  const std::string same = "[model]\nname = \"mlp\"\n";
  EXPECT_NO_THROW(check_same_everywhere(comm, same, comm.size()));
  if (comm.size() > 1) {
    // Only the last rank's text differs, yet every rank must throw.
    const std::string text = comm.rank() == comm.size() - 1 ? same + "# edited\n" : same;
    try {
      check_same_everywhere(comm, text, comm.size());
      ADD_FAILURE() << "no error for different scenarios";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("different scenarios"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(comm.size() - 1)), std::string::npos);
    }
  }
}

TEST(MpiScenarioCheck, WrongWorkerCountFailsOnEveryRank) {
  MpiCommunicator& comm = world();
  try {
    check_same_everywhere(comm, "same", comm.size() + 1);
    ADD_FAILURE() << "no error for a wrong worker count";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np " + std::to_string(comm.size() + 1)),
              std::string::npos)
        << e.what();
  }
}

TEST(MpiScenarioCheck, Fnv1a64MatchesPublishedVectors) {
  // Test vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(MpiWatchdog, RecvWithoutSenderTimesOutNamingThePeerThenMessagesStillMatch) {
  MpiCommunicator& comm = world();
  const int p = comm.size(), rank = comm.rank();
  if (p < 2) GTEST_SKIP() << "needs a peer: a recv from oneself is a UserError";
  const int next = (rank + 1) % p, previous = (rank + p - 1) % p;
  const double saved = Runtime::watchdog_seconds();
  Runtime::set_watchdog_seconds(0.2);
  std::vector<float> got(4, -1.0f);
  try {
    comm.recv(got, next);  // nobody sends
    ADD_FAILURE() << "recv without a sender returned";
  } catch (const PeerTimeout& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("recv"), std::string::npos) << text;
    EXPECT_NE(text.find(std::to_string(next)), std::string::npos) << text;
  }
  EXPECT_TRUE(detail::failed()) << "a timeout must make ~Runtime abort the job";
  detail::reset_failed_for_tests();
  Runtime::set_watchdog_seconds(20);  // fail, not hang, if the next messages go astray
  comm.barrier();
  // The abandoned receive was withdrawn: a new message reaches the new receive.
  const std::vector<float> message(4, static_cast<float>(rank));
  if (rank % 2 == 0) {
    comm.send(message, previous);
    comm.recv(got, next);
  } else {
    comm.recv(got, next);
    comm.send(message, previous);
  }
  EXPECT_EQ(got, std::vector<float>(4, static_cast<float>(next)));
  Runtime::set_watchdog_seconds(saved);
}

// The communicator's default timeout (inherited by its splits) and a collective's own timeout
// win over the process default (the watchdog, 60 s in these tests).
TEST(MpiWatchdog, CommunicatorAndCallTimeoutsWinOverTheProcessDefault) {
  MpiCommunicator& comm = world();
  const int p = comm.size(), rank = comm.rank();
  EXPECT_EQ(comm.default_timeout(), Runtime::watchdog_seconds());
  if (p < 2) GTEST_SKIP() << "needs a peer: a recv from oneself is a UserError";
  std::unique_ptr<Communicator> group = comm.split(0, rank);
  group->set_default_timeout(0.2);
  EXPECT_EQ(group->split(0, rank)->default_timeout(), 0.2);
  std::vector<float> got(4);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(group->recv(got, (rank + 1) % p), PeerTimeout);  // nobody sends
  const std::unique_ptr<Communicator> other = comm.split(0, rank);
  if (rank == 0) {  // alone in the allreduce: its own timeout ends it
    EXPECT_THROW(other->allreduce(got, {.timeout_s = 0.2}), PeerTimeout);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20);
  detail::reset_failed_for_tests();
  comm.barrier();
}

std::mutex g_expired_mutex;
std::vector<std::string> g_expired;

void record_expiry(const std::string& message) {
  const std::lock_guard lock(g_expired_mutex);
  g_expired.push_back(message);
}

std::vector<std::string> expired() {
  const std::lock_guard lock(g_expired_mutex);
  return g_expired;
}

TEST(MpiDeadline, ExpiresOnlyWhenAScopeOutlivesTheWatchdog) {
  const double saved = Runtime::watchdog_seconds();
  Deadline::set_action_for_tests(&record_expiry);
  Runtime::set_watchdog_seconds(0.2);
  { const Deadline quick("a quick call"); }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(expired().empty()) << expired().front();
  {
    const Deadline blocked("a blocked test call");
    const Deadline other("a call that ends in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }
  const std::vector<std::string> messages = expired();
  ASSERT_EQ(messages.size(), 2u);  // both outlived 0.2 s
  for (const std::string& m : messages) {
    EXPECT_NE(m.find("rank " + std::to_string(world().rank()) + " spent more than 0.2 s in"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("a peer died or hangs"), std::string::npos) << m;
  }
  EXPECT_TRUE(messages[0].find("a blocked test call") != std::string::npos ||
              messages[1].find("a blocked test call") != std::string::npos);
  // The watcher sleeps until the earliest deadline it knows of; an earlier one armed after
  // that wakes it (later ones do not need to).
  Runtime::set_watchdog_seconds(30);
  {
    const Deadline long_one("a call with a long deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const Deadline short_one("a short call", 0.2);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }
  ASSERT_EQ(expired().size(), 3u);
  EXPECT_NE(expired().back().find("spent more than 0.2 s in a short call"), std::string::npos)
      << expired().back();
  Runtime::set_watchdog_seconds(0);  // off: nothing is armed
  {
    const Deadline off("a call without a watchdog");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_EQ(expired().size(), 3u);
  Deadline::set_action_for_tests(nullptr);
  Runtime::set_watchdog_seconds(saved);
}

TEST(MpiExecutor, ClockAdvancesAndComputeRunsTheMath) {
  MpiExecutor executor;
  const double t0 = executor.now();
  EXPECT_GE(t0, 0.0);
  int runs = 0;
  executor.compute(Cost{.flops = 1e6}, [&] { ++runs; });
  executor.set_progress_comm(world().handle());
  executor.compute(Cost{}, [&] { ++runs; });
  EXPECT_EQ(runs, 2);
  const double t1 = executor.now();
  while (executor.now() - t1 < 0.01) {
  }
  EXPECT_GE(executor.now() - t0, 0.01);
  EXPECT_FALSE(executor.cost_only());
}

}  // namespace
}  // namespace syncopate::mpi::testing
