#pragma once
// Runs asynchronous collectives (allreduce, allgather, reduce-scatter) in submission order, on a
// helper thread when MPI allows it (MPI_THREAD_MULTIPLE), else inside Work::wait(). See
// MpiCommunicator for why.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_detail.hpp"
#include "core/comm/comm.hpp"

namespace syncopate::mpi {

class AsyncEngine {
 public:
  // A task performs one collective, polling as `poll` says: gently on the helper thread while
  // nobody waits for a result, spinning on a waiting thread. It returns the algorithm it ran.
  using Task = std::function<Algorithm(const PollPolicy& poll)>;
  explicit AsyncEngine(bool use_thread);
  // Runs the jobs still queued, then joins the helper.
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // The task runs after every task submitted before it.
  WorkPtr submit(Task task);
  // submit(task) waited for at once, without the hand-off to the helper thread when no job is
  // queued or running: the task then runs here, now. Returns the algorithm it ran.
  Algorithm run_now(const Task& task);
  // The task run here, now, when no job is queued or running (returns the algorithm it ran);
  // else nothing runs (nullopt).
  std::optional<Algorithm> run_if_idle(const Task& task);
  // Makes running and queued jobs fail fast instead of waiting for peers (error unwinding).
  void cancel() { cancel_.store(true); }

 private:
  enum class State { kQueued, kRunning, kDone };
  struct Job {
    Task task;
    State state = State::kQueued;
    std::exception_ptr error;
    double submitted = 0, completed = 0;  // MPI_Wtime
    Algorithm algorithm = Algorithm::kAuto;
  };
  class JobWork;

  void wait(Job& job);
  void run(Job& job, bool background);  // called with mu_ unlocked; busy_ held by the caller
  void helper_main();

  std::atomic<bool> cancel_{false};
  Doorbell doorbell_;  // threads blocked in wait() on a job the helper runs
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool busy_ = false;  // a job is running (on the helper or on a waiting thread)
  bool stop_ = false;
  std::thread helper_;
};

}  // namespace syncopate::mpi
