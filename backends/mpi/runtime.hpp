#pragma once
// The MPI process runtime: MPI_Init_thread / MPI_Finalize, the fault policy and its error types.
//
// Fault policy (Open MPI 4.1.4, verified on this machine with a rank that exits 0 or 1 without
// MPI_Finalize, aborts, or is killed by SIGKILL: in every case mpirun killed the other ranks and
// ended the job within about 2 s, with a message naming the rank). What remains is a rank that
// hangs without dying; for that every blocking wait of this backend polls with a watchdog
// and throws PeerTimeout naming the operation and the peers. Its limit: the call's
// CollectiveOptions::timeout_s, else the communicator's set_default_timeout, else the process
// default (600 s, SYNCOPATE_MPI_WATCHDOG_S, read here once, or Runtime::set_watchdog_seconds;
// 0 = off). MPI errors are returned (MPI_ERRORS_RETURN),
// never fatal inside MPI, and thrown as MpiError. After any such error, or while an exception
// unwinds through it, ~Runtime calls MPI_Abort instead of MPI_Finalize (which would wait forever
// for ranks that are still in a collective), so the whole job ends with the message.
#include <mpi.h>

#include <optional>
#include <stdexcept>
#include <string_view>

#include "core/comm/comm.hpp"

namespace syncopate::mpi {

// An MPI call returned an error code (the contract's PeerFailure: the transport failed).
class MpiError : public PeerFailure {
 public:
  using PeerFailure::PeerFailure;
};

// A blocking wait exceeded its timeout: a peer died or hangs (the core's type).
using syncopate::PeerTimeout;

// RAII MPI_Init_thread / MPI_Finalize. One per process, constructed first, destroyed last.
//
// Settings (environment): SYNCOPATE_MPI_WATCHDOG_S (seconds, default 600, 0 = off),
// SYNCOPATE_MPI_THREADS (multiple | funneled), SYNCOPATE_MPI_HELPER_POLL_US (how long the
// allreduce helper thread sleeps between polls once a wait is not quick: whole microseconds up
// to 1,000,000; default 50, 0 = yield),
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
  // Whether Open MPI's shared-memory transport sends large messages by a single copy (CMA, XPMEM
  // or KNEM), as it was after MPI_Init; the schedules' mid-sized messages depend on it.
  static bool shared_memory_single_copy();
  // Whether a rank waiting for a message yields its core (Open MPI's mpi_yield_when_idle, as it
  // was after MPI_Init) or spins; nullopt where the library has no such setting. Where ranks
  // take turns on cores, a spinning waiter holds its core to the end of its time slice.
  static std::optional<bool> waiting_ranks_yield();

  // Seconds a blocking wait may last before it throws PeerTimeout; 0 disables the watchdog.
  static void set_watchdog_seconds(double seconds);
  static double watchdog_seconds();

  // Ends the whole job now with `message` on stderr (use after catching an error on one rank).
  [[noreturn]] static void abort(int code, std::string_view message);

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
};

}  // namespace syncopate::mpi
