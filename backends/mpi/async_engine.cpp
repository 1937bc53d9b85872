// AsyncEngine: asynchronous collectives in submission order, on a helper thread or in wait().
#include "backends/mpi/async_engine.hpp"

#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {

namespace {
constexpr std::chrono::microseconds kSpinBeforeSleep{200};
}  // namespace

class AsyncEngine::JobWork final : public Work {
 public:
  JobWork(AsyncEngine* engine, std::shared_ptr<Job> job) : engine_(engine), job_(std::move(job)) {}
  ~JobWork() override {
    if (waited_) return;
    // Destroying an unwaited Work waits for it. A destructor cannot throw: report the error
    // and mark the process failing, so ~Runtime aborts the job instead of finalizing.
    try {
      engine_->wait(*job_);
    } catch (const std::exception& e) {
      detail::mark_failed();
      std::fprintf(stderr, "syncopate mpi: error in a collective whose Work was never waited: %s\n",
                   e.what());
    }
  }
  void wait() override {
    waited_ = true;
    engine_->wait(*job_);
  }
  Completion completion() const override {
    return {.elapsed_s = job_->completed - job_->submitted, .algorithm = job_->algorithm};
  }

 private:
  AsyncEngine* engine_;
  std::shared_ptr<Job> job_;
  bool waited_ = false;
};

AsyncEngine::AsyncEngine(bool use_thread) {
  if (use_thread) helper_ = std::thread([this] { helper_main(); });
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  if (helper_.joinable()) helper_.join();
  // Without a helper, jobs never waited for are still owed to the peers: run them here.
  std::unique_lock lock(mu_);
  while (!queue_.empty()) {
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    run(*job, false);
    lock.lock();
  }
}

WorkPtr AsyncEngine::submit(Task task) {
  auto job = std::make_shared<Job>();
  job->submitted = MPI_Wtime();
  job->task = std::move(task);
  {
    std::lock_guard lock(mu_);
    queue_.push_back(job);
  }
  changed_.notify_all();
  return std::make_unique<JobWork>(this, std::move(job));
}

Algorithm AsyncEngine::run_now(const Task& task) {
  if (std::optional<Algorithm> ran = run_if_idle(task)) return *ran;
  WorkPtr work = submit(task);
  work->wait();
  return work->completion().algorithm;
}

std::optional<Algorithm> AsyncEngine::run_if_idle(const Task& task) {
  {
    std::lock_guard lock(mu_);
    if (busy_ || !queue_.empty()) return std::nullopt;
    busy_ = true;  // keeps the helper off the channel while the task runs here
  }
  struct Release {
    AsyncEngine& engine;
    ~Release() {
      std::lock_guard lock(engine.mu_);
      engine.busy_ = false;
      if (!engine.queue_.empty()) engine.changed_.notify_all();
    }
  } release{*this};
  return task(PollPolicy{.background = false, .cancel = &cancel_, .doorbell = &doorbell_});
}

void AsyncEngine::run(Job& job, bool background) {
  try {
    job.algorithm =
        job.task(PollPolicy{.background = background, .cancel = &cancel_, .doorbell = &doorbell_});
  } catch (...) {
    job.error = std::current_exception();  // rethrown by wait()
  }
  job.completed = MPI_Wtime();
}

void AsyncEngine::wait(Job& job) {
  std::unique_lock lock(mu_);
  while (job.state != State::kDone) {
    if (!busy_ && !queue_.empty()) {
      // Nobody is running a job: run the next one (ours or one submitted before it) here.
      std::shared_ptr<Job> next = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      next->state = State::kRunning;
      lock.unlock();
      run(*next, false);
      lock.lock();
      busy_ = false;
      next->state = State::kDone;
      changed_.notify_all();
    } else {
      doorbell_.start_waiting();  // the helper spins instead of napping while we wait
      // Yield for a while before sleeping: a short collective is over before a sleeping
      // thread could even be woken (a futex wake costs ~20 us when every core is busy).
      const auto deadline = std::chrono::steady_clock::now() + kSpinBeforeSleep;
      while (job.state != State::kDone && std::chrono::steady_clock::now() < deadline) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
      }
      if (job.state != State::kDone) changed_.wait(lock);
      doorbell_.stop_waiting();
    }
  }
  if (job.error) std::rethrow_exception(job.error);
}

void AsyncEngine::helper_main() {
  std::unique_lock lock(mu_);
  for (;;) {
    changed_.wait(lock, [this] { return !busy_ && (stop_ || !queue_.empty()); });
    if (queue_.empty()) return;  // stop_ and nothing left to run
    std::shared_ptr<Job> next = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    next->state = State::kRunning;
    lock.unlock();
    run(*next, true);
    lock.lock();
    busy_ = false;
    next->state = State::kDone;
    changed_.notify_all();
  }
}

}  // namespace syncopate::mpi
