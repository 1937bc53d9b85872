#pragma once
// ScheduleChannel: one MPI communicator on which one thread runs the core's collective schedules.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/mpi/comm_handle.hpp"
#include "backends/mpi/mpi_detail.hpp"
#include "core/comm/schedule_cache.hpp"

namespace syncopate::mpi {

// A communicator plus what one thread needs to run schedules on it: the core's schedule cache
// (this rank's steps only), scratch and requests (no allocation per call in steady state). A
// step's large segments travel in 256 KiB chunks, each applied as soon as it arrived, and, where
// Open MPI's shared memory sends large messages by single copy, its segments of 4,001 bytes to
// 32 KiB in messages of 4,000 bytes, sent eagerly (see the .cpp).
// A received chunk whose size is not the schedule's (the members issued different collectives)
// is a UserError; the channel is unusable afterwards. Used by one thread at a time.
class ScheduleChannel {
 public:
  ScheduleChannel(CommHandle comm, std::vector<int> node_of_rank, std::atomic<uint64_t>* bytes_sent,
                  std::atomic<uint64_t>* bytes_recv);

  MPI_Comm comm() const { return comm_.get(); }
  // Runs this rank's steps of the schedule for (kind, algorithm, count, root) on data (no
  // prepare() or finish()), polling as `poll` says. Returns the algorithm the schedule runs.
  // A 16-bit wire format sends uint16 buffers (2 bytes per element) and reduces in it.
  Algorithm run(CollectiveKind kind, Algorithm algorithm, std::span<float> data, int root,
                ReduceOp op, const PollPolicy& poll, WireFormat wire = WireFormat::kFp32);

 private:
  void run_steps(const std::vector<Step>& steps, std::span<float> data, ReduceOp op,
                 const PollPolicy& poll, CollectiveKind kind);
  // The 16-bit wire formats: each step's segments encoded whole, then sent in messages cut as
  // fp32's are by their bytes (without applying a chunk before the whole segment arrived).
  void run_wire_steps(const std::vector<Step>& steps, std::span<float> data, ReduceOp op,
                      const PollPolicy& poll, CollectiveKind kind, WireFormat wire);

  CommHandle comm_;
  int rank_, size_;
  ScheduleCache cache_;
  std::vector<float> scratch_;
  std::vector<uint16_t> wire_out_, wire_in_;  // 16-bit wire formats: encoded send and receive
  std::vector<MPI_Status> statuses_;
  std::vector<MPI_Request> requests_;
  std::atomic<uint64_t>* bytes_sent_;
  std::atomic<uint64_t>* bytes_recv_;
  bool eager_;  // mid-sized segments in eager messages (detail::shared_memory_single_copy())
};

}  // namespace syncopate::mpi
