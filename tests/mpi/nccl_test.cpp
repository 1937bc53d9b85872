// The NCCL communicator over MPI processes (mpi.transport = "nccl"): MPI is its control
// communicator. With a GPU per rank it must hold the Communicator contract (epoch_async's
// global model included, through MPI's window) and give the MPI backend's bits for every
// allreduce algorithm and op, in fp32, fp16 and bf16; native mode must be close to them.
// Without enough devices every rank must get the same UserError (no rank left blocked).
#if defined(SYNCOPATE_HAVE_NCCL)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cuda/nccl_comm.hpp"
#include "tests/contract/communicator_contract.hpp"
#include "tests/contract/expect_no_failures.hpp"
#include "tests/mpi/mpi_test_env.hpp"

namespace syncopate::mpi::testing {
namespace {

using cuda::NcclCommunicator;

// Collective: true on every rank iff every node has at least as many CUDA devices as ranks.
bool every_rank_has_a_device(MpiCommunicator& comm) {
  int on_node = 0;
  for (const int node : comm.node_of_rank()) on_node += node == comm.node() ? 1 : 0;
  int ok = cuda::device_count() >= on_node ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm.handle());
  return ok == 1;
}

using contract::expect_no_failures;

TEST(NcclOverMpi, TooFewDevicesIsTheSameUserErrorOnEveryRank) {
  if (every_rank_has_a_device(world())) GTEST_SKIP() << "every rank has a device";
  std::string message;
  try {
    NcclCommunicator comm(world());
  } catch (const UserError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("NCCL needs one CUDA device per rank"), std::string::npos) << message;
  // The ranks are still in step: a collective right after completes.
  world().barrier();
}

TEST(NcclOverMpi, HoldsTheContract) {
  if (!every_rank_has_a_device(world())) GTEST_SKIP() << "fewer CUDA devices than ranks";
  NcclCommunicator comm(world());
  expect_no_failures(contract::check_communicator_contract(comm));
  std::unique_ptr<Communicator> half = comm.split(comm.rank() % 2, -comm.rank());
  expect_no_failures(contract::check_communicator_contract(*half));
  // A group keeps each rank on its parent's GPU (the model's memory is there).
  const auto* nccl_half = dynamic_cast<const NcclCommunicator*>(half.get());
  ASSERT_NE(nccl_half, nullptr);
  EXPECT_EQ(nccl_half->device(), comm.device());
}

TEST(NcclOverMpi, NativeModeHoldsTheContract) {
  if (!every_rank_has_a_device(world())) GTEST_SKIP() << "fewer CUDA devices than ranks";
  NcclCommunicator comm(world(), {.native = true});
  expect_no_failures(contract::check_communicator_contract(comm));
}

TEST(NcclOverMpi, AllreduceGivesTheMpiBackendsBitsForEveryAlgorithmAndOp) {
  if (!every_rank_has_a_device(world())) GTEST_SKIP() << "fewer CUDA devices than ranks";
  NcclCommunicator nccl(world());
  NcclCommunicator native(world(), {.native = true});
  uint32_t salt = 5000;
  for (const Algorithm algorithm :
       {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRabenseifner, Algorithm::kRecursiveDoubling,
        Algorithm::kBinomialTree, Algorithm::kMaster})
    for (const size_t n : {size_t{5}, size_t{200003}})
      for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        SCOPED_TRACE(std::string(to_string(algorithm)) + " n=" + std::to_string(n) + " " +
                     std::string(to_string(op)));
        const std::vector<float> input = input_of(world().rank(), n, ++salt);
        std::vector<float> by_mpi = input, by_nccl = input, by_native = input;
        world().allreduce(by_mpi, {op, algorithm});
        nccl.allreduce_async(by_nccl, {op, algorithm})->wait();
        native.allreduce(by_native, {op, algorithm});
        EXPECT_EQ(std::memcmp(by_mpi.data(), by_nccl.data(), n * sizeof(float)), 0);
        for (size_t i = 0; i < n; ++i)
          ASSERT_NEAR(by_native[i], by_mpi[i], 1e-6 * world().size() * world().size())
              << "element " << i;
      }
}

// strategy.compression = "fp16" / "bf16": the device rounds with core's converters, so the
// schedules give the MPI backend's bits; NCCL's own allreduce sums in the format in its order.
TEST(NcclOverMpi, SixteenBitFormatsGiveTheMpiBackendsBits) {
  if (!every_rank_has_a_device(world())) GTEST_SKIP() << "fewer CUDA devices than ranks";
  NcclCommunicator nccl(world());
  NcclCommunicator native(world(), {.native = true});
  const int p = world().size();
  uint32_t salt = 7000;
  for (const WireFormat wire : {WireFormat::kFp16, WireFormat::kBf16}) {
    // An ulp of the format at 1. Partial sums stay below p, so each of the p - 1 additions of
    // either side rounds by at most p of them.
    const double ulp = wire == WireFormat::kFp16 ? 0x1p-10 : 0x1p-7;
    for (const size_t n : {size_t{5}, size_t{200003}}) {
      for (const Algorithm algorithm :
           {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRabenseifner,
            Algorithm::kRecursiveDoubling, Algorithm::kBinomialTree})
        for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
          SCOPED_TRACE(std::string(to_string(wire)) + " " + std::string(to_string(algorithm)) +
                       " n=" + std::to_string(n) + " " + std::string(to_string(op)));
          const std::vector<float> input = input_of(world().rank(), n, ++salt);
          std::vector<float> by_mpi = input, by_nccl = input, by_native = input;
          const CollectiveOptions options{.op = op, .algorithm = algorithm, .wire = wire};
          world().allreduce(by_mpi, options);
          nccl.allreduce_async(by_nccl, options)->wait();
          native.allreduce(by_native, options);
          EXPECT_EQ(std::memcmp(by_mpi.data(), by_nccl.data(), n * sizeof(float)), 0);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(by_native[i], round_to_wire(by_native[i], wire)) << "element " << i;
            ASSERT_NEAR(by_native[i], by_mpi[i], 2 * p * p * ulp) << "element " << i;
          }
        }
    }
  }
  // Half the bytes of fp32 went through NCCL for the same schedule.
  const CommCounters before = nccl.counters();
  std::vector<float> data = input_of(world().rank(), 4096, ++salt);
  nccl.allreduce(data, {.algorithm = Algorithm::kRing});
  const CommCounters fp32 = nccl.counters();
  nccl.allreduce(data, {.algorithm = Algorithm::kRing, .wire = WireFormat::kBf16});
  const CommCounters bf16 = nccl.counters();
  EXPECT_EQ(2 * (bf16.bytes_sent - fp32.bytes_sent), fp32.bytes_sent - before.bytes_sent);
}

// zero's collectives: the schedule that the algorithm selects (across nodes the hierarchical
// one, in its own layout of the blocks), blocking and asynchronous, in every wire format.
TEST(NcclOverMpi, GathersGiveTheMpiBackendsBits) {
  if (!every_rank_has_a_device(world())) GTEST_SKIP() << "fewer CUDA devices than ranks";
  NcclCommunicator nccl(world());
  const int p = world().size();
  uint32_t salt = 8000;
  for (const WireFormat wire : {WireFormat::kFp32, WireFormat::kFp16, WireFormat::kBf16})
    for (const Algorithm algorithm : {Algorithm::kRing, Algorithm::kAuto})
      for (const size_t n : {size_t{5}, size_t{200003}}) {
        SCOPED_TRACE(std::string(to_string(wire)) + " " + std::string(to_string(algorithm)) +
                     " n=" + std::to_string(n));
        const GatherOptions options(wire, algorithm);
        const BlockRange mine = block_of(n, p, world().rank());
        const std::vector<float> input = input_of(world().rank(), n, ++salt);
        for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          std::vector<float> out_mpi(mine.count), out_nccl(mine.count), out_async(mine.count);
          world().reduce_scatter(input, out_mpi, op, options);
          nccl.reduce_scatter(input, out_nccl, op, options);
          nccl.reduce_scatter_async(input, out_async, op, options)->wait();
          EXPECT_EQ(out_nccl, out_mpi);
          EXPECT_EQ(out_async, out_mpi);
        }
        const std::span<const float> contribution(input.data() + mine.offset, mine.count);
        std::vector<float> all_mpi(n), all_nccl(n), all_async(n);
        world().allgather(contribution, all_mpi, options);
        nccl.allgather(contribution, all_nccl, options);
        nccl.allgather_async(contribution, all_async, options)->wait();
        EXPECT_EQ(all_nccl, all_mpi);
        EXPECT_EQ(all_async, all_mpi);
      }
}

TEST(NcclOverMpi, DeviceResidentAllreduceAveragesLikeTheHost) {
  if (!every_rank_has_a_device(world())) GTEST_SKIP() << "fewer CUDA devices than ranks";
  NcclCommunicator comm(world());
  const size_t n = 100001;
  const std::vector<float> input = input_of(world().rank(), n, 77);
  std::vector<float> host = input;
  world().allreduce(host, {ReduceOp::kAvg, Algorithm::kRing});
  cuda::DeviceBuffer<float> device(n);
  cuda::copy_to_device(std::span<const float>(input), device);
  comm.allreduce_device(device.data(), n, {ReduceOp::kAvg, Algorithm::kRing});
  std::vector<float> back(n);
  cuda::copy_to_host(device, std::span<float>(back));
  EXPECT_EQ(std::memcmp(back.data(), host.data(), n * sizeof(float)), 0);
}

}  // namespace
}  // namespace syncopate::mpi::testing
#endif  // SYNCOPATE_HAVE_NCCL
