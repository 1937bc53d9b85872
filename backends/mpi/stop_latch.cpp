// MpiStopLatch: the stop latch's records in a window on rank 0, under its exclusive lock.
#include "backends/mpi/stop_latch.hpp"

#include <array>
#include <type_traits>

#include "backends/mpi/deadline.hpp"
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_detail.hpp"
#include "backends/mpi/window.hpp"

namespace syncopate::mpi {

namespace {
// A StopRecord goes through the window as two int64 (MPI_INT64_T), one record per StopUnit.
static_assert(std::is_standard_layout_v<StopRecord> && sizeof(StopRecord) == 2 * sizeof(int64_t));
constexpr int kRecordWords = 2, kUnits = 2;
}  // namespace

MpiStopLatch::MpiStopLatch(MpiCommunicator& comm) : comm_(comm) {
  const Deadline deadline("the stop latch (MPI_Win_allocate)", comm_.default_timeout());
  const int rank = comm_.rank();
  window_ = allocate_window(comm_, rank == 0 ? kUnits * sizeof(StopRecord) : 0, sizeof(int64_t));
  if (rank == 0) {
    const std::array<StopRecord, kUnits> initial{};
    SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, window_));
    SYNC_MPI(MPI_Put(initial.data(), kUnits * kRecordWords, MPI_INT64_T, 0, 0,
                     kUnits * kRecordWords, MPI_INT64_T, window_));
    SYNC_MPI(MPI_Win_unlock(0, window_));
  }
  comm_.barrier();  // nobody reads the records before they are in place
}

MpiStopLatch::~MpiStopLatch() {
  const Deadline deadline("MPI_Win_free (the stop latch)", comm_.default_timeout());
  free_window(window_, comm_.rank());
}

int64_t MpiStopLatch::latch(StopUnit unit, int64_t done, int workers, bool signalled) {
  const MPI_Aint at = static_cast<MPI_Aint>(unit) * kRecordWords;
  const Deadline deadline("the stop latch (MPI_Win_lock on rank 0's window)",
                          comm_.default_timeout());
  StopRecord r;
  SYNC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, window_));
  SYNC_MPI(MPI_Get(&r, kRecordWords, MPI_INT64_T, 0, at, kRecordWords, MPI_INT64_T, window_));
  SYNC_MPI(MPI_Win_flush(0, window_));
  const StopRecord before = r;
  r.record(done, workers, signalled);
  if (r != before)
    SYNC_MPI(MPI_Put(&r, kRecordWords, MPI_INT64_T, 0, at, kRecordWords, MPI_INT64_T, window_));
  SYNC_MPI(MPI_Win_unlock(0, window_));
  return r.latched;
}

}  // namespace syncopate::mpi
