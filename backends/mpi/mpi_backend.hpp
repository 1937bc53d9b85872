#pragma once
// The real backend: one MPI process per worker.
//
// Every collective runs the core's schedules (core/collective_schedule.hpp) with point-to-point
// messages, so an MPI run performs the same additions in the same order as the simulator and
// the two agree bit for bit. MPI's own allreduce is offered separately (native_allreduce) for
// benchmarks.
//
// Fault policy (Open MPI 4.1.4, verified on this machine with a rank that exits 0 or 1 without
// MPI_Finalize, aborts, or is killed by SIGKILL: in every case mpirun killed the other ranks and
// ended the job within about 2 s, with a message naming the rank). What remains is a rank that
// hangs without dying; for that every blocking wait of this backend polls with a watchdog
// (default 600 s, SYNCOPATE_MPI_WATCHDOG_S or Runtime::set_watchdog_seconds, 0 = off) and throws
// PeerTimeout naming the operation and the peers. MPI errors are returned (MPI_ERRORS_RETURN),
// never fatal inside MPI, and thrown as MpiError. After any such error, or while an exception
// unwinds through it, ~Runtime calls MPI_Abort instead of MPI_Finalize (which would wait forever
// for ranks that are still in a collective), so the whole job ends with the message.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/check.hpp"
#include "core/collective_schedule.hpp"
#include "core/comm.hpp"

namespace syncopate::mpi {

// An MPI call returned an error code.
class MpiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A blocking wait exceeded the watchdog: a peer died or hangs.
class PeerTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// RAII MPI_Init_thread / MPI_Finalize. One per process, constructed first, destroyed last.
//
// Settings (environment): SYNCOPATE_MPI_WATCHDOG_S (seconds, default 600, 0 = off),
// SYNCOPATE_MPI_THREADS (multiple | funneled), SYNCOPATE_MPI_HELPER_POLL_US (how long the
// allreduce helper thread sleeps between polls once a wait is not quick; default 50, 0 = yield),
// SYNCOPATE_MPI_RANKS_PER_NODE (k > 0: pretend world ranks [0,k) are node 0, [k,2k) node 1, ...,
// to exercise hierarchical algorithms on one machine; read when a communicator is created).
// Runtime also defaults OMPI_MCA_osc to ^rdma (kept if already set): Open MPI 4.1.4's osc/rdma
// breaks windows created on disjoint split groups at the same time (open-mpi/ompi#9492).
//
// Threads: MPI_THREAD_MULTIPLE is requested so that allreduce_async can progress on a helper
// thread (see MpiCommunicator). SYNCOPATE_MPI_THREADS=funneled requests MPI_THREAD_FUNNELED
// instead; asynchronous allreduces then run inside Work::wait(), without overlap. Use it where a
// component refuses THREAD_MULTIPLE (Open MPI 4.1's osc/pt2pt, chosen for windows on networks
// without RDMA, does).
class Runtime {
 public:
  Runtime(int* argc, char*** argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  bool thread_multiple() const;

  // Seconds a blocking wait may last before it throws PeerTimeout; 0 disables the watchdog.
  static void set_watchdog_seconds(double seconds);
  static double watchdog_seconds();

  // Ends the whole job now with `message` on stderr (use after catching an error on one rank).
  [[noreturn]] static void abort(int code, std::string_view message);

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
};

// Bounds a blocking MPI call that cannot be polled (window creation and locks, communicator
// creation, gathers): if the scope lasts longer than the watchdog, a background thread prints
// what this rank was waiting for and ends the process; mpirun then ends the job. One thread
// serves every deadline; arming one costs a mutex and a map insertion, fine for per-epoch calls
// (per-message waits poll instead: see wait_all). No deadline when the watchdog is off.
class Deadline {
 public:
  explicit Deadline(const char* operation);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // Tests: what an expired deadline does with its message instead of ending the process
  // (nullptr restores the default).
  using Action = void (*)(const std::string& message);
  static void set_action_for_tests(Action action);

 private:
  uint64_t id_ = 0;  // 0: not armed
};

// Wall clock since construction (MPI_Wtime); compute() runs the math and returns.
class MpiExecutor final : public Executor {
 public:
  MpiExecutor();
  double now() const override { return MPI_Wtime() - start_; }
  // Runs math. Then, if a progress communicator is set, pokes MPI progress once (MPI_Iprobe):
  // one-sided components that need the target to enter MPI (osc/pt2pt) then serve merges from
  // other ranks between two compute() calls of the rank that owns the global model.
  void compute(const Cost& cost, FunctionRef<void()> math) override;
  void set_progress_comm(MPI_Comm comm) { progress_comm_ = comm; }

 private:
  double start_;
  MPI_Comm progress_comm_ = MPI_COMM_NULL;
};

// How a thread waits for its messages: spinning (a caller with nothing else to do), or on the
// helper thread gently, sleeping between polls, unless some thread is blocked on the result.
struct PollPolicy {
  bool background = false;
  const std::atomic<bool>* cancel = nullptr;  // abandon the wait (error unwinding) when true
  const std::atomic<int>* waiters = nullptr;  // threads blocked on the result: spin while > 0
};

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
// here). The hand-off costs ~10 us per call for small messages; allreduce_blocking avoids it.
//
// All other calls are blocking, on the calling thread. One thread calls this object.
// Tags: collectives and point-to-point messages use different tags, so they never match each
// other. A Work must not outlive its communicator.
class MpiCommunicator final : public Communicator {
  struct Key {};

 public:
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
  // The same allreduce, run on the calling thread without the asynchronous machinery (no helper
  // hand-off): for callers that know they wait at once. Ordered like every blocking collective,
  // i.e. independently of allreduce_async jobs in flight (those use another communicator).
  void allreduce_blocking(std::span<float> data, const CollectiveOptions& options);
  void broadcast(std::span<float> data, int root) override;
  void reduce(std::span<float> data, int root, ReduceOp op) override;
  void allgather(std::span<const float> mine, std::span<float> all) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op) override;
  void barrier() override;
  void send(std::span<const float> data, int peer) override;
  void recv(std::span<float> data, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  // Typed split (same collective), for callers that want MPI-specific calls on the group.
  std::unique_ptr<MpiCommunicator> split_mpi(int color, int key);

  void create_global(std::span<const float> initial) override;
  void merge_into_global(std::span<float> local, const MergeRule& rule) override;

  CommCounters counters() const override;

 private:
  void run_allreduce(ScheduleChannel& channel, std::span<float> data,
                     const CollectiveOptions& options, const PollPolicy& poll);
  void add_bytes(uint64_t sent, uint64_t received);
  void free_window();

  int rank_ = 0, size_ = 1, num_nodes_ = 1;
  std::vector<int> node_of_rank_;
  std::atomic<uint64_t> bytes_sent_{0}, bytes_recv_{0};
  std::unique_ptr<ScheduleChannel> main_;   // calling thread
  std::unique_ptr<ScheduleChannel> async_;  // allreduce_async (helper thread or wait())
  std::unique_ptr<AsyncEngine> engine_;
  std::vector<float> work_;  // reduce_scatter's in-place copy

  // The global model of epoch_async (see global_model.cpp).
  MPI_Win window_ = MPI_WIN_NULL;
  size_t global_count_ = 0;
  std::vector<float> merge_scratch_;
};

// MPI's own allreduce (MPI_Allreduce; kAvg = sum then divide by size) on the communicator.
void native_allreduce(MpiCommunicator& comm, std::span<float> data, ReduceOp op);

// 64-bit FNV-1a.
uint64_t fnv1a64(std::string_view text);

// Collective. Throws UserError on every rank if the ranks were given different scenario texts,
// or if the communicator's size differs from expected_workers.
void check_same_everywhere(MpiCommunicator& comm, const std::string& scenario_text,
                           int expected_workers);

}  // namespace syncopate::mpi
