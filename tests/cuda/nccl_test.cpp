// The NCCL communicator on one rank (the device machine has one GPU): initialisation from a
// unique id and in-place collectives that must leave a lone rank's data as it was.
#if defined(SYNCOPATE_HAVE_NCCL)
#include <gtest/gtest.h>

#include <vector>

#include "backends/cuda/nccl_comm.hpp"
#include "tests/cuda/cuda_test_util.hpp"
#include "tests/cuda/reference.hpp"

namespace syncopate::cuda {
namespace {

using CudaNccl = CudaTest;

TEST_F(CudaNccl, SingleRankCollectivesKeepTheData) {
  NcclCommunicator comm(1, 0, nccl_unique_id());
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.rank(), 0);
  const auto host = reference::random_floats(4099, 1);
  auto data = upload(host);
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    comm.allreduce(data.data(), data.size(), op, stream());
    EXPECT_EQ(download(data), host) << to_string(op);
  }
  comm.broadcast(data.data(), data.size(), 0, stream());
  EXPECT_EQ(download(data), host);
}

}  // namespace
}  // namespace syncopate::cuda
#endif  // SYNCOPATE_HAVE_NCCL
