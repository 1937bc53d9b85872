// `syncopate collectives`: the training communicator's allreduce, broadcast and allgather over a
// range of sizes, on the simulator or under mpirun, one CSV row per collective and size.
#include "app/collectives.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/calibrate_mpi.hpp"
#include "app/commands.hpp"
#include "app/spread.hpp"
#include "core/base/check.hpp"
#include "core/base/data_dir.hpp"

#if defined(SYNCOPATE_HAVE_SIM)
#include "backends/sim/sim_backend.hpp"
#endif
#if defined(SYNCOPATE_HAVE_MPI)
#include "backends/mpi/mpi_executor.hpp"
#include "backends/mpi/runtime.hpp"
#endif

namespace syncopate::app {
namespace {

// "4096", "4KiB", "64MiB", "1GiB" in bytes.
size_t parse_size(const std::string& text) {
  size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string unit(end, text.data() + text.size());
  size_t scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "KiB") scale = size_t{1} << 10;
  if (unit == "MiB") scale = size_t{1} << 20;
  if (unit == "GiB") scale = size_t{1} << 30;
  if (error != std::errc() || end == text.data() || scale == 0 || value == 0 ||
      value > (size_t{1} << 40) / scale || value * scale % sizeof(float) != 0)
    throw UsageError("collectives: --sizes: \"" + text +
                     "\" is not a size: a positive multiple of 4 bytes up to 1 TiB, with an "
                     "optional unit B, KiB, MiB or GiB (e.g. 4KiB)");
  return value * scale;
}

CollectiveKind parse_kind(const std::string& name) {
  for (CollectiveKind kind :
       {CollectiveKind::kAllreduce, CollectiveKind::kBroadcast, CollectiveKind::kAllgather})
    if (to_string(kind) == name) return kind;
  throw UsageError("collectives: --ops: \"" + name +
                   "\" is not a collective; allowed: allreduce, broadcast, allgather");
}

// Calls per timed repeat: enough that a small collective is not lost in the clock.
int calls_per_repeat(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((size_t{1} << 20) / bytes, 1, 64));
}

// Buffers for one point: `all` the result, `mine` this rank's block of an allgather.
struct Buffers {
  std::vector<float> all, mine;
};

// Runs the point's collective once; returns the allreduce algorithm that ran (kAuto otherwise).
Algorithm run_once(Communicator& comm, const CollectivePoint& point, Buffers& b) {
  switch (point.op) {
    case CollectiveKind::kAllreduce:
      // As training calls an allreduce that it waits for at once (the weight averages, ddp's
      // last bucket): on MPI, on the calling thread, without the hand-off to the helper.
      return comm.allreduce_waited(b.all, {.wire = point.wire});
    case CollectiveKind::kBroadcast:
      comm.broadcast(b.all, 0);
      break;
    case CollectiveKind::kAllgather:
      comm.allgather(b.mine, b.all, point.wire);
      break;
  }
  return Algorithm::kAuto;
}

// Seconds per call of one repeat, the slowest rank's (every member returns the same value).
double timed_repeat(Communicator& comm, Executor& exec, const CollectivePoint& point, Buffers& b,
                    int calls) {
  comm.barrier();
  const double start = exec.now();
  for (int i = 0; i < calls; ++i) run_once(comm, point, b);
  // Microseconds: a float keeps 7 significant digits of them.
  std::vector<float> slowest{static_cast<float>((exec.now() - start) / calls * 1e6)};
  comm.allreduce(slowest, {ReduceOp::kMax});
  return static_cast<double>(slowest[0]) * 1e-6;
}

// Bus bandwidth factor (nccl-tests): the bytes each rank's link carries per result byte.
double bus_factor(CollectiveKind kind, int ranks) {
  const double p = ranks;
  if (kind == CollectiveKind::kAllreduce) return 2 * (p - 1) / p;
  if (kind == CollectiveKind::kAllgather) return (p - 1) / p;
  return 1;
}

struct Context {
  std::string backend, platform, fidelity;
  int ranks = 0;
};

std::string csv_text(const std::vector<CollectiveTiming>& timings, const Context& c) {
  std::string out =
      "backend,platform,fidelity,ranks,op,bytes,algorithm,wire,median_s,p10_s,p90_s,repeats,"
      "algbw_GBps,busbw_GBps\n";
  for (const CollectiveTiming& t : timings) {
    const Spread s = spread(t.seconds);
    const double algbw = static_cast<double>(t.point.bytes) / s.median / 1e9;
    char line[512];
    std::snprintf(line, sizeof line, "%s,%s,%s,%d,%s,%zu,%s,%s,%.9g,%.9g,%.9g,%zu,%.6g,%.6g\n",
                  c.backend.c_str(), c.platform.c_str(), c.fidelity.c_str(), c.ranks,
                  std::string(to_string(t.point.op)).c_str(), t.point.bytes, t.algorithm.c_str(),
                  std::string(to_string(t.point.wire)).c_str(), s.median, s.p10, s.p90, s.n, algbw,
                  algbw * bus_factor(t.point.op, c.ranks));
    out += line;
  }
  return out;
}

void print_table(const std::vector<CollectiveTiming>& timings, const Context& c) {
  std::printf("%s, %d ranks%s%s: seconds per call (slowest rank), median of %zu\n",
              c.backend.c_str(), c.ranks, c.platform.empty() ? "" : ", platform ",
              c.platform.c_str(), timings.empty() ? size_t{0} : timings[0].seconds.size());
  std::printf("%-10s %12s %-20s %-5s %12s %12s %12s %11s\n", "op", "bytes", "algorithm", "wire",
              "median_us", "p10_us", "p90_us", "busbw_GB/s");
  for (const CollectiveTiming& t : timings) {
    const Spread s = spread(t.seconds);
    std::printf(
        "%-10s %12zu %-20s %-5s %12.2f %12.2f %12.2f %11.3f\n",
        std::string(to_string(t.point.op)).c_str(), t.point.bytes,
        t.algorithm.empty() ? "-" : t.algorithm.c_str(),
        std::string(to_string(t.point.wire)).c_str(), s.median * 1e6, s.p10 * 1e6, s.p90 * 1e6,
        static_cast<double>(t.point.bytes) / s.median / 1e9 * bus_factor(t.point.op, c.ranks));
  }
}

// The CSV through a temporary file and a rename: an interrupted write leaves no half file.
void write_csv(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush())
      throw UserError("collectives: --out " + path + ": cannot write: " + std::strerror(errno));
  }
  std::filesystem::rename(tmp, path);
}

// Before anything is timed: the folder of --out exists and takes files.
void check_out(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(parent))
    throw UserError("collectives: --out " + path + ": " + parent.string() + " is not a directory");
  if (std::filesystem::is_directory(path))
    throw UserError("collectives: --out " + path + ": is a directory; give a CSV file name");
  std::ofstream probe(path + ".tmp", std::ios::trunc);
  if (!probe)
    throw UserError("collectives: --out " + path + ": cannot write there: " + std::strerror(errno));
  probe.close();
  std::filesystem::remove(path + ".tmp");
}

Scenario resolve(const CollectivesOptions& o, std::optional<int> workers) {
  std::vector<std::string> sets = o.sets;
  if (o.backend) sets.push_back("backend=\"" + *o.backend + "\"");
  if (workers) sets.push_back("workers=" + std::to_string(*workers));
  return o.scenario_path.empty()
             ? parse_scenario(default_scenario_text(), "<embedded default scenario>", sets)
             : load_scenario(find_scenario(o.scenario_path), sets);
}

// Unused in a build with neither the simulator nor MPI.
[[maybe_unused]] int finish(const std::vector<CollectiveTiming>& timings, const Context& c,
                            const std::string& out) {
  print_table(timings, c);
  write_csv(out, csv_text(timings, c));
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

#if defined(SYNCOPATE_HAVE_SIM)
int run_on_sim(const Scenario& scenario, const std::vector<CollectivePoint>& points,
               const CollectivesOptions& o) {
  sim::SimOptions options;
  options.platform = scenario.sim.platform;
  options.platform_overrides = scenario.sim.platform_params;
  options.workers = scenario.workers;
  options.fidelity = scenario.sim.fidelity;
  options.cost_only = true;  // the values do not change the time
  std::vector<CollectiveTiming> timings;
  sim::run_simulation(options, [&](Communicator& comm, Executor& exec) {
    std::vector<CollectiveTiming> mine = time_collectives(comm, exec, points, o.repeats);
    if (comm.rank() == 0) timings = std::move(mine);
  });
  return finish(timings,
                {"sim", scenario.sim.platform, std::string(to_string(scenario.sim.fidelity)),
                 scenario.workers},
                o.out);
}
#endif

#if defined(SYNCOPATE_HAVE_MPI)
int run_on_mpi(const std::vector<CollectivePoint>& points, const CollectivesOptions& o, int* argc,
               char*** argv) {
  mpi::Runtime runtime(argc, argv);
  auto comm = mpi::MpiCommunicator::world();
  Scenario scenario;
  if (!agreed_scenario(
          *comm, [&] { return resolve(o, comm->size()); }, "collectives", scenario))
    return 1;
  comm->barrier();
  mpi::MpiExecutor exec;
  const std::vector<CollectiveTiming> timings = time_collectives(*comm, exec, points, o.repeats);
  if (comm->rank() != 0) return 0;
  return finish(timings, {"mpi", "", "", comm->size()}, o.out);
}
#endif

}  // namespace

std::vector<CollectivePoint> collective_points(const std::string& sizes, const std::string& ops,
                                               const std::string& wire_name) {
  const std::optional<WireFormat> wire = value_in(kWireFormatNames, wire_name);
  if (!wire)
    throw UsageError("collectives: --wire: \"" + wire_name +
                     "\" is not a wire format; allowed: fp32, fp16, bf16");
  const size_t colon = sizes.find(':');
  const size_t low = parse_size(sizes.substr(0, colon));
  const size_t high = colon == std::string::npos ? low : parse_size(sizes.substr(colon + 1));
  if (high < low)
    throw UsageError("collectives: --sizes " + sizes + ": the largest size is below the smallest");
  std::vector<CollectivePoint> points;
  size_t begin = 0;
  while (begin <= ops.size()) {
    const size_t end = std::min(ops.find(',', begin), ops.size());
    const CollectiveKind kind = parse_kind(ops.substr(begin, end - begin));
    if (kind == CollectiveKind::kBroadcast && *wire != WireFormat::kFp32)
      throw UsageError("collectives: --wire " + wire_name +
                       ": a broadcast sends fp32 only; time it apart (--ops allreduce,allgather)");
    for (size_t bytes = low; bytes <= high; bytes *= 4) points.push_back({kind, bytes, *wire});
    begin = end + 1;
  }
  return points;
}

std::vector<CollectiveTiming> time_collectives(Communicator& comm, Executor& exec,
                                               const std::vector<CollectivePoint>& points,
                                               int repeats) {
  std::vector<CollectiveTiming> timings;
  for (const CollectivePoint& point : points) {
    const size_t count = point.bytes / sizeof(float);
    Buffers b;
    b.all.assign(count, 0.0f);  // zeros: sums stay finite, no denormals
    b.mine.assign(block_of(count, comm.size(), comm.rank()).count, 0.0f);
    CollectiveTiming t{point, "", {}};
    const Algorithm ran = run_once(comm, point, b);  // warm-up: schedules, connections
    if (point.op == CollectiveKind::kAllreduce) t.algorithm = std::string(to_string(ran));
    const int calls = calls_per_repeat(point.bytes);
    for (int r = 0; r < repeats; ++r)
      t.seconds.push_back(timed_repeat(comm, exec, point, b, calls));
    timings.push_back(std::move(t));
  }
  return timings;
}

int run_collectives(const CollectivesOptions& o, [[maybe_unused]] int* argc,
                    [[maybe_unused]] char*** argv) {
  const std::vector<CollectivePoint> points = collective_points(o.sizes, o.ops, o.wire);
  check_out(o.out);
  // Under mpirun the rank count decides the workers; otherwise the scenario (or --workers).
  const Scenario scenario = resolve(o, o.workers);
  if (scenario.backend == BackendKind::kSim) {
#if defined(SYNCOPATE_HAVE_SIM)
    return run_on_sim(scenario, points, o);
#else
    throw UserError("collectives: this build has no simulator (SYNCOPATE_WITH_SIM=OFF)");
#endif
  }
  if (scenario.backend == BackendKind::kMpi) {
    if (o.workers)
      throw UsageError("collectives: --workers is for the simulator; under mpirun -np decides");
#if defined(SYNCOPATE_HAVE_MPI)
    return run_on_mpi(points, o, argc, argv);
#else
    throw UserError("collectives: this build has no MPI backend (SYNCOPATE_WITH_MPI=OFF)");
#endif
  }
  throw UsageError("collectives: backend \"" + std::string(to_string(scenario.backend)) +
                   "\": choose --backend sim (predicted) or mpi (measured, under mpirun)");
}

}  // namespace syncopate::app
