// MpiExecutor: wall-clock time, math run as it is, and a progress poke for one-sided merges.
#include "backends/mpi/mpi_executor.hpp"

#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {

MpiExecutor::MpiExecutor() : start_(MPI_Wtime()) {}

void MpiExecutor::compute(const Cost& /*cost*/, FunctionRef<void()> math) {
  math();
  if (progress_comm_ != MPI_COMM_NULL) {
    int flag = 0;
    SYNC_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, progress_comm_, &flag, MPI_STATUS_IGNORE));
  }
}

}  // namespace syncopate::mpi
