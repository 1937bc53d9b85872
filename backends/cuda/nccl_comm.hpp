#pragma once
// Optional NCCL communicator over device buffers: built when the NCCL headers and library are
// found (SYNCOPATE_HAVE_NCCL). One rank per process and device.
//
// Set-up: one rank calls nccl_unique_id() and hands the 128 bytes to every other rank (e.g. an
// MPI_Bcast of NcclId::data()); then every rank constructs NcclCommunicator with its own rank
// after selecting its device (cudaSetDevice). Collectives are queued on `stream` and are
// in place on device memory; every rank must call them in the same order.
//
// Not (yet) an implementation of core/comm.hpp's Communicator, whose spans are host memory:
// the MPI backend stages device buffers through host memory instead.
#if defined(SYNCOPATE_HAVE_NCCL)
#include <nccl.h>

#include <array>
#include <cstddef>

#include "backends/cuda/device.hpp"
#include "core/comm.hpp"

namespace syncopate::cuda {

using NcclId = std::array<char, NCCL_UNIQUE_ID_BYTES>;

NcclId nccl_unique_id();

class NcclCommunicator {
 public:
  NcclCommunicator(int size, int rank, const NcclId& id);  // collective: all ranks
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ~NcclCommunicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // data: count floats on the device, reduced in place (kAvg divides the sum by size()).
  void allreduce(float* data, size_t count, ReduceOp op, cudaStream_t stream);
  void broadcast(float* data, size_t count, int root, cudaStream_t stream);

 private:
  ncclComm_t comm_ = nullptr;
  int size_ = 0, rank_ = 0;
};

}  // namespace syncopate::cuda
#endif  // SYNCOPATE_HAVE_NCCL
