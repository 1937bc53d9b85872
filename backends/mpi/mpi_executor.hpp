#pragma once
// MpiExecutor: the real backend's Executor (wall clock, math runs as it is).
#include <mpi.h>

#include "core/comm/comm.hpp"

namespace syncopate::mpi {

// Wall clock since construction (MPI_Wtime); compute() runs the math and returns.
class MpiExecutor final : public Executor {
 public:
  MpiExecutor();
  double now() const override { return MPI_Wtime() - start_; }
  // The wall clock continues from the saved time.
  void restore_clock(std::span<const double> state) override {
    if (!state.empty()) start_ = MPI_Wtime() - state[0];
  }
  // Runs math. Then, if a progress communicator is set, pokes MPI progress once (MPI_Iprobe):
  // one-sided components that need the target to enter MPI (osc/pt2pt) then serve merges from
  // other ranks between two compute() calls of the rank that owns the global model.
  void compute(const Cost& cost, FunctionRef<void()> math) override;
  void set_progress_comm(MPI_Comm comm) { progress_comm_ = comm; }

 private:
  double start_;
  MPI_Comm progress_comm_ = MPI_COMM_NULL;
};

}  // namespace syncopate::mpi
