// The NCCL communicator over MPI processes (mpi.transport = "nccl"): MPI is its control
// communicator. With a GPU per rank it must hold the Communicator contract (epoch_async's
// global model included, through MPI's window) and give the MPI backend's bits for every
// allreduce algorithm and op; native mode must be close to a double-precision reduction.
// Without enough devices every rank must get the same UserError (no rank left blocked).
#if defined(SYNCOPATE_HAVE_NCCL)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cuda/nccl_comm.hpp"
#include "tests/contract/communicator_contract.hpp"
#include "tests/mpi/mpi_test_env.hpp"

namespace syncopate::mpi::testing {
namespace {

using cuda::NcclCommunicator;

// NCCL refuses compressed collectives (strategy.compression is refused on its transport).
const contract::ContractOptions kNoWire{.check_wire_formats = false};

// Collective: true on every rank iff every node has at least as many CUDA devices as ranks.
bool every_rank_has_a_device(MpiCommunicator& comm) {
  int on_node = 0;
  for (const int node : comm.node_of_rank()) on_node += node == comm.node() ? 1 : 0;
  int ok = cuda::device_count() >= on_node ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm.handle());
  return ok == 1;
}

void expect_no_failures(const std::vector<std::string>& failures) {
  for (const std::string& failure : failures) ADD_FAILURE() << failure;
  EXPECT_TRUE(failures.empty());
}

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
  expect_no_failures(contract::check_communicator_contract(comm, kNoWire));
  std::unique_ptr<Communicator> half = comm.split(comm.rank() % 2, -comm.rank());
  expect_no_failures(contract::check_communicator_contract(*half, kNoWire));
  // A group keeps each rank on its parent's GPU (the model's memory is there).
  const auto* nccl_half = dynamic_cast<const NcclCommunicator*>(half.get());
  ASSERT_NE(nccl_half, nullptr);
  EXPECT_EQ(nccl_half->device(), comm.device());
}

TEST(NcclOverMpi, NativeModeHoldsTheContract) {
  if (!every_rank_has_a_device(world())) GTEST_SKIP() << "fewer CUDA devices than ranks";
  NcclCommunicator comm(world(), {.native = true});
  expect_no_failures(contract::check_communicator_contract(comm, kNoWire));
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
