#pragma once
// ScheduleChannel: one MPI communicator on which one thread runs the core's collective schedules.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "backends/mpi/comm_handle.hpp"
#include "backends/mpi/mpi_detail.hpp"
#include "core/comm/collective_schedule.hpp"

namespace syncopate::mpi {

// A communicator plus what one thread needs to run schedules on it: cached schedules (this
// rank's steps only), scratch and requests (no allocation per call in steady state). A step's
// large segments travel in 256 KiB chunks, each applied as soon as it arrived (see run()).
// Used by one thread at a time.
class ScheduleChannel {
 public:
  ScheduleChannel(CommHandle comm, std::vector<int> node_of_rank, std::atomic<uint64_t>* bytes_sent,
                  std::atomic<uint64_t>* bytes_recv);

  MPI_Comm comm() const { return comm_.get(); }
  // This rank's steps of a schedule, built on first use and cached.
  const std::vector<Step>& steps(CollectiveKind kind, Algorithm algorithm, size_t count, int root);
  // Runs `steps` on data (no finish()).
  void run(const std::vector<Step>& steps, std::span<float> data, ReduceOp op,
           const PollPolicy& poll = {});

 private:
  CommHandle comm_;
  int rank_, size_;
  std::vector<int> node_of_rank_;
  std::map<std::tuple<CollectiveKind, Algorithm, size_t, int>, std::vector<Step>> cache_;
  std::vector<float> scratch_;
  std::vector<MPI_Request> requests_;
  std::atomic<uint64_t>* bytes_sent_;
  std::atomic<uint64_t>* bytes_recv_;
};

}  // namespace syncopate::mpi
