// MpiSharedModel: the shared model of epoch_async, on MPI one-sided communication.
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
// a Deadline (the communicator's default timeout) bounds them: a rank that hangs while holding
// the lock ends the job after it (a rank that dies ends it through mpirun, as everywhere).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/mpi/deadline.hpp"
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {

class MpiSharedModel final : public SharedModel {
 public:
  MpiSharedModel(MpiCommunicator& comm, std::span<const float> initial);
  ~MpiSharedModel() override;
  MpiSharedModel(const MpiSharedModel&) = delete;
  MpiSharedModel& operator=(const MpiSharedModel&) = delete;

  size_t size() const override { return scratch_.size(); }
  void merge(std::span<float> local, const MergeRule& rule) override;

 private:
  MpiCommunicator& comm_;
  MPI_Win window_ = MPI_WIN_NULL;
  std::vector<float> scratch_;
};

MpiSharedModel::MpiSharedModel(MpiCommunicator& comm, std::span<const float> initial)
    : comm_(comm), scratch_(initial.size()) {
  // Every rank must pass the same size: check before the window exists, on every rank alike
  // (MPI's own allreduce: a census, not counted as the model's traffic).
  const Deadline deadline("create_shared_model (MPI_Win_allocate)", comm_.default_timeout());
  long long sizes[2] = {static_cast<long long>(initial.size()),
                        -static_cast<long long>(initial.size())};
  SYNC_MPI(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_LONG_LONG, MPI_MAX, comm_.handle()));
  if (sizes[0] != -sizes[1])
    throw UserError("mpi: create_shared_model: rank " + std::to_string(comm_.rank()) + " passed " +
                    std::to_string(initial.size()) + " floats, some rank " +
                    std::to_string(sizes[0]) + "; allowed: the same model size on every rank");
  const int count = detail::to_count(initial.size());
  const int rank = comm_.rank();
  const MPI_Aint bytes = rank == 0 ? static_cast<MPI_Aint>(initial.size_bytes()) : 0;
  void* base = nullptr;
  SYNC_MPI(MPI_Win_allocate(bytes, sizeof(float), MPI_INFO_NULL, comm_.handle(), &base, &window_));
  SYNC_MPI(MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN));
  if (rank == 0) {
    SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, window_));
    SYNC_MPI(MPI_Put(initial.data(), count, MPI_FLOAT, 0, 0, count, MPI_FLOAT, window_));
    SYNC_MPI(MPI_Win_unlock(0, window_));
  }
  comm_.barrier();  // nobody merges before the initial model is in place
}

void MpiSharedModel::merge(std::span<float> local, const MergeRule& rule) {
  check_merge_size(local.size(), scratch_.size(), "mpi", comm_.rank());
  const int count = detail::to_count(scratch_.size());
  const Deadline deadline("shared model merge (MPI_Win_lock on rank 0's window)",
                          comm_.default_timeout());
  SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, window_));
  SYNC_MPI(MPI_Get(scratch_.data(), count, MPI_FLOAT, 0, 0, count, MPI_FLOAT, window_));
  SYNC_MPI(MPI_Win_flush(0, window_));
  apply_merge_rule(rule, scratch_, local);
  SYNC_MPI(MPI_Put(scratch_.data(), count, MPI_FLOAT, 0, 0, count, MPI_FLOAT, window_));
  SYNC_MPI(MPI_Win_unlock(0, window_));
  std::copy(scratch_.begin(), scratch_.end(), local.begin());
  if (comm_.rank() != 0) comm_.add_bytes(local.size_bytes(), local.size_bytes());
}

// MPI_Win_free synchronises all ranks: skip it while failing (the job is being aborted). A
// destructor cannot throw: a failure is reported and the process marked failing, so that
// ~Runtime aborts the job.
MpiSharedModel::~MpiSharedModel() {
  if (window_ == MPI_WIN_NULL) return;
  if (!detail::mpi_active() || detail::failed() || std::uncaught_exceptions() > 0) return;
  const Deadline deadline("MPI_Win_free", comm_.default_timeout());
  if (MPI_Win_free(&window_) != MPI_SUCCESS) {
    detail::mark_failed();
    std::fprintf(stderr, "syncopate mpi: MPI_Win_free failed on rank %d\n", comm_.rank());
  }
}

std::unique_ptr<SharedModel> MpiCommunicator::create_shared_model(std::span<const float> initial) {
  return std::make_unique<MpiSharedModel>(*this, initial);
}

}  // namespace syncopate::mpi
