// One-sided windows of the MPI backend: allocation and release.
#include "backends/mpi/window.hpp"

#include <cstdio>
#include <exception>

#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {

MPI_Win allocate_window(MpiCommunicator& comm, MPI_Aint bytes, int unit) {
  void* base = nullptr;
  MPI_Win window = MPI_WIN_NULL;
  SYNC_MPI(MPI_Win_allocate(bytes, unit, MPI_INFO_NULL, comm.handle(), &base, &window));
  SYNC_MPI(MPI_Win_set_errhandler(window, MPI_ERRORS_RETURN));
  return window;
}

void free_window(MPI_Win& window, int rank) {
  if (window == MPI_WIN_NULL) return;
  if (!detail::mpi_active() || detail::failed() || std::uncaught_exceptions() > 0) return;
  if (MPI_Win_free(&window) != MPI_SUCCESS) {
    detail::mark_failed();
    std::fprintf(stderr, "syncopate mpi: MPI_Win_free failed on rank %d\n", rank);
  }
}

}  // namespace syncopate::mpi
