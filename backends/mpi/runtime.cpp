// Runtime (MPI init/finalize, fault policy), the process-wide fault state and the watchdog wait.
#include "backends/mpi/runtime.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "backends/mpi/mpi_detail.hpp"
#include "core/base/function_ref.hpp"

namespace syncopate::mpi {
namespace {

std::atomic<bool> g_failed{false};
std::atomic<double> g_watchdog_seconds{600.0};
// Helper-thread polling: microseconds slept between polls once a wait is not quick (0: yield).
int g_helper_poll_us = 50;
std::atomic<int> g_world_rank{-1};  // for messages from threads that may not call MPI
bool g_thread_multiple = false;
bool g_single_copy = false;
int g_yield_when_idle = -1;  // read_yield_when_idle()

double parse_watchdog(const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= 0))
    throw UserError(std::string("environment: SYNCOPATE_MPI_WATCHDOG_S: '") + text +
                    "' is not a number of seconds; allowed: >= 0 (0 disables the watchdog)");
  return value;
}

// SYNCOPATE_MPI_HELPER_POLL_US: whole microseconds, 0 (yield) to 1,000,000.
int parse_helper_poll(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < 0 || value > 1'000'000)
    throw UserError(std::string("environment: SYNCOPATE_MPI_HELPER_POLL_US: '") + text +
                    "' is not a number of microseconds; allowed: an integer from 0 (yield) to "
                    "1000000");
  return static_cast<int>(value);
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

// Calls read(handle, datatype, enumtype) on the MPI tool interface's control variable `name`,
// where the library has it with one value, between the interface's start and its end. Read
// after MPI_Init, a variable is as the library holds it, however it was set (--mca,
// environment, file) and whatever the library chose by itself.
void read_cvar(const char* name,
               FunctionRef<void(MPI_T_cvar_handle, MPI_Datatype, MPI_T_enum)> read) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return;
  int index = -1, count = 0;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  MPI_T_enum enumtype = MPI_T_ENUM_NULL;
  char info_name[256];
  int name_length = sizeof info_name;
  int verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype datatype = MPI_DATATYPE_NULL;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS &&
      MPI_T_cvar_get_info(index, info_name, &name_length, &verbosity, &datatype, &enumtype, nullptr,
                          nullptr, &bind, &scope) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    if (count == 1) read(handle, datatype, enumtype);
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
}

// Whether Open MPI's shared-memory transport (btl/vader) moves the bulk of a rendezvous message
// with a single copy (CMA, XPMEM or KNEM: its default wherever the kernel allows). False where
// there is no such variable (another MPI, no vader).
bool read_single_copy() {
  bool single_copy = false;
  read_cvar("btl_vader_single_copy_mechanism", [&](MPI_T_cvar_handle handle, MPI_Datatype datatype,
                                                   MPI_T_enum enumtype) {
    int value = 0;
    if (datatype != MPI_INT || enumtype == MPI_T_ENUM_NULL ||
        MPI_T_cvar_read(handle, &value) != MPI_SUCCESS)
      return;
    char name[256];
    int name_length = sizeof name;
    int items = 0;
    if (MPI_T_enum_get_info(enumtype, &items, name, &name_length) != MPI_SUCCESS) return;
    for (int i = 0; i < items; ++i) {
      int item = 0;
      name_length = sizeof name;
      if (MPI_T_enum_get_item(enumtype, i, &item, name, &name_length) == MPI_SUCCESS &&
          item == value)
        single_copy = std::string_view(name) != "none" && std::string_view(name) != "emulated";
    }
  });
  return single_copy;
}

// Whether a waiting rank yields its core (Open MPI's mpi_yield_when_idle, which it turns on by
// itself where it knows that its ranks outnumber the cores). -1 where there is no such variable
// (another MPI).
int read_yield_when_idle() {
  int yields = -1;
  read_cvar("mpi_yield_when_idle",
            [&](MPI_T_cvar_handle handle, MPI_Datatype datatype, MPI_T_enum /*enumtype*/) {
              if (datatype == MPI_C_BOOL) {  // Open MPI's: a C bool
                bool value = false;
                if (MPI_T_cvar_read(handle, &value) == MPI_SUCCESS) yields = value ? 1 : 0;
              } else if (datatype == MPI_INT) {
                int value = 0;
                if (MPI_T_cvar_read(handle, &value) == MPI_SUCCESS) yields = value != 0 ? 1 : 0;
              }
            });
  return yields;
}

}  // namespace

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
bool shared_memory_single_copy() { return g_single_copy; }
int world_rank() { return g_world_rank.load(); }

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

void withdraw(std::span<MPI_Request> requests) noexcept {
  for (MPI_Request& request : requests) {
    if (request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&request);
    MPI_Request_free(&request);
  }
}

namespace {

bool truncated(int rc, int count, const MPI_Status* statuses) {
  int error_class = MPI_SUCCESS;
  MPI_Error_class(rc, &error_class);
  if (error_class == MPI_ERR_TRUNCATE) return true;
  if (error_class != MPI_ERR_IN_STATUS || statuses == MPI_STATUSES_IGNORE) return false;
  for (int i = 0; i < count; ++i) {
    MPI_Error_class(statuses[i].MPI_ERROR, &error_class);
    if (error_class == MPI_ERR_TRUNCATE) return true;
  }
  return false;
}

std::string describe(MPI_Comm comm, const WaitContext& context, double waited) {
  int rank = -1;
  MPI_Comm_rank(comm, &rank);
  std::ostringstream message;
  message << "syncopate mpi: rank " << rank << " waited " << waited << " s in "
          << context.operation;
  if (context.round >= 0) message << " step " << context.round;
  if (context.peer_a >= 0 || context.peer_b >= 0)
    message << " for peer(s) " << context.peer_a << "/" << context.peer_b;
  return message.str();
}

// One MPI_Testall; a truncated receive is the caller's error, any other failure MPI's.
bool test_all(MPI_Comm comm, std::span<MPI_Request> requests, const WaitContext& context,
              MPI_Status* statuses) {
  int done = 0;
  const int count = static_cast<int>(requests.size());
  const int rc = MPI_Testall(count, requests.data(), &done, statuses);
  if (rc == MPI_SUCCESS) return done != 0;
  if (!truncated(rc, count, statuses)) throw_mpi_error(rc, "MPI_Testall", __FILE__, __LINE__);
  withdraw(requests);
  throw UserError(describe(comm, context, 0) +
                  ": a message is longer than the receive buffer; allowed: a recv of the size "
                  "of its send, and the same collectives in the same order on every member");
}

}  // namespace

void wait_all(MPI_Comm comm, std::span<MPI_Request> requests, const WaitContext& context,
              const PollPolicy& poll, MPI_Status* statuses) {
  if (requests.empty()) return;
  const double limit = poll.timeout_s == kDefaultTimeout
                           ? g_watchdog_seconds.load(std::memory_order_relaxed)
                           : poll.timeout_s;
  const double start = MPI_Wtime();
  for (uint64_t polls = 1;; ++polls) {
    if (test_all(comm, requests, context, statuses)) return;
    const bool spinning =
        !poll.background || polls < 64 || (poll.doorbell != nullptr && poll.doorbell->waited_for());
    if (spinning && polls % 256 != 0) continue;
    const double waited = MPI_Wtime() - start;
    const bool cancelled = poll.cancel != nullptr && poll.cancel->load();
    if (cancelled || (limit > 0 && waited > limit)) {
      mark_failed();
      withdraw(requests);
      std::ostringstream message;
      message << describe(comm, context, waited);
      if (cancelled)
        message << ": abandoned because its communicator is being destroyed after an error";
      else
        message << ": a peer died or hangs (timeout " << limit
                << " s; default: watchdog SYNCOPATE_MPI_WATCHDOG_S; raise it if such waits are "
                   "expected)";
      throw PeerTimeout(message.str());
    }
    if (spinning) continue;
    if (g_helper_poll_us > 0 && poll.doorbell != nullptr)
      poll.doorbell->nap(std::chrono::microseconds(g_helper_poll_us));
    else if (g_helper_poll_us > 0)
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
    g_helper_poll_us = parse_helper_poll(text);
  int provided = MPI_THREAD_SINGLE;
  SYNC_MPI(MPI_Init_thread(argc, argv, wanted, &provided));
  // From here on MPI errors are return codes that SYNC_MPI turns into MpiError.
  SYNC_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  SYNC_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  SYNC_CHECK(provided >= MPI_THREAD_FUNNELED, "MPI provides thread level " << provided);
  g_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  g_single_copy = read_single_copy();
  g_yield_when_idle = read_yield_when_idle();
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
bool Runtime::shared_memory_single_copy() { return g_single_copy; }
std::optional<bool> Runtime::waiting_ranks_yield() {
  if (g_yield_when_idle < 0) return std::nullopt;
  return g_yield_when_idle == 1;
}
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

}  // namespace syncopate::mpi
