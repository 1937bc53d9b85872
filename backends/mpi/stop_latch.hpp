#pragma once
// MpiStopLatch: where the ranks of an MPI run stop after a signal (core/train/checkpoint.hpp).
#include <mpi.h>

#include <cstdint>

#include "core/train/checkpoint.hpp"

namespace syncopate::mpi {

class MpiCommunicator;

// The StopRecords of the process latch (core/train/checkpoint.cpp), one per StopUnit,
// kept in a window on rank 0 and read and written under its exclusive lock: one atomic step for
// every rank, as the process latch's mutex is for the workers of one process. A signal that
// reaches only some ranks, or reaches them at different boundaries (mpirun and srun forward it
// to each rank at its own moment), then stops every rank at the same boundary, where each one
// writes its checkpoint; no rank waits for another that stopped earlier.
//
// Cost: one lock, get, put and unlock on rank 0's window per boundary (atomics in shared memory
// on one node, osc/sm; a few round trips across nodes, osc/ucx): no rank waits for another.
class MpiStopLatch final : public StopLatch {
 public:
  explicit MpiStopLatch(MpiCommunicator& comm);  // collective
  ~MpiStopLatch() override;                      // collective (MPI_Win_free)
  MpiStopLatch(const MpiStopLatch&) = delete;
  MpiStopLatch& operator=(const MpiStopLatch&) = delete;

  int64_t latch(StopUnit unit, int64_t done, int workers, bool signalled) override;

 private:
  MpiCommunicator& comm_;
  MPI_Win window_ = MPI_WIN_NULL;  // rank 0: {furthest, latched} per unit, as int64
};

}  // namespace syncopate::mpi
