#pragma once
// Internals of the MPI backend shared by its .cpp files: error checking, the process-wide fault
// state, the world rank for messages, and the watchdog wait.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <span>

#include "backends/mpi/runtime.hpp"
#include "core/base/check.hpp"
#include "core/comm/comm.hpp"

namespace syncopate::mpi {

// The count of threads blocked on the helper thread's result, and where the helper naps between
// polls: a thread that starts waiting rings it, so the helper stops napping at once and spins
// (a nap is 50 us or more, the whole cost of a 1 MiB allreduce's tail).
class Doorbell {
 public:
  bool waited_for() const { return waiters_.load() > 0; }
  // Sleeps for `duration`, or until some thread waits.
  void nap(std::chrono::microseconds duration) {
    std::unique_lock lock(mu_);
    rung_.wait_for(lock, duration, [this] { return waited_for(); });
  }
  void start_waiting() {
    ++waiters_;
    { std::lock_guard lock(mu_); }  // a nap between its check and its sleep sees the count
    rung_.notify_all();
  }
  void stop_waiting() { --waiters_; }

 private:
  std::atomic<int> waiters_{0};
  std::mutex mu_;
  std::condition_variable rung_;
};

// How a thread waits for its messages: spinning (a caller with nothing else to do), or on the
// helper thread gently, napping between polls, unless some thread is blocked on the result.
struct PollPolicy {
  double timeout_s = kDefaultTimeout;  // kDefaultTimeout: Runtime::watchdog_seconds()
  bool background = false;
  const std::atomic<bool>* cancel = nullptr;  // abandon the wait (error unwinding) when true
  Doorbell* doorbell = nullptr;               // threads blocked on the result: spin while any
};

}  // namespace syncopate::mpi

namespace syncopate::mpi::detail {

// Message tags. Collectives (schedules) and point-to-point calls never share a tag.
inline constexpr int kCollectiveTag = 7001;
inline constexpr int kPointToPointTag = 7002;

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

// Marks the process as failing: ~Runtime will then MPI_Abort instead of MPI_Finalize.
void mark_failed();
bool failed();
// Tests only: forget a failure that a test provoked on purpose (e.g. a watchdog timeout).
void reset_failed_for_tests();
// True when MPI is initialised and not finalised (handles may be freed).
bool mpi_active();
bool thread_multiple();
// Whether Open MPI's shared-memory transport sends large messages by a single copy (read once
// after MPI_Init; see runtime.cpp).
bool shared_memory_single_copy();
// This process's rank in MPI_COMM_WORLD, readable from any thread (-1 before MPI_Init).
int world_rank();

// What a wait is for, for the watchdog's message.
struct WaitContext {
  const char* operation;
  int round = -1;
  int peer_a = -1;
  int peer_b = -1;
};

// Completes every request, polling MPI_Testall as `poll` says (a helper thread must not steal
// the core from compute). Throws PeerTimeout, after withdrawing the requests, once poll's
// timeout (or the watchdog) expires or *poll.cancel becomes true; UserError, after withdrawing
// the others, when a receive was truncated (the message is longer than the buffer: sizes of a
// send and its recv differ). `statuses`: MPI_STATUSES_IGNORE or one per request.
void wait_all(MPI_Comm comm, std::span<MPI_Request> requests, const WaitContext& context,
              const PollPolicy& poll = {}, MPI_Status* statuses = MPI_STATUSES_IGNORE);

// Cancels and frees every request still active (a late message cannot land in a buffer given
// up on). Never throws.
void withdraw(std::span<MPI_Request> requests) noexcept;

inline int to_count(size_t n) {
  SYNC_CHECK(n <= static_cast<size_t>(INT_MAX),
             "message of " << n << " floats exceeds MPI's int count");
  return static_cast<int>(n);
}

}  // namespace syncopate::mpi::detail

#define SYNC_MPI(call)                                                                    \
  do {                                                                                    \
    const int sync_mpi_rc_ = (call);                                                      \
    if (sync_mpi_rc_ != MPI_SUCCESS) [[unlikely]]                                         \
      ::syncopate::mpi::detail::throw_mpi_error(sync_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (false)
