// MPI collectives against the in-memory execution of the same schedules (which is what the
// simulator computes): bit-identical, and close to a double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/comm/collective_schedule.hpp"
#include "tests/mpi/mpi_test_env.hpp"

namespace syncopate::mpi::testing {
namespace {

constexpr Algorithm kAlgorithms[] = {Algorithm::kAuto,         Algorithm::kRing,
                                     Algorithm::kRabenseifner, Algorithm::kRecursiveDoubling,
                                     Algorithm::kBinomialTree, Algorithm::kHierarchical,
                                     Algorithm::kMaster};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

std::vector<std::vector<float>> all_inputs(int p, size_t n, uint32_t salt) {
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < p; ++r) inputs.push_back(input_of(r, n, salt));
  return inputs;
}

// Runs `schedule` in memory on every rank's input (no finish()).
std::vector<std::vector<float>> in_memory(const Schedule& schedule, ReduceOp op,
                                          std::vector<std::vector<float>> buffers) {
  std::vector<std::span<float>> spans(buffers.begin(), buffers.end());
  execute_in_memory(schedule, spans, op);
  return buffers;
}

// The reduction in double precision, element by element.
std::vector<double> double_reduce(int p, size_t n, ReduceOp op, uint32_t salt) {
  const auto inputs = all_inputs(p, n, salt);
  std::vector<double> out(n, op == ReduceOp::kMax ? -INFINITY : 0.0);
  for (const auto& in : inputs)
    for (size_t i = 0; i < n; ++i)
      out[i] = op == ReduceOp::kMax ? std::max(out[i], double{in[i]}) : out[i] + in[i];
  if (op == ReduceOp::kAvg)
    for (double& x : out) x /= p;
  return out;
}

bool bit_identical(std::span<const float> a, std::span<const float> b) {
  // (memcmp must not see the null data pointer of an empty span.)
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

void expect_close(std::span<const float> got, std::span<const double> want, int p) {
  ASSERT_EQ(got.size(), want.size());
  // Inputs are in [-1, 1): p - 1 float additions err by at most p * eps * p in total.
  const double tolerance = 1e-7 * p * p + 1e-7;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance) << "element " << i;
}

TEST(MpiAllreduce, BitIdenticalToInMemoryScheduleForEveryAlgorithmAndOp) {
  MpiCommunicator& comm = world();
  const int p = comm.size();
  uint32_t salt = 0;
  for (const Algorithm algorithm : kAlgorithms)
    // 7001 and 12345: steps of 1,001 to 8,192 floats, which travel in eager-sized messages
    // (recursive doubling's 7001 with sends and receives over the same floats).
    for (const size_t n :
         {size_t{1}, size_t{5}, size_t{1000}, size_t{7001}, size_t{12345}, size_t{200003}})
      for (const ReduceOp op : kOps) {
        SCOPED_TRACE(std::string(to_string(algorithm)) + " n=" + std::to_string(n) + " " +
                     std::string(to_string(op)));
        ++salt;
        std::vector<float> data = input_of(comm.rank(), n, salt);
        comm.allreduce(data, {op, algorithm});

        const Algorithm resolved =
            resolve_algorithm(algorithm, p, n * sizeof(float), comm.node_of_rank());
        auto expected = in_memory(make_allreduce_schedule(resolved, p, n, comm.node_of_rank()), op,
                                  all_inputs(p, n, salt));
        for (auto& buffer : expected) finish(op, p, buffer);
        EXPECT_TRUE(bit_identical(data, expected[static_cast<size_t>(comm.rank())]));
        EXPECT_TRUE(bit_identical(data, expected[0])) << "ranks disagree";
        expect_close(data, double_reduce(p, n, op, salt), p);
      }
}

// A 16-bit wire format sends each step's encoded segment in messages cut by their bytes, as fp32
// is: 7001 and 12345 elements make steps of 4,001 bytes to 32 KiB (eager-sized messages where
// shared memory sends by single copy), 600011 steps over 256 KiB (several chunks). The result
// has the bits of the in-memory schedule in that format.
TEST(MpiAllreduce, WireFormatsAreBitIdenticalToInMemorySchedule) {
  MpiCommunicator& comm = world();
  const int p = comm.size();
  uint32_t salt = 500;
  for (const WireFormat wire : {WireFormat::kFp16, WireFormat::kBf16})
    for (const Algorithm algorithm : {Algorithm::kRing, Algorithm::kRecursiveDoubling})
      for (const size_t n : {size_t{5}, size_t{7001}, size_t{12345}, size_t{600011}}) {
        SCOPED_TRACE(std::string(to_string(wire)) + " " + std::string(to_string(algorithm)) +
                     " n=" + std::to_string(n));
        ++salt;
        std::vector<float> data = input_of(comm.rank(), n, salt);
        comm.allreduce(data, {.op = ReduceOp::kAvg, .algorithm = algorithm, .wire = wire});

        std::vector<std::vector<float>> expected = all_inputs(p, n, salt);
        for (auto& buffer : expected) prepare(ReduceOp::kAvg, p, buffer, wire);
        std::vector<std::span<float>> spans(expected.begin(), expected.end());
        execute_in_memory(make_allreduce_schedule(algorithm, p, n, comm.node_of_rank()), spans,
                          ReduceOp::kAvg, wire);
        for (auto& buffer : expected) finish(ReduceOp::kAvg, p, buffer, wire);
        EXPECT_TRUE(bit_identical(data, expected[static_cast<size_t>(comm.rank())]));
        EXPECT_TRUE(bit_identical(data, expected[0])) << "ranks disagree";
      }
}

TEST(MpiAllreduce, HierarchicalOverPretendNodesMatchesInMemorySchedule) {
  // Two ranks per node: node_of_rank = {0, 0, 1, 1, ...}.
  ::setenv("SYNCOPATE_MPI_RANKS_PER_NODE", "2", 1);
  std::unique_ptr<MpiCommunicator> comm = MpiCommunicator::world();
  ::unsetenv("SYNCOPATE_MPI_RANKS_PER_NODE");
  const int p = comm->size();
  std::vector<int> nodes(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) nodes[static_cast<size_t>(r)] = r / 2;
  EXPECT_TRUE(std::equal(nodes.begin(), nodes.end(), comm->node_of_rank().begin(),
                         comm->node_of_rank().end()));
  EXPECT_EQ(comm->num_nodes(), (p + 1) / 2);
  std::unique_ptr<Communicator> node_group = comm->split(comm->node(), comm->rank());
  EXPECT_EQ(node_group->size(), std::min(2, p - 2 * comm->node()));

  for (const Algorithm algorithm : {Algorithm::kHierarchical, Algorithm::kAuto})
    for (const size_t n : {size_t{7}, size_t{100001}})
      for (const ReduceOp op : kOps) {
        SCOPED_TRACE(std::string(to_string(algorithm)) + " n=" + std::to_string(n) + " " +
                     std::string(to_string(op)));
        const uint32_t salt = 900 + static_cast<uint32_t>(n);
        std::vector<float> data = input_of(comm->rank(), n, salt);
        comm->allreduce(data, {op, algorithm});
        const Algorithm resolved = resolve_algorithm(algorithm, p, n * sizeof(float), nodes);
        auto expected =
            in_memory(make_allreduce_schedule(resolved, p, n, nodes), op, all_inputs(p, n, salt));
        finish(op, p, expected[static_cast<size_t>(comm->rank())]);
        EXPECT_TRUE(bit_identical(data, expected[static_cast<size_t>(comm->rank())]));
        expect_close(data, double_reduce(p, n, op, salt), p);
      }
}

TEST(MpiAllreduce, AsyncAllreducesInFlightTogetherCompleteInAnyWaitOrder) {
  MpiCommunicator& comm = world();
  const int p = comm.size();
  const size_t sizes[] = {3, 100000, 777, 250000};
  const Algorithm algorithms[] = {Algorithm::kRing, Algorithm::kRabenseifner,
                                  Algorithm::kRecursiveDoubling, Algorithm::kAuto};
  std::vector<std::vector<float>> data;
  std::vector<WorkPtr> works;
  for (size_t k = 0; k < 4; ++k) {
    data.push_back(input_of(comm.rank(), sizes[k], 100 + static_cast<uint32_t>(k)));
    works.push_back(comm.allreduce_async(data[k], {ReduceOp::kAvg, algorithms[k]}));
  }
  works[3]->wait();
  works[1]->wait();
  works[0].reset();  // destroying an unwaited Work waits for it
  works[2]->wait();
  for (size_t k = 0; k < 4; ++k) {
    const size_t n = sizes[k];
    const Algorithm resolved =
        resolve_algorithm(algorithms[k], p, n * sizeof(float), comm.node_of_rank());
    auto expected = in_memory(make_allreduce_schedule(resolved, p, n, comm.node_of_rank()),
                              ReduceOp::kAvg, all_inputs(p, n, 100 + static_cast<uint32_t>(k)));
    finish(ReduceOp::kAvg, p, expected[static_cast<size_t>(comm.rank())]);
    EXPECT_TRUE(bit_identical(data[k], expected[static_cast<size_t>(comm.rank())])) << "job " << k;
  }
}

// This rank's result of a ring allreduce (sum) of input_of(rank, n, salt) over comm's ranks.
std::vector<float> ring_sum_of(const MpiCommunicator& comm, size_t n, uint32_t salt) {
  const int p = comm.size();
  const Algorithm resolved =
      resolve_algorithm(Algorithm::kRing, p, n * sizeof(float), comm.node_of_rank());
  auto expected = in_memory(make_allreduce_schedule(resolved, p, n, comm.node_of_rank()),
                            ReduceOp::kSum, all_inputs(p, n, salt));
  return expected[static_cast<size_t>(comm.rank())];
}

// allreduce() runs on the calling thread when nothing is in flight, and queues behind the
// asynchronous jobs otherwise: both ways it gives the schedule's bits, and the jobs theirs.
TEST(MpiAllreduce, WaitedAllreduceRunsAtOnceOrBehindTheJobsInFlight) {
  MpiCommunicator& comm = world();
  const CollectiveOptions ring{ReduceOp::kSum, Algorithm::kRing};
  std::vector<float> alone = input_of(comm.rank(), 300001, 40);
  comm.allreduce(alone, ring);
  EXPECT_TRUE(bit_identical(alone, ring_sum_of(comm, 300001, 40)));

  std::vector<float> first = input_of(comm.rank(), 200000, 41);
  std::vector<float> waited = input_of(comm.rank(), 5000, 42);
  std::vector<float> last = input_of(comm.rank(), 99, 43);
  WorkPtr in_flight = comm.allreduce_async(first, ring);
  comm.allreduce(waited, ring);
  WorkPtr after = comm.allreduce_async(last, ring);
  after->wait();
  in_flight->wait();
  EXPECT_TRUE(bit_identical(first, ring_sum_of(comm, 200000, 41)));
  EXPECT_TRUE(bit_identical(waited, ring_sum_of(comm, 5000, 42)));
  EXPECT_TRUE(bit_identical(last, ring_sum_of(comm, 99, 43)));
}

// A small asynchronous collective with nothing queued or running is done when the call returns
// (no hand-off to the helper thread: MpiCommunicator::kRunAtOnceBytes); one queued behind a large
// job in flight still runs after it. Both give the schedule's bits.
TEST(MpiAllreduce, SmallAsynchronousCollectivesRunAtOnceWhenNothingIsInFlight) {
  MpiCommunicator& comm = world();
  const CollectiveOptions ring{ReduceOp::kSum, Algorithm::kRing};
  constexpr size_t kSmall = MpiCommunicator::kRunAtOnceBytes / sizeof(float);
  comm.barrier();
  std::vector<float> small = input_of(comm.rank(), kSmall, 50);
  WorkPtr at_once = comm.allreduce_async(small, ring);
  EXPECT_TRUE(bit_identical(small, ring_sum_of(comm, kSmall, 50)));  // before wait()
  at_once->wait();

  std::vector<float> large = input_of(comm.rank(), 300000, 51);
  std::vector<float> behind = input_of(comm.rank(), 1000, 52);
  WorkPtr first = comm.allreduce_async(large, ring);
  WorkPtr second = comm.allreduce_async(behind, ring);
  second->wait();
  first->wait();
  EXPECT_TRUE(bit_identical(large, ring_sum_of(comm, 300000, 51)));
  EXPECT_TRUE(bit_identical(behind, ring_sum_of(comm, 1000, 52)));
}

// A communicator of one rank has no peer to overlap with: its asynchronous collectives are done
// when the call returns, without the hand-off to the helper thread (a reduce-scatter's output
// is written before wait()), and leave the data as it was (nothing is sent, nothing rounded).
TEST(MpiAllreduce, OneRankRunsItsAsynchronousCollectivesAtOnce) {
  std::unique_ptr<MpiCommunicator> alone = world().split_mpi(world().rank(), 0);
  ASSERT_EQ(alone->size(), 1);
  const std::vector<float> input = input_of(world().rank(), 1001, 44);
  for (const WireFormat wire : {WireFormat::kFp32, WireFormat::kBf16}) {
    SCOPED_TRACE(std::string(to_string(wire)));
    std::vector<float> block(input.size(), NAN);
    WorkPtr scatter = alone->reduce_scatter_async(input, block, ReduceOp::kAvg, wire);
    EXPECT_TRUE(bit_identical(block, input));
    std::vector<float> data = input;
    WorkPtr reduce = alone->allreduce_async(data, {.op = ReduceOp::kAvg, .wire = wire});
    std::vector<float> all(input.size(), NAN);
    WorkPtr gather = alone->allgather_async(input, all, wire);
    scatter->wait();
    reduce->wait();
    gather->wait();
    EXPECT_TRUE(bit_identical(data, input));
    EXPECT_TRUE(bit_identical(all, input));
    EXPECT_GE(reduce->completion().elapsed_s, 0);
    EXPECT_NE(reduce->completion().algorithm, Algorithm::kAuto);
  }
}

TEST(MpiCollectives, ReduceScatterMatchesInMemorySchedule) {
  MpiCommunicator& comm = world();
  const int p = comm.size(), rank = comm.rank();
  for (const size_t n : {size_t{1}, size_t{3}, size_t{1001}})
    for (const ReduceOp op : kOps) {
      SCOPED_TRACE("n=" + std::to_string(n) + " " + std::string(to_string(op)));
      const uint32_t salt = 300 + static_cast<uint32_t>(n);
      const BlockRange block = block_of(n, p, rank);
      std::vector<float> out(block.count, NAN);
      comm.reduce_scatter(input_of(rank, n, salt), out, op, WireFormat::kFp32);

      auto expected = in_memory(make_reduce_scatter_schedule(p, n), op, all_inputs(p, n, salt));
      std::span<float> mine(expected[static_cast<size_t>(rank)].data() + block.offset, block.count);
      finish(op, p, mine);
      EXPECT_TRUE(bit_identical(out, mine));
      const auto want = double_reduce(p, n, op, salt);
      expect_close(out, std::span(want).subspan(block.offset, block.count), p);
    }
}

TEST(MpiCollectives, AllgatherPutsEveryRanksBlockInPlace) {
  MpiCommunicator& comm = world();
  const int p = comm.size(), rank = comm.rank();
  for (const size_t n : {size_t{1}, size_t{3}, size_t{1001}}) {
    const BlockRange mine = block_of(n, p, rank);
    std::vector<float> all(n, NAN);
    comm.allgather(input_of(rank, mine.count, 400), all, WireFormat::kFp32);
    for (int r = 0; r < p; ++r) {
      const BlockRange block = block_of(n, p, r);
      const std::vector<float> theirs = input_of(r, block.count, 400);
      EXPECT_TRUE(bit_identical(std::span(all).subspan(block.offset, block.count), theirs))
          << "n=" << n << " block of rank " << r;
    }
  }
}

// Over pretend nodes of two ranks, reduce_scatter and allgather (blocking and asynchronous) run
// the hierarchical schedules in their grouped layout (one node: the ring), and still hand every
// rank its block_of: the in-memory schedule's bits, close to a double reference.
TEST(MpiCollectives, ReduceScatterAndAllgatherOverPretendNodesMatchInMemorySchedules) {
  ::setenv("SYNCOPATE_MPI_RANKS_PER_NODE", "2", 1);
  std::unique_ptr<MpiCommunicator> comm = MpiCommunicator::world();
  ::unsetenv("SYNCOPATE_MPI_RANKS_PER_NODE");
  const int p = comm->size(), rank = comm->rank();
  const std::vector<int> nodes(comm->node_of_rank().begin(), comm->node_of_rank().end());
  const GatherLayout layout = gather_layout(nodes);
  EXPECT_EQ(layout.in_place(), p < 4);
  for (const bool async : {false, true})
    for (const size_t n : {size_t{1}, size_t{7}, size_t{1001}})
      for (const ReduceOp op : kOps) {
        SCOPED_TRACE(std::string(async ? "async" : "blocking") + " n=" + std::to_string(n) + " " +
                     std::string(to_string(op)));
        const uint32_t salt = 800 + static_cast<uint32_t>(n);
        const BlockRange block = block_of(n, p, rank);
        std::vector<float> out(block.count, NAN);
        const std::vector<float> input = input_of(rank, n, salt);
        if (async)
          comm->reduce_scatter_async(input, out, op, WireFormat::kFp32)->wait();
        else
          comm->reduce_scatter(input, out, op, WireFormat::kFp32);
        std::vector<std::vector<float>> grouped = all_inputs(p, n, salt);
        for (auto& buffer : grouped) {
          const std::vector<float> caller = buffer;
          layout.to_schedule(caller, buffer);
        }
        auto expected = in_memory(
            make_schedule(CollectiveKind::kReduceScatter, Algorithm::kAuto, p, n, 0, nodes), op,
            grouped);
        const Segment at = layout.block(n, rank);
        std::span<float> mine(expected[static_cast<size_t>(rank)].data() + at.offset, at.count);
        finish(op, p, mine);
        EXPECT_TRUE(bit_identical(out, mine));
        const auto want = double_reduce(p, n, op, salt);
        expect_close(out, std::span(want).subspan(block.offset, block.count), p);

        std::vector<float> all(n, NAN);
        const std::vector<float> contribution = input_of(rank, block.count, salt);
        if (async)
          comm->allgather_async(contribution, all, WireFormat::kFp32)->wait();
        else
          comm->allgather(contribution, all, WireFormat::kFp32);
        for (int r = 0; r < p; ++r) {
          const BlockRange theirs = block_of(n, p, r);
          EXPECT_TRUE(bit_identical(std::span(all).subspan(theirs.offset, theirs.count),
                                    input_of(r, theirs.count, salt)))
              << "block of rank " << r;
        }
      }
}

TEST(MpiCollectives, BroadcastCopiesRootsBufferExactly) {
  MpiCommunicator& comm = world();
  const int root = comm.size() - 1;
  std::vector<float> data(5000, NAN);
  if (comm.rank() == root) data = input_of(root, data.size(), 500);
  comm.broadcast(data, root);
  EXPECT_TRUE(bit_identical(data, input_of(root, data.size(), 500)));
}

TEST(MpiCollectives, ReduceToRootMatchesInMemorySchedule) {
  MpiCommunicator& comm = world();
  const int p = comm.size(), root = p / 2;
  for (const ReduceOp op : kOps) {
    const size_t n = 4097;
    std::vector<float> data = input_of(comm.rank(), n, 600);
    comm.reduce(data, root, op);
    if (comm.rank() != root) continue;
    auto expected = in_memory(make_reduce_schedule(p, n, root), op, all_inputs(p, n, 600));
    finish(op, p, expected[static_cast<size_t>(root)]);
    EXPECT_TRUE(bit_identical(data, expected[static_cast<size_t>(root)])) << to_string(op);
    expect_close(data, double_reduce(p, n, op, 600), p);
  }
}

TEST(MpiNative, NativeAllreduceAgreesWithDoubleReference) {
  MpiCommunicator& comm = world();
  for (const ReduceOp op : kOps) {
    std::vector<float> data = input_of(comm.rank(), 10000, 700);
    native_allreduce(comm, data, op);
    expect_close(data, double_reduce(comm.size(), data.size(), op, 700), comm.size());
  }
}

}  // namespace
}  // namespace syncopate::mpi::testing
