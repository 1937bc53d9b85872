// MpiMasterModel and MpiMigratingModel: the shared model of epoch_async, on MPI one-sided
// communication, for the two placements of strategy.global_model.
//
// Why one-sided with an exclusive lock: every rank trains; there is no spare rank to dedicate as
// a parameter server, and a server would need its own progress loop. With passive-target RMA,
// rank 0 merely exposes a window holding the global model and every merge is
//   MPI_Win_lock(EXCLUSIVE, 0); MPI_Get; MPI_Win_flush; global = rule(global, local);
//   MPI_Put; MPI_Win_unlock
// by the merging rank alone. The exclusive lock gives the mutual exclusion the strategy needs,
// and merges happen in the order ranks acquire the lock, i.e. arrival order, as in the paper.
//
// Bytes (kMaster): rank 0's window stands in for the paper's master process, which runs no
// training task (MPI has no spare rank for it), so every merge counts the model sent to the
// master and back, on rank 0 as on the others: the simulator's count, where the model lives on
// the platform's master host, so that both backends report the same bytes for one scenario.
//
// kMigrating: every rank exposes a window of the model's size, and rank 0 a one-int window
// naming the holder (the rank that merged last; rank 0, holding the initial model, at first).
// A merge is
//   MPI_Win_lock(EXCLUSIVE, 0) on the holder window; get the holder; if it is another rank,
//   MPI_Get its model (lock SHARED on its window); merge; put the result in the own window;
//   holder = me; MPI_Win_unlock
// The holder window's lock is the mutual exclusion; a rank's model window is written only by
// that rank while it holds it, so a fetch never races a write. Bytes: a fetch from another rank
// counts the model received by the merging rank (as on the simulator); the holder's side of a
// one-sided get is counted nowhere.
//
// Caveat: passive-target progress depends on the osc component. Runtime excludes osc/rdma
// (see runtime.cpp: Open MPI 4.1.4 bug with windows on split groups), so on one node Open MPI
// picks osc/sm (the window is shared memory, locks are atomics): merges never wait for rank 0 to
// enter MPI. Across nodes, osc/ucx (InfiniBand) is also truly passive. Over plain
// TCP only osc/pt2pt is left, which (a) serves lock requests only while the target is inside
// MPI, so merges stall while rank 0 (kMigrating: the holder) computes: mitigate with
// MpiExecutor::set_progress_comm, which pokes progress after every compute() call; and (b)
// refuses MPI_THREAD_MULTIPLE: run with SYNCOPATE_MPI_THREADS=funneled there.
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
#include "backends/mpi/window.hpp"

namespace syncopate::mpi {

namespace {

// Every rank must pass the same size: checked before any window exists, on every rank alike
// (MPI's own allreduce: a census, not counted as the model's traffic).
void check_same_size(MpiCommunicator& comm, size_t size) {
  long long sizes[2] = {static_cast<long long>(size), -static_cast<long long>(size)};
  SYNC_MPI(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_LONG_LONG, MPI_MAX, comm.handle()));
  if (sizes[0] != -sizes[1])
    throw UserError("mpi: create_shared_model: rank " + std::to_string(comm.rank()) + " passed " +
                    std::to_string(size) + " floats, some rank " + std::to_string(sizes[0]) +
                    "; allowed: the same model size on every rank");
}

void put_own(std::span<const float> data, int rank, MPI_Win window) {
  const int count = detail::to_count(data.size());
  SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, window));
  SYNC_MPI(MPI_Put(data.data(), count, MPI_FLOAT, rank, 0, count, MPI_FLOAT, window));
  SYNC_MPI(MPI_Win_unlock(rank, window));
}

}  // namespace

class MpiMasterModel final : public SharedModel {
 public:
  MpiMasterModel(MpiCommunicator& comm, std::span<const float> initial);
  ~MpiMasterModel() override;
  MpiMasterModel(const MpiMasterModel&) = delete;
  MpiMasterModel& operator=(const MpiMasterModel&) = delete;

  size_t size() const override { return scratch_.size(); }
  void merge(std::span<float> local, const MergeRule& rule) override;

 private:
  MpiCommunicator& comm_;
  MPI_Win window_ = MPI_WIN_NULL;
  std::vector<float> scratch_;
};

MpiMasterModel::MpiMasterModel(MpiCommunicator& comm, std::span<const float> initial)
    : comm_(comm), scratch_(initial.size()) {
  const Deadline deadline("create_shared_model (MPI_Win_allocate)", comm_.default_timeout());
  check_same_size(comm_, initial.size());
  const int rank = comm_.rank();
  window_ = allocate_window(comm_, rank == 0 ? static_cast<MPI_Aint>(initial.size_bytes()) : 0,
                            sizeof(float));
  if (rank == 0) put_own(initial, 0, window_);
  comm_.barrier();  // nobody merges before the initial model is in place
}

void MpiMasterModel::merge(std::span<float> local, const MergeRule& rule) {
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
  comm_.add_bytes(local.size_bytes(), local.size_bytes());  // to the master and back
}

MpiMasterModel::~MpiMasterModel() {
  const Deadline deadline("MPI_Win_free", comm_.default_timeout());
  free_window(window_, comm_.rank());
}

class MpiMigratingModel final : public SharedModel {
 public:
  MpiMigratingModel(MpiCommunicator& comm, std::span<const float> initial);
  ~MpiMigratingModel() override;
  MpiMigratingModel(const MpiMigratingModel&) = delete;
  MpiMigratingModel& operator=(const MpiMigratingModel&) = delete;

  size_t size() const override { return global_.size(); }
  void merge(std::span<float> local, const MergeRule& rule) override;

 private:
  MpiCommunicator& comm_;
  MPI_Win holder_ = MPI_WIN_NULL;  // one int on rank 0: the rank holding the global model
  MPI_Win model_ = MPI_WIN_NULL;   // every rank: the global model while it holds it
  std::vector<float> global_;      // the global model as this rank last saw it
};

MpiMigratingModel::MpiMigratingModel(MpiCommunicator& comm, std::span<const float> initial)
    : comm_(comm), global_(initial.begin(), initial.end()) {
  const Deadline deadline("create_shared_model (MPI_Win_allocate)", comm_.default_timeout());
  check_same_size(comm_, initial.size());
  const int rank = comm_.rank();
  holder_ = allocate_window(comm_, rank == 0 ? sizeof(int) : 0, sizeof(int));
  model_ = allocate_window(comm_, static_cast<MPI_Aint>(initial.size_bytes()), sizeof(float));
  if (rank == 0) {
    const int first = 0;  // rank 0 holds the initial model
    SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, holder_));
    SYNC_MPI(MPI_Put(&first, 1, MPI_INT, 0, 0, 1, MPI_INT, holder_));
    SYNC_MPI(MPI_Win_unlock(0, holder_));
    put_own(initial, 0, model_);
  }
  comm_.barrier();  // nobody merges before the initial model is in place
}

void MpiMigratingModel::merge(std::span<float> local, const MergeRule& rule) {
  check_merge_size(local.size(), global_.size(), "mpi", comm_.rank());
  const int count = detail::to_count(global_.size());
  const int me = comm_.rank();
  const Deadline deadline("shared model merge (MPI_Win_lock on rank 0's holder window)",
                          comm_.default_timeout());
  SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, holder_));
  int holder = -1;
  SYNC_MPI(MPI_Get(&holder, 1, MPI_INT, 0, 0, 1, MPI_INT, holder_));
  SYNC_MPI(MPI_Win_flush(0, holder_));
  SYNC_CHECK(holder >= 0 && holder < comm_.size(), "holder " << holder);
  if (holder != me) {  // else global_ is the model this rank made last
    SYNC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, holder, 0, model_));
    SYNC_MPI(MPI_Get(global_.data(), count, MPI_FLOAT, holder, 0, count, MPI_FLOAT, model_));
    SYNC_MPI(MPI_Win_unlock(holder, model_));
    comm_.add_bytes(0, local.size_bytes());
  }
  apply_merge_rule(rule, global_, local);
  put_own(global_, me, model_);
  SYNC_MPI(MPI_Put(&me, 1, MPI_INT, 0, 0, 1, MPI_INT, holder_));
  SYNC_MPI(MPI_Win_unlock(0, holder_));
  std::copy(global_.begin(), global_.end(), local.begin());
}

MpiMigratingModel::~MpiMigratingModel() {
  const Deadline deadline("MPI_Win_free", comm_.default_timeout());
  free_window(model_, comm_.rank());
  free_window(holder_, comm_.rank());
}

std::unique_ptr<SharedModel> MpiCommunicator::create_shared_model(std::span<const float> initial,
                                                                  GlobalModelPlacement placement) {
  if (placement == GlobalModelPlacement::kMigrating)
    return std::make_unique<MpiMigratingModel>(*this, initial);
  return std::make_unique<MpiMasterModel>(*this, initial);
}

}  // namespace syncopate::mpi
