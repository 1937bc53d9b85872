// Deadline and the one watcher thread that serves every armed deadline.
#include "backends/mpi/deadline.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "backends/mpi/mpi_detail.hpp"
#include "backends/mpi/runtime.hpp"

namespace syncopate::mpi {
namespace {

// The thread behind Deadline: sleeps until the earliest armed deadline, and if that one is still
// armed then, reports it and runs the expiry action (default: end the process).
class DeadlineWatcher {
 public:
  static DeadlineWatcher& instance() {
    static DeadlineWatcher watcher;
    return watcher;
  }
  ~DeadlineWatcher() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  uint64_t arm(const char* operation, double seconds) {
    const auto due = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(seconds));
    const std::lock_guard lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    const uint64_t id = ++next_id_;
    armed_.emplace(id, Entry{due, operation, seconds});
    // Only a deadline earlier than the watcher's wake-up wakes it: deadlines armed one after the
    // other (the stop latch, every step) then cost no futex wake and no contended mutex.
    if (due < wakes_at_) wake_.notify_all();
    return id;
  }
  void disarm(uint64_t id) {
    const std::lock_guard lock(mutex_);
    armed_.erase(id);
  }
  void set_action(Deadline::Action action) {
    const std::lock_guard lock(mutex_);
    action_ = action;
  }

 private:
  struct Entry {
    std::chrono::steady_clock::time_point due;
    const char* operation;
    double seconds;
  };

  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (armed_.empty()) {
        wakes_at_ = std::chrono::steady_clock::time_point::max();
        wake_.wait(lock);
        continue;
      }
      auto earliest = armed_.begin();
      for (auto it = armed_.begin(); it != armed_.end(); ++it)
        if (it->second.due < earliest->second.due) earliest = it;
      if (const auto due = earliest->second.due; std::chrono::steady_clock::now() < due) {
        wakes_at_ = due;
        wake_.wait_until(lock, due);  // a copy: the entry may be erased while this thread waits
        continue;
      }
      std::ostringstream message;
      message << "syncopate mpi: rank " << detail::world_rank() << " spent more than "
              << earliest->second.seconds << " s in " << earliest->second.operation
              << ": a peer died or hangs (timeout; default: watchdog SYNCOPATE_MPI_WATCHDOG_S); "
                 "ending the job";
      armed_.erase(earliest);
      const Deadline::Action action = action_;
      lock.unlock();
      if (action != nullptr) {
        action(message.str());
      } else {
        std::fprintf(stderr, "%s\n", message.str().c_str());
        std::fflush(stderr);
        // Not MPI_Abort: this thread may not call MPI (MPI_THREAD_FUNNELED). mpirun ends the
        // whole job when a rank exits without MPI_Finalize.
        std::_Exit(1);
      }
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<uint64_t, Entry> armed_;
  // When the watcher wakes next (max: only when notified). Deadlines disarmed before it do not
  // move it: the watcher then wakes early, finds them gone and sleeps until the earliest left.
  std::chrono::steady_clock::time_point wakes_at_ = std::chrono::steady_clock::time_point::max();
  uint64_t next_id_ = 0;
  Deadline::Action action_ = nullptr;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Deadline::Deadline(const char* operation) : Deadline(operation, kDefaultTimeout) {}

Deadline::Deadline(const char* operation, double seconds) {
  if (seconds == kDefaultTimeout) seconds = Runtime::watchdog_seconds();
  if (seconds > 0) id_ = DeadlineWatcher::instance().arm(operation, seconds);
}

Deadline::~Deadline() {
  if (id_ != 0) DeadlineWatcher::instance().disarm(id_);
}

void Deadline::set_action_for_tests(Action action) {
  DeadlineWatcher::instance().set_action(action);
}

}  // namespace syncopate::mpi
