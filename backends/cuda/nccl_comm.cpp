#include "backends/cuda/nccl_comm.hpp"

#if defined(SYNCOPATE_HAVE_NCCL)
#include <cstring>
#include <sstream>

#include "core/check.hpp"

namespace syncopate::cuda {
namespace {

void check_nccl(ncclResult_t result, const char* file, int line, const char* expr) {
  if (result == ncclSuccess) return;
  std::ostringstream message;
  message << file << ":" << line << ": " << expr << ": " << ncclGetErrorString(result);
  throw CudaError(message.str());
}

#define SYNC_NCCL_CHECK(expr) check_nccl((expr), __FILE__, __LINE__, #expr)

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
  }
  SYNC_CHECK(false, "unknown ReduceOp " << static_cast<int>(op));
  return ncclSum;
}

}  // namespace

NcclId nccl_unique_id() {
  ncclUniqueId id;
  SYNC_NCCL_CHECK(ncclGetUniqueId(&id));
  NcclId bytes;
  std::memcpy(bytes.data(), id.internal, bytes.size());
  return bytes;
}

NcclCommunicator::NcclCommunicator(int size, int rank, const NcclId& id)
    : size_(size), rank_(rank) {
  SYNC_CHECK(size > 0 && rank >= 0 && rank < size, "rank " << rank << " of " << size);
  ncclUniqueId nccl_id;
  std::memcpy(nccl_id.internal, id.data(), id.size());
  SYNC_NCCL_CHECK(ncclCommInitRank(&comm_, size, nccl_id, rank));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) static_cast<void>(ncclCommDestroy(comm_));
}

void NcclCommunicator::allreduce(float* data, size_t count, ReduceOp op, cudaStream_t stream) {
  SYNC_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat32, to_nccl(op), comm_, stream));
}

void NcclCommunicator::broadcast(float* data, size_t count, int root, cudaStream_t stream) {
  SYNC_CHECK(root >= 0 && root < size_, "root " << root << " of " << size_);
  SYNC_NCCL_CHECK(ncclBroadcast(data, data, count, ncclFloat32, root, comm_, stream));
}

}  // namespace syncopate::cuda
#endif  // SYNCOPATE_HAVE_NCCL
