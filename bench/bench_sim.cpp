// Simulator speed: how fast each fidelity simulates (wall seconds, simulated comms per second).
//
//   BM_Allreduce100MB/<fidelity>/<workers>: one 100 MB allreduce (kAuto: hierarchical on
//     mn5-acc) at 64, 256 and 1,024 workers, cost-only.
//   BM_BuildPlatform/<platform>/<nodes>: building a platform into SimGrid (CPU seconds of
//     load_platform) and one route lookup between its first and last GPU.
// Whole training epochs are measured through the Trainer itself: bench/sim_fidelity.sh.
//
// SimGrid allows one engine per process, so every measurement runs in a forked child; the
// reported time is the child's engine run (manual time). Before timing, each fidelity is checked
// on a small emulated allreduce (the result must equal the serial sum).
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/sim_backend.hpp"

namespace syncopate::sim {
namespace {

// What a child sends back through its pipe: plain numbers only (SimStats holds a vector).
struct ChildStats {
  int ok = 0;  // 1: the body returned
  double wall_seconds = 0;
  uint64_t comms = 0, activities = 0, messages = 0;
  double result = 0;  // body-specific (simulated seconds of interest)
  double extra = 0;   // body-specific
};
static_assert(std::is_trivially_copyable_v<ChildStats>);

// Runs body in a forked child; the child's result comes back through a pipe as plain bytes.
ChildStats run_child(const std::function<ChildStats()>& body) {
  std::array<int, 2> fds{};
  if (pipe(fds.data()) != 0) return {};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    ChildStats out;
    try {
      out = body();
      out.ok = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_sim child: %s\n", e.what());
    }
    const ssize_t written = write(fds[1], &out, sizeof out);
    close(fds[1]);
    _exit(written == static_cast<ssize_t>(sizeof out) ? 0 : 1);
  }
  close(fds[1]);
  ChildStats out;
  if (read(fds[0], &out, sizeof out) != static_cast<ssize_t>(sizeof out)) out.ok = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

SimOptions mn5(Fidelity fidelity, int workers) {
  SimOptions options;
  options.platform = "mn5-acc";
  options.platform_overrides = {{"nodes", std::to_string((workers + 3) / 4)}};
  options.workers = workers;
  options.fidelity = fidelity;
  options.cost_only = true;
  return options;
}

// Correctness first: an emulated allreduce on 8 workers equals the serial sum at `fidelity`.
bool fidelity_is_correct(Fidelity fidelity) {
  const ChildStats check = run_child([fidelity] {
    SimOptions options = mn5(fidelity, 8);
    options.cost_only = false;
    bool good = true;
    run_simulation(options, [&](Communicator& comm, Executor&) {
      std::vector<float> data(1001);
      for (size_t i = 0; i < data.size(); ++i)
        data[i] = static_cast<float>((comm.rank() + 1) * static_cast<int>(i % 7));
      comm.allreduce(data);
      for (size_t i = 0; i < data.size(); ++i)
        good = good && data[i] == static_cast<float>(36 * static_cast<int>(i % 7));
    });
    return ChildStats{.result = good ? 1.0 : 0.0};
  });
  return check.ok == 1 && check.result == 1.0;
}

void report(benchmark::State& state, const ChildStats& s) {
  state.counters["sim_seconds"] = s.result;
  state.counters["comms"] = static_cast<double>(s.comms);
  state.counters["messages"] = static_cast<double>(s.messages);
  state.counters["comms_per_s"] = static_cast<double>(s.comms) / s.wall_seconds;
  state.counters["messages_per_s"] = static_cast<double>(s.messages) / s.wall_seconds;
  state.counters["activities_per_s"] = static_cast<double>(s.activities) / s.wall_seconds;
}

void BM_Allreduce100MB(benchmark::State& state) {
  const auto fidelity = static_cast<Fidelity>(state.range(0));
  const int workers = static_cast<int>(state.range(1));
  state.SetLabel(std::string(to_string(fidelity)));
  if (!fidelity_is_correct(fidelity)) {
    state.SkipWithError("emulated allreduce gave a wrong sum");
    return;
  }
  ChildStats last;
  for (auto _ : state) {
    last = run_child([&] {
      const size_t count = 25'000'000;    // 100 MB of float32
      std::vector<float> scratch(count);  // cost-only: shared, never touched
      double end = 0;
      const SimStats stats =
          run_simulation(mn5(fidelity, workers), [&](Communicator& comm, Executor& exec) {
            comm.allreduce(scratch);
            end = std::max(end, exec.now());
          });
      return ChildStats{.wall_seconds = stats.wall_seconds,
                        .comms = stats.comms,
                        .activities = stats.activities,
                        .messages = stats.messages,
                        .result = end};
    });
    if (last.ok != 1) {
      state.SkipWithError("simulation failed");
      return;
    }
    state.SetIterationTime(last.wall_seconds);
  }
  report(state, last);
}

constexpr int64_t kMessage = static_cast<int64_t>(Fidelity::kMessage);
constexpr int64_t kFlow = static_cast<int64_t>(Fidelity::kFlow);
constexpr int64_t kAnalytic = static_cast<int64_t>(Fidelity::kAnalytic);

BENCHMARK(BM_Allreduce100MB)
    ->ArgNames({"fidelity", "workers"})
    ->ArgsProduct({{kMessage, kFlow, kAnalytic}, {64, 256, 1024}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

// CPU seconds used by this process so far (the build is single-threaded; CPU time is what a
// shared machine's other jobs do not inflate).
double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

const std::array<const char*, 2> kBuildPlatforms = {"mn5-acc", "ethernet-cluster"};

void BM_BuildPlatform(benchmark::State& state) {
  const std::string name = kBuildPlatforms.at(static_cast<size_t>(state.range(0)));
  const int nodes = static_cast<int>(state.range(1));
  state.SetLabel(name);
  ChildStats last;
  for (auto _ : state) {
    last = run_child([&] {
      static EngineArgs args("bench_sim", "warning");
      simgrid::s4u::Engine engine(args.argc(), args.argv());
      configure_engine(engine);
      const double start = cpu_seconds();
      const Platform platform = load_platform(engine, name, {{"nodes", std::to_string(nodes)}}, 1);
      const double build_s = cpu_seconds() - start;
      constexpr int kLookups = 1000;
      const double lookup = cpu_seconds();
      double latency = 0;
      for (int i = 0; i < kLookups; ++i) {
        latency += route_model(platform.gpus.front(), platform.gpus.back()).latency_s;
      }
      benchmark::DoNotOptimize(latency);
      return ChildStats{.result = build_s, .extra = (cpu_seconds() - lookup) / kLookups};
    });
    if (last.ok != 1) {
      state.SkipWithError("the platform did not build");
      return;
    }
    state.SetIterationTime(last.result);
  }
  state.counters["route_us"] = last.extra * 1e6;
}

BENCHMARK(BM_BuildPlatform)
    ->ArgNames({"platform", "nodes"})
    ->Args({0, 256})
    ->Args({0, 1024})
    ->Args({0, 4096})
    ->Args({1, 4096})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace syncopate::sim

BENCHMARK_MAIN();
