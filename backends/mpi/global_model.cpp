// The shared global model of epoch_async, on MPI one-sided communication.
//
// Why one-sided with an exclusive lock: every rank trains; there is no spare rank to dedicate as
// a parameter server, and a server would need its own progress loop. With passive-target RMA,
// rank 0 merely exposes a window holding the global model and every merge is
//   MPI_Win_lock(EXCLUSIVE, 0); MPI_Get; MPI_Win_flush; global = rule(global, local);
//   MPI_Put; MPI_Win_unlock
// by the merging rank alone. The exclusive lock gives the mutual exclusion the strategy needs,
// and merges happen in the order ranks acquire the lock, i.e. arrival order, as in the paper.
//
// Caveat: passive-target progress depends on the osc component. Runtime excludes osc/rdma
// (see runtime.cpp: Open MPI 4.1.4 bug with windows on split groups), so on one node Open MPI
// picks osc/sm (the window is shared memory, locks are atomics): merges never wait for rank 0 to
// enter MPI. Across nodes, osc/ucx (InfiniBand) is also truly passive. Over plain
// TCP only osc/pt2pt is left, which (a) serves lock requests only while the target is inside
// MPI, so merges stall while rank 0 computes: mitigate with MpiExecutor::set_progress_comm on
// rank 0, which pokes progress after every compute() call; and (b) refuses
// MPI_THREAD_MULTIPLE: run with SYNCOPATE_MPI_THREADS=funneled there.
//
// MPI_Win_lock and the window's creation and release block inside MPI and cannot be polled, so
// a Deadline bounds them: a rank that hangs while holding the lock ends the job after the
// watchdog (a rank that dies ends it through mpirun, as everywhere).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/mpi/deadline.hpp"
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {

void MpiCommunicator::create_global(std::span<const float> initial) {
  free_window();
  const Deadline deadline("create_global (MPI_Win_allocate)");
  const int count = detail::to_count(initial.size());
  const MPI_Aint bytes = rank_ == 0 ? static_cast<MPI_Aint>(initial.size_bytes()) : 0;
  void* base = nullptr;
  MPI_Win window = MPI_WIN_NULL;
  SYNC_MPI(MPI_Win_allocate(bytes, sizeof(float), MPI_INFO_NULL, main_->comm(), &base, &window));
  window_ = window;
  global_count_ = initial.size();
  SYNC_MPI(MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN));
  if (rank_ == 0) {
    SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, window_));
    SYNC_MPI(MPI_Put(initial.data(), count, MPI_FLOAT, 0, 0, count, MPI_FLOAT, window_));
    SYNC_MPI(MPI_Win_unlock(0, window_));
  }
  merge_scratch_.resize(initial.size());
  barrier();  // nobody merges before the initial model is in place
}

void MpiCommunicator::merge_into_global(std::span<float> local, const MergeRule& rule) {
  SYNC_CHECK(window_ != MPI_WIN_NULL, "merge_into_global before create_global");
  SYNC_CHECK(local.size() == global_count_,
             "merge of " << local.size() << " floats into a global model of " << global_count_);
  const int count = detail::to_count(global_count_);
  const Deadline deadline("merge_into_global (MPI_Win_lock on rank 0's window)");
  SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, window_));
  SYNC_MPI(MPI_Get(merge_scratch_.data(), count, MPI_FLOAT, 0, 0, count, MPI_FLOAT, window_));
  SYNC_MPI(MPI_Win_flush(0, window_));
  apply_merge_rule(rule, merge_scratch_, local);
  SYNC_MPI(MPI_Put(merge_scratch_.data(), count, MPI_FLOAT, 0, 0, count, MPI_FLOAT, window_));
  SYNC_MPI(MPI_Win_unlock(0, window_));
  std::copy(merge_scratch_.begin(), merge_scratch_.end(), local.begin());
  if (rank_ != 0) add_bytes(local.size_bytes(), local.size_bytes());
}

void MpiCommunicator::free_window() {
  if (window_ == MPI_WIN_NULL) return;
  // MPI_Win_free synchronises all ranks: skip it while failing (the job is being aborted).
  // Called from the destructor too, so errors are reported rather than thrown.
  if (detail::mpi_active() && !detail::failed() && std::uncaught_exceptions() == 0) {
    const Deadline deadline("MPI_Win_free");
    if (MPI_Win_free(&window_) != MPI_SUCCESS) {
      detail::mark_failed();
      std::fprintf(stderr, "syncopate mpi: MPI_Win_free failed on rank %d\n", rank_);
    }
  }
  window_ = MPI_WIN_NULL;
  global_count_ = 0;
}

}  // namespace syncopate::mpi
