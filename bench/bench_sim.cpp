// Simulator speed: how fast each fidelity simulates (wall seconds, simulated comms per second).
//
//   BM_Allreduce100MB/<fidelity>/<workers>: one 100 MB allreduce (kAuto: hierarchical on
//     mn5-acc) at 64, 256 and 1,024 workers, cost-only.
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
#include <functional>
#include <string>
#include <vector>

#include "backends/sim/sim_backend.hpp"

namespace syncopate::sim {
namespace {

struct ChildStats {
  int ok = 0;  // 1: the body returned
  SimStats stats;
  double result = 0;  // body-specific (simulated seconds of interest)
};

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
    return ChildStats{.stats = {}, .result = good ? 1.0 : 0.0};
  });
  return check.ok == 1 && check.result == 1.0;
}

void report(benchmark::State& state, const ChildStats& s) {
  state.counters["sim_seconds"] = s.result;
  state.counters["comms"] = static_cast<double>(s.stats.comms);
  state.counters["messages"] = static_cast<double>(s.stats.messages);
  state.counters["comms_per_s"] = static_cast<double>(s.stats.comms) / s.stats.wall_seconds;
  state.counters["messages_per_s"] = static_cast<double>(s.stats.messages) / s.stats.wall_seconds;
  state.counters["activities_per_s"] =
      static_cast<double>(s.stats.activities) / s.stats.wall_seconds;
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
      return ChildStats{.stats = stats, .result = end};
    });
    if (last.ok != 1) {
      state.SkipWithError("simulation failed");
      return;
    }
    state.SetIterationTime(last.stats.wall_seconds);
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

}  // namespace
}  // namespace syncopate::sim

BENCHMARK_MAIN();
