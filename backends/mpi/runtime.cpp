// Runtime (MPI init/finalize, fault policy), the watchdog wait, MpiExecutor and small helpers.
#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "backends/mpi/mpi_backend.hpp"
#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {
namespace {

std::atomic<bool> g_failed{false};
std::atomic<double> g_watchdog_seconds{600.0};
// Helper-thread polling: microseconds slept between polls once a wait is not quick (0: yield).
int g_helper_poll_us = 50;
std::atomic<int> g_world_rank{-1};  // for messages from threads that may not call MPI
bool g_thread_multiple = false;

double parse_watchdog(const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= 0))
    throw UserError(std::string("environment: SYNCOPATE_MPI_WATCHDOG_S: '") + text +
                    "' is not a number of seconds; allowed: >= 0 (0 disables the watchdog)");
  return value;
}

int requested_thread_level() {
  const char* text = std::getenv("SYNCOPATE_MPI_THREADS");
  if (text == nullptr || std::string_view(text) == "multiple") return MPI_THREAD_MULTIPLE;
  if (std::string_view(text) == "funneled") return MPI_THREAD_FUNNELED;
  throw UserError(std::string("environment: SYNCOPATE_MPI_THREADS: '") + text +
                  "' is unknown; allowed: multiple, funneled");
}

// libsimgrid.so defines MPI_* as well (SMPI). If it precedes libmpi among the program's
// libraries, "MPI" calls go to SimGrid; say so instead of failing obscurely.
void check_mpi_is_not_smpi() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname != nullptr &&
      std::strstr(info.dli_fname, "simgrid") != nullptr)
    throw InternalError(std::string("MPI_Init_thread resolves to ") + info.dli_fname +
                        " (SimGrid's SMPI), not Open MPI: link libmpi before libsimgrid");
}

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
    wake_.notify_all();
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
        wake_.wait(lock);
        continue;
      }
      auto earliest = armed_.begin();
      for (auto it = armed_.begin(); it != armed_.end(); ++it)
        if (it->second.due < earliest->second.due) earliest = it;
      if (const auto due = earliest->second.due; std::chrono::steady_clock::now() < due) {
        wake_.wait_until(lock, due);  // a copy: the entry may be erased while this thread waits
        continue;
      }
      std::ostringstream message;
      message << "syncopate mpi: rank " << g_world_rank << " spent more than "
              << earliest->second.seconds << " s in " << earliest->second.operation
              << ": a peer died or hangs (watchdog SYNCOPATE_MPI_WATCHDOG_S); ending the job";
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
  uint64_t next_id_ = 0;
  Deadline::Action action_ = nullptr;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Deadline::Deadline(const char* operation) {
  const double seconds = g_watchdog_seconds.load(std::memory_order_relaxed);
  if (seconds > 0) id_ = DeadlineWatcher::instance().arm(operation, seconds);
}

Deadline::~Deadline() {
  if (id_ != 0) DeadlineWatcher::instance().disarm(id_);
}

void Deadline::set_action_for_tests(Action action) {
  DeadlineWatcher::instance().set_action(action);
}

namespace detail {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  mark_failed();
  std::ostringstream message;
  message << file << ":" << line << ": " << call << " failed: " << text;
  throw MpiError(message.str());
}

void mark_failed() { g_failed.store(true); }
void reset_failed_for_tests() { g_failed.store(false); }
bool failed() { return g_failed.load(); }
bool thread_multiple() { return g_thread_multiple; }

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

void wait_all(MPI_Comm comm, std::span<MPI_Request> requests, const WaitContext& context,
              const PollPolicy& poll, MPI_Status* statuses) {
  if (requests.empty()) return;
  const double limit = g_watchdog_seconds.load(std::memory_order_relaxed);
  const double start = MPI_Wtime();
  for (uint64_t polls = 1;; ++polls) {
    int done = 0;
    SYNC_MPI(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses));
    if (done != 0) return;
    const bool spinning =
        !poll.background || polls < 64 || (poll.waiters != nullptr && poll.waiters->load() > 0);
    if (spinning && polls % 256 != 0) continue;
    const double waited = MPI_Wtime() - start;
    const bool cancelled = poll.cancel != nullptr && poll.cancel->load();
    if (cancelled || (limit > 0 && waited > limit)) {
      int rank = -1;
      MPI_Comm_rank(comm, &rank);
      mark_failed();
      // Withdraw the requests, so that a late message cannot land in a buffer given up on.
      for (MPI_Request& request : requests) {
        if (request == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&request);
        MPI_Request_free(&request);
      }
      std::ostringstream message;
      message << "syncopate mpi: rank " << rank << " waited " << waited << " s in "
              << context.operation;
      if (context.round >= 0) message << " step " << context.round;
      if (context.peer_a >= 0 || context.peer_b >= 0)
        message << " for peer(s) " << context.peer_a << "/" << context.peer_b;
      if (cancelled)
        message << ": abandoned because its communicator is being destroyed after an error";
      else
        message << ": a peer died or hangs (watchdog SYNCOPATE_MPI_WATCHDOG_S = " << limit
                << " s; raise it if such waits are expected)";
      throw PeerTimeout(message.str());
    }
    if (spinning) continue;
    if (g_helper_poll_us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(g_helper_poll_us));
    else
      std::this_thread::yield();
  }
}

}  // namespace detail

Runtime::Runtime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  SYNC_CHECK(initialized == 0, "only one syncopate::mpi::Runtime per process");
  check_mpi_is_not_smpi();
  // Open MPI 4.1's osc/rdma names a window's shared-memory file after the communicator id,
  // which disjoint groups from one MPI_Comm_split share: windows created on such groups at the
  // same time collide (MPI_ERR_WIN or a hang here; open-mpi/ompi#9492, fixed only in 5.0).
  // Exclude it unless the user chose: osc/sm then serves one node, osc/ucx or pt2pt several.
  setenv("OMPI_MCA_osc", "^rdma", /*overwrite=*/0);
  const int wanted = requested_thread_level();
  if (const char* text = std::getenv("SYNCOPATE_MPI_WATCHDOG_S"))
    g_watchdog_seconds.store(parse_watchdog(text));
  if (const char* text = std::getenv("SYNCOPATE_MPI_HELPER_POLL_US"))
    g_helper_poll_us = std::atoi(text);
  int provided = MPI_THREAD_SINGLE;
  SYNC_MPI(MPI_Init_thread(argc, argv, wanted, &provided));
  // From here on MPI errors are return codes that SYNC_MPI turns into MpiError.
  SYNC_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  SYNC_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  SYNC_CHECK(provided >= MPI_THREAD_FUNNELED, "MPI provides thread level " << provided);
  g_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  SYNC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  SYNC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  g_world_rank = world_rank_;
}

Runtime::~Runtime() {
  if (std::uncaught_exceptions() > 0 || detail::failed()) {
    // Some rank may be blocked in a collective that this one will never join: MPI_Finalize
    // could wait forever, so end the whole job.
    std::fprintf(stderr,
                 "syncopate mpi: rank %d is failing (see the error above); aborting the job\n",
                 world_rank_);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

bool Runtime::thread_multiple() const { return g_thread_multiple; }
void Runtime::set_watchdog_seconds(double seconds) { g_watchdog_seconds.store(seconds); }
double Runtime::watchdog_seconds() { return g_watchdog_seconds.load(); }

void Runtime::abort(int code, std::string_view message) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "syncopate mpi: rank %d: %.*s\n", rank, static_cast<int>(message.size()),
               message.data());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
}

MpiExecutor::MpiExecutor() : start_(MPI_Wtime()) {}

void MpiExecutor::compute(const Cost& /*cost*/, FunctionRef<void()> math) {
  math();
  if (progress_comm_ != MPI_COMM_NULL) {
    int flag = 0;
    SYNC_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, progress_comm_, &flag, MPI_STATUS_IGNORE));
  }
}

CommHandle::~CommHandle() {
  // Freeing is skipped while the process fails: it is about to be aborted anyway.
  if (comm_ != MPI_COMM_NULL && detail::mpi_active() && !detail::failed() &&
      std::uncaught_exceptions() == 0)
    MPI_Comm_free(&comm_);
}

CommHandle& CommHandle::operator=(CommHandle&& other) noexcept {
  if (this != &other) {
    CommHandle old(release());
    comm_ = other.release();
  }
  return *this;
}

void native_allreduce(MpiCommunicator& comm, std::span<float> data, ReduceOp op) {
  SYNC_MPI(MPI_Allreduce(MPI_IN_PLACE, data.data(), detail::to_count(data.size()), MPI_FLOAT,
                         op == ReduceOp::kMax ? MPI_MAX : MPI_SUM, comm.handle()));
  finish(op, comm.size(), data);
}

uint64_t fnv1a64(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

void check_same_everywhere(MpiCommunicator& comm, const std::string& scenario_text,
                           int expected_workers) {
  const Deadline deadline("the start-up check of the scenario (MPI_Allgather)");
  const uint64_t mine = fnv1a64(scenario_text);
  std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
  SYNC_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm.handle()));
  std::ostringstream differing;
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != all[0]) differing << " " << r;
  if (!differing.str().empty()) {
    std::ostringstream message;
    message << "scenario: ranks were given different scenarios (FNV-1a 64 of the text differs "
               "from rank 0's on rank(s)"
            << differing.str() << "); every rank must read the same scenario file";
    throw UserError(message.str());
  }
  if (comm.size() != expected_workers) {
    std::ostringstream message;
    message << "scenario: workers: the scenario asks for " << expected_workers
            << " workers but MPI started " << comm.size() << " ranks; allowed: run with mpirun -np "
            << expected_workers;
    throw UserError(message.str());
  }
}

}  // namespace syncopate::mpi
