#pragma once
// One-sided windows of the MPI backend (the shared model of epoch_async, the stop latch).
#include <mpi.h>

namespace syncopate::mpi {

class MpiCommunicator;

// A window of `bytes` on this rank (element size `unit`), collective over `comm`; MPI errors on
// it are returned rather than fatal.
MPI_Win allocate_window(MpiCommunicator& comm, MPI_Aint bytes, int unit);

// MPI_Win_free synchronises all ranks: skipped while failing (the job is being aborted). Called
// from destructors, which cannot throw: a failure is reported and the process marked failing,
// so that ~Runtime aborts the job.
void free_window(MPI_Win& window, int rank);

}  // namespace syncopate::mpi
