// CommHandle: frees its MPI_Comm unless the process is failing or MPI is gone.
#include "backends/mpi/comm_handle.hpp"

#include <exception>

#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {

CommHandle::~CommHandle() {
  // Freeing is skipped while the process fails: it is about to be aborted anyway.
  if (comm_ != MPI_COMM_NULL && detail::mpi_active() && !detail::failed() &&
      std::uncaught_exceptions() == 0)
    MPI_Comm_free(&comm_);
}

CommHandle& CommHandle::operator=(CommHandle&& other) noexcept {
  if (this != &other) {
    CommHandle old(release());
    comm_ = other.release();
  }
  return *this;
}

}  // namespace syncopate::mpi
