#pragma once
// CommHandle: RAII ownership of an MPI_Comm.
#include <mpi.h>

#include <utility>

namespace syncopate::mpi {

// Owns an MPI_Comm (freed on destruction unless MPI is finalized or the process is failing).
class CommHandle {
 public:
  explicit CommHandle(MPI_Comm comm = MPI_COMM_NULL) : comm_(comm) {}
  ~CommHandle();
  CommHandle(CommHandle&& other) noexcept : comm_(other.release()) {}
  CommHandle& operator=(CommHandle&& other) noexcept;
  MPI_Comm get() const { return comm_; }
  MPI_Comm release() { return std::exchange(comm_, MPI_COMM_NULL); }

 private:
  MPI_Comm comm_;
};

}  // namespace syncopate::mpi
