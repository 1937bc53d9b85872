#pragma once
// MpiCommunicator: the core's Communicator over MPI, and MPI's own allreduce for benchmarks.
//
// Every collective runs the core's schedules (core/comm/collective_schedule.hpp) with
// point-to-point messages, so an MPI run performs the same additions in the same order as the
// simulator and the two agree bit for bit. MPI's own allreduce is offered separately
// (native_allreduce) for benchmarks.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backends/mpi/comm_handle.hpp"
#include "backends/mpi/schedule_channel.hpp"
#include "core/comm/collective_schedule.hpp"
#include "core/comm/comm.hpp"

namespace syncopate::mpi {

class AsyncEngine;

// A Communicator over an MPI communicator.
//
// allreduce_async: Debian's Open MPI has no asynchronous progress ("OMPI progress: no" in
// ompi_info), so a nonblocking request only moves while some thread is inside MPI, and a
// multi-round schedule needs arithmetic between rounds. Progressing in Work::wait() would thus
// overlap nothing with backward. Instead the schedule runs on a helper thread, on a communicator
// of its own (a dup: MPI matching is per communicator, so it cannot mix with the caller's
// collectives); the helper polls MPI_Testall and sleeps between polls rather than spinning, so
// it leaves the core to the computing thread (it spins while a thread is blocked in wait()).
// Jobs run in submission order, which is the same on every rank. A wait() on a job nobody has
// started yet runs it on the waiting thread. Without MPI_THREAD_MULTIPLE there is no helper and
// jobs run in wait(). Measured with bench_allreduce_mpi (2 ranks, 16 MiB ring): 90-100% of the
// allreduce hides behind work that leaves the core idle (a GPU kernel), ~1% without the helper;
// behind CPU arithmetic nothing hides when ranks already fill the cores (2 ranks on 2 cores
// here). The hand-off costs ~10 us per call for small messages; a communicator of one rank,
// with no peer to overlap with, runs its asynchronous collectives at once on the calling thread
// (still after the jobs before them) and returns them complete, and so does any communicator for
// a collective of up to kRunAtOnceBytes when no job is queued or running (its ranks may differ in
// where it runs: the same schedule on the same channel, in the same order, matches either way).
// allreduce() (allreduce_waited) skips it: with no job queued or running it runs the schedule at
// once on the calling thread, on the same channel (so in the same order and with the same bits);
// allreduce_blocking runs it on the caller's own channel, independently of the jobs.
//
// allgather_async and reduce_scatter_async are jobs of the same engine, after the allreduces
// submitted before them. All other calls are blocking, on the calling thread. One thread calls this
// object. Misuse is a UserError raised before any message (the contract in core/comm/comm.hpp); so
// is a received message whose size is not the one expected (a recv of another size than its send,
// members that issued different collectives). Tags: collectives and point-to-point messages use
// different tags, so they never match each other. A Work must not outlive its communicator.
class MpiCommunicator final : public Communicator {
  struct Key {};

 public:
  // Up to this size an asynchronous collective with nothing before it runs at once on the
  // calling thread: here it takes 4-37 us (2 ranks, 4-64 KiB), no longer than the hand-off to
  // the helper thread and back that it saves (7-10 us when quiet, over 100 us in some runs of
  // 2 ranks on 2 cores), so there is no overlap worth it to lose.
  static constexpr size_t kRunAtOnceBytes = 64 * 1024;

  static std::unique_ptr<MpiCommunicator> world();  // dups MPI_COMM_WORLD
  MpiCommunicator(Key, CommHandle comm);            // adopts comm (use world() / split())
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node() const override { return node_of_rank_[static_cast<size_t>(rank_)]; }
  int num_nodes() const { return num_nodes_; }
  std::span<const int> node_of_rank() const { return node_of_rank_; }
  MPI_Comm handle() const { return main_->comm(); }

  WorkPtr allreduce_async(std::span<float> data, const CollectiveOptions& options) override;
  Algorithm allreduce_waited(std::span<float> data, const CollectiveOptions& options) override;
  // The same allreduce, run on the calling thread without the asynchronous machinery (no helper
  // hand-off): for callers that know they wait at once. Ordered like every blocking collective,
  // i.e. independently of allreduce_async jobs in flight (those use another communicator).
  void allreduce_blocking(std::span<float> data, const CollectiveOptions& options);
  void broadcast(std::span<float> data, int root) override;
  void reduce(std::span<float> data, int root, ReduceOp op) override;
  void allgather(std::span<const float> mine, std::span<float> all,
                 const GatherOptions& options) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                      const GatherOptions& options) override;
  // Jobs of the asynchronous engine, as allreduce_async (same channel, same order).
  WorkPtr allgather_async(std::span<const float> mine, std::span<float> all,
                          const GatherOptions& options) override;
  WorkPtr reduce_scatter_async(std::span<const float> in, std::span<float> out, ReduceOp op,
                               const GatherOptions& options) override;
  void barrier() override;
  void send(std::span<const float> data, int peer) override;
  void recv(std::span<float> data, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  // Typed split (same collective), for callers that want MPI-specific calls on the group.
  std::unique_ptr<MpiCommunicator> split_mpi(int color, int key);

  // A window on rank 0 under an exclusive lock (see global_model.cpp).
  std::unique_ptr<SharedModel> create_shared_model(std::span<const float> initial,
                                                   GlobalModelPlacement placement) override;

  CommCounters counters() const override;
  // Unset (kDefaultTimeout): the process default, Runtime::watchdog_seconds().
  void set_default_timeout(double seconds) override { timeout_s_ = seconds; }
  double default_timeout() const override;

 private:
  friend class MpiMasterModel;
  friend class MpiMigratingModel;
  // Returns the algorithm it ran.
  Algorithm run_allreduce(ScheduleChannel& channel, std::span<float> data,
                          const CollectiveOptions& options, PollPolicy poll);
  PollPolicy poll() const;  // the blocking calls': this communicator's default timeout
  // An asynchronous collective of `bytes` (its buffer): a job of the engine, or run at once
  // (returned complete) when this is one rank, or when it is small and no job is queued or
  // running.
  WorkPtr start(std::function<Algorithm(const PollPolicy& poll)> task, size_t bytes);
  // UserError unless 0 <= rank < size (and rank != this rank unless self_allowed).
  void check_rank(int rank, const char* operation, const char* what, bool self_allowed) const;
  // UserError unless got == block_of(n, size, rank).count.
  void check_block(size_t got, size_t n, const char* operation, const char* what) const;
  void add_bytes(uint64_t sent, uint64_t received);
  // allgather: this rank's block into its place in `all` in `layout` (nothing when it is there
  // already), rounded to the wire format as the other blocks will arrive.
  void place_contribution(std::span<const float> mine, std::span<float> all,
                          const GatherLayout& layout, WireFormat wire) const;
  // reduce_scatter: this rank's reduced block of `work` (in `layout`), finished (kAvg), into
  // `out`.
  void finish_block(std::span<float> work, const GatherLayout& layout, std::span<float> out,
                    ReduceOp op, WireFormat wire) const;

  int rank_ = 0, size_ = 1, num_nodes_ = 1;
  std::vector<int> node_of_rank_;
  GatherLayout layout_;  // of reduce_scatter and allgather with kAuto (GatherLayout::for_algorithm)
  std::atomic<uint64_t> bytes_sent_{0}, bytes_recv_{0};
  std::unique_ptr<ScheduleChannel> main_;   // calling thread
  std::unique_ptr<ScheduleChannel> async_;  // allreduce_async (helper thread or wait())
  std::unique_ptr<AsyncEngine> engine_;
  std::vector<float> work_;      // reduce_scatter's in-place copy
  std::vector<float> gathered_;  // allgather's, when the layout is not in place
  double timeout_s_ = kDefaultTimeout;
};

// MPI's own allreduce (MPI_Allreduce; kAvg = sum then divide by size) on the communicator.
void native_allreduce(MpiCommunicator& comm, std::span<float> data, ReduceOp op);

}  // namespace syncopate::mpi
