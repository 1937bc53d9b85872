// `syncopate calibrate` under mpirun: every rank times the scenario's compute and the transport;
// rank 0 writes the host profile and the platform recipe fitted to them.
#include "app/calibrate.hpp"

#include "core/base/check.hpp"
#include "core/base/data_dir.hpp"
#include "core/tensor/gemm.hpp"

#if defined(SYNCOPATE_HAVE_MPI)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "app/calibrate_fit.hpp"
#include "app/calibrate_mpi.hpp"
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/runtime.hpp"
#include "backends/mpi/startup_check.hpp"

namespace syncopate::app {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown (no model name in /proc/cpuinfo)";
}

// "6.29 5.75 6.02" from /proc/loadavg: how busy the machine was when the measurement began.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "unknown (no /proc/loadavg)";
  return one + " " + five + " " + fifteen;
}

std::string build_type() {
  std::string build;
#if defined(__OPTIMIZE__)
  build = "optimised";
#else
  build = "not optimised";
#endif
#if defined(NDEBUG)
  build += ", NDEBUG";
#endif
#if defined(__SANITIZE_ADDRESS__)
  build += ", AddressSanitizer";
#endif
  return build + ", " + __VERSION__;
}

// The MPI library's own first line of its version, e.g. "Open MPI v4.1.4, package: ...".
std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(length));
  version = version.substr(0, version.find_first_of(",\n"));
  return version.empty() ? "unknown" : version;
}

// The header's line on how a waiting rank waits (Runtime::waiting_ranks_yield): turn_latency,
// a message's wait for its receiver's turn on a core, holds for runs that wait the same way.
std::string waiting_line(std::optional<bool> yields) {
  if (!yields) return "waiting ranks: this MPI has no mpi_yield_when_idle to read";
  return *yields ? "waiting ranks yield their core (mpi_yield_when_idle on): turn_latency holds "
                   "for runs that do"
                 : "waiting ranks spin (mpi_yield_when_idle off): turn_latency holds for runs "
                   "that do";
}

Provenance provenance(const CalibrateOptions& o, int ranks, int64_t batch,
                      const std::string& load) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  return {{std::string("date: ") + date, std::string("host: ") + host,
           "cpu: " + cpu_model() + " (" + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
               " cores online)",
           "load average at the start (1, 5, 15 min): " + load,
           "ranks: " + std::to_string(ranks) + " (one node; every rank measured at once)",
           "build: " + build_type() + "; GEMM kernel " + std::string(gemm_kernel()),
           "MPI: " + mpi_library() + "; shared-memory single copy " +
               (mpi::Runtime::shared_memory_single_copy() ? "on" : "off") +
               " (btl_vader_single_copy_mechanism),",
           "which changes the time of messages over 4 KiB: a platform predicts runs under it",
           waiting_line(mpi::Runtime::waiting_ranks_yield()),
           "command: " + o.command_line + " (under mpirun, " + std::to_string(ranks) + " ranks)",
           "samples: " + std::to_string(o.repeats) + " per rank per figure at batch " +
               std::to_string(batch) + ", pooled over the ranks; figures are medians, with p10",
           "and p90 as the spread: the machine may be shared (other processes compete for its",
           "cores), so single samples are noisy."}};
}

Scenario resolve(const CalibrateOptions& o, int ranks) {
  std::vector<std::string> sets = o.sets;
  sets.push_back("workers=" + std::to_string(ranks));
  return o.scenario_path.empty()
             ? parse_scenario(default_scenario_text(), "<embedded default scenario>", sets)
             : load_scenario(find_scenario(o.scenario_path), sets);
}

std::vector<Series*> all_series(ComputeSamples& c) {
  std::vector<Series*> out;
  for (LayerSeries& layer : c.layers) out.insert(out.end(), {&layer.forward, &layer.backward});
  out.insert(out.end(), {&c.loss, &c.zero_grad, &c.optimizer, &c.overhead, &c.parts});
  return out;
}

// Every rank's samples of every figure, on every rank.
void pool(MPI_Comm comm, int ranks, ComputeSamples& c) {
  std::vector<double> mine;
  for (Series* s : all_series(c)) mine.insert(mine.end(), s->seconds.begin(), s->seconds.end());
  std::vector<double> all(mine.size() * static_cast<size_t>(ranks));
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                static_cast<int>(mine.size()), MPI_DOUBLE, comm);
  size_t at = 0;
  for (Series* s : all_series(c)) {
    const size_t n = s->seconds.size();
    s->seconds.clear();
    for (int r = 0; r < ranks; ++r) {
      const auto begin =
          all.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r) * mine.size() + at);
      s->seconds.insert(s->seconds.end(), begin, begin + static_cast<ptrdiff_t>(n));
    }
    at += n;
  }
}

}  // namespace

bool agreed_scenario(mpi::MpiCommunicator& comm, const std::function<Scenario()>& resolve,
                     const std::string& command, Scenario& scenario) {
  std::string error;
  try {
    scenario = resolve();
  } catch (const UserError& e) {
    error = e.what();
  }
  int ok = error.empty() ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm.handle());
  if (all_ok == 0) {
    if (error.empty()) error = command + ": another rank refused its scenario or its settings";
  } else {
    try {
      mpi::check_same_everywhere(comm, scenario.resolved_toml, comm.size());
    } catch (const UserError& e) {
      error = command + ": " + e.what();
    }
  }
  if (error.empty()) return true;
  std::fprintf(stderr, "syncopate: error on rank %d: %s\n", comm.rank(), error.c_str());
  return false;
}

int run_calibrate(const CalibrateOptions& o, int* argc, char*** argv) {
  mpi::Runtime runtime(argc, argv);
  auto comm = mpi::MpiCommunicator::world();
  if (comm->size() < 2) {
    std::fprintf(stderr,
                 "syncopate: error: calibrate: the transport measurements need 2 ranks or more, "
                 "this is 1; run it under mpirun -np 2 (or more)\n");
    return 1;
  }
  Scenario scenario;
  // A bad SYNCOPATE_GEMM_KERNEL is refused here, agreed by every rank, before any timing.
  const auto checked = [&] {
    gemm_kernel();
    return resolve(o, comm->size());
  };
  if (!agreed_scenario(*comm, checked, "calibrate", scenario)) return 1;
  Calibration c;
  c.name = std::filesystem::path(o.out).stem().string();
  const std::string load = load_average();
  comm->barrier();
  c.compute = time_compute(scenario, o.repeats, kPaceWindowS, [&] { comm->barrier(); });
  pool(comm->handle(), comm->size(), c.compute);
  c.compute.rank_pace_s.resize(static_cast<size_t>(comm->size()));
  MPI_Allgather(&c.compute.pace_step_s, 1, MPI_DOUBLE, c.compute.rank_pace_s.data(), 1, MPI_DOUBLE,
                comm->handle());
  c.transport = time_transport(*comm, o.repeats);
  if (comm->rank() != 0) return 0;
  c.provenance = provenance(o, comm->size(), c.compute.batch, load);
  c.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  c.shared_memory_single_copy = mpi::Runtime::shared_memory_single_copy();
  c.mpi_yield_when_idle = mpi::Runtime::waiting_ranks_yield();
  print_calibration(c);
  const std::string profile = write_calibration(c, o.out);
  std::printf("wrote %s and %s\n", o.out.c_str(), profile.c_str());
  const std::string unsteady = unsteady_step_warning(c.compute.parts.seconds, o.steady_spread);
  if (!unsteady.empty())
    std::fprintf(stderr, "syncopate: calibrate: warning: %s\n", unsteady.c_str());
  if (mpi::Runtime::waiting_ranks_yield() == false && !c.transport.turn.empty())
    std::fprintf(stderr,
                 "syncopate: calibrate: note: waiting ranks spin here (mpi_yield_when_idle off), "
                 "so turn_latency is a time slice's wait; runs that yield (Open MPI does where "
                 "it knows its ranks outnumber the cores, or under "
                 "OMPI_MCA_mpi_yield_when_idle=1) wait far less: calibrate under their "
                 "settings\n");
  return 0;
}

}  // namespace syncopate::app

#else

namespace syncopate::app {

int run_calibrate(const CalibrateOptions& /*options*/, int* /*argc*/, char*** /*argv*/) {
  throw UserError("calibrate: this build has no MPI backend (SYNCOPATE_WITH_MPI=OFF)");
}

}  // namespace syncopate::app

#endif
