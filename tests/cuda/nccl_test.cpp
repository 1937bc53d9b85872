// The NCCL communicator in one process: a lone rank (the device machine has one GPU) over the
// in-process control communicator must hold the whole Communicator contract, in both modes, and
// on a machine without a device its construction must fail with a clear UserError.
// Several ranks need several GPUs: see tests/mpi/nccl_test.cpp.
#if defined(SYNCOPATE_HAVE_NCCL)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cuda/nccl_comm.hpp"
#include "core/comm/local_backend.hpp"
#include "tests/contract/communicator_contract.hpp"
#include "tests/contract/expect_no_failures.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

using CudaNccl = CudaTest;

using contract::expect_no_failures;

TEST(NcclWithoutDevice, ConstructionIsAUserErrorNamingTheDeviceShortage) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  LocalCommunicator control;
  try {
    NcclCommunicator comm(control);
    FAIL() << "constructed without a device";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("NCCL needs one CUDA device per rank"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 0 (node 0, which runs 1 ranks) sees no CUDA device"),
              std::string::npos)
        << message;
  }
}

TEST_F(CudaNccl, SingleRankHoldsTheContract) {
  LocalCommunicator control;
  NcclCommunicator comm(control);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.device(), 0);
  expect_no_failures(contract::check_communicator_contract(comm));
}

TEST_F(CudaNccl, SingleRankNativeModeHoldsTheContract) {
  LocalCommunicator control;
  NcclCommunicator comm(control, {.native = true});
  expect_no_failures(contract::check_communicator_contract(comm));
}

TEST_F(CudaNccl, DeviceResidentCollectivesKeepALoneRanksData) {
  LocalCommunicator control;
  NcclCommunicator comm(control);
  const auto host = reference::random_floats(4099, 1);
  auto data = upload(host);
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    comm.allreduce_device(data.data(), data.size(), {.op = op});
    EXPECT_EQ(download(data), host) << to_string(op);
  }
  comm.broadcast_device(data.data(), data.size(), 0);
  EXPECT_EQ(download(data), host);
}

TEST_F(CudaNccl, ManyAsynchronousAllreducesInFlightComplete) {
  // More in flight than the pinned pool holds at first, waited out of order: each result is
  // its own input (one rank), and nothing is lost or mixed up between the staged copies.
  LocalCommunicator control;
  NcclCommunicator comm(control);
  std::vector<std::vector<float>> inputs, data;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 12; ++k) {
    inputs.push_back(reference::random_floats(1000 + 517 * static_cast<size_t>(k), 10 + k));
    data.push_back(inputs.back());
  }
  for (auto& d : data) works.push_back(comm.allreduce_async(d, {}));
  for (size_t k = 0; k < works.size(); k += 2) works[k]->wait();
  for (size_t k = 1; k < works.size(); k += 2) works[k]->wait();
  for (size_t k = 0; k < data.size(); ++k) EXPECT_EQ(data[k], inputs[k]) << k;
}

}  // namespace
}  // namespace syncopate::cuda
#endif  // SYNCOPATE_HAVE_NCCL
