// run_simulation: the engine, the platform, one actor per worker, and the run's statistics.
#include "backends/sim/sim_backend.hpp"

#include <array>
#include <chrono>
#include <fstream>
#include <numeric>
#include <simgrid/Exception.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/sim_communicator.hpp"
#include "backends/sim/sim_executor.hpp"
#include "backends/sim/sim_faults.hpp"
#include "backends/sim/sim_group.hpp"
#include "backends/sim/sim_world.hpp"
#include "core/train/memory.hpp"

namespace syncopate::sim {
namespace {

bool g_simulation_started = false;  // SimGrid cannot be reset: one simulation per process

void claim_process() {
  if (g_simulation_started)
    throw UserError(
        "sim: a simulation already ran in this process; allowed: one per process (SimGrid "
        "cannot be reset: run each simulation in its own process)");
  g_simulation_started = true;
}

void worker_actor(SimWorld& world, const std::shared_ptr<Group>& everyone, int id,
                  const WorkerMain& worker_main) {
  WorkerState& me = world.worker(id);
  me.started = true;
  me.actor = simgrid::s4u::Actor::self();
  try {
    SimCommunicator comm(everyone, id);
    SimExecutor exec(world, id);
    worker_main(comm, exec);
    me.flush();  // the worker ends at its own clock
  } catch (const simgrid::ForcefulKillException&) {
    throw;  // killed by the engine (deadlock), a failing worker or a host failure: unwind
  } catch (const simgrid::Exception& e) {  // a network or host failure of [[sim.faults]]
    world.record_failure(
        id, world.options().faults.empty() ? std::current_exception() : fault_abort(world, id, e));
    me.finished = true;
    simgrid::s4u::Actor::kill_all();
    return;
  } catch (...) {
    world.record_failure(id, std::current_exception());
    me.finished = true;
    simgrid::s4u::Actor::kill_all();
    return;
  }
  me.finished = true;
}

// The most memory mappings a process may hold (Linux's vm.max_map_count; 65,530 by default).
int64_t max_memory_maps() {
  std::ifstream limit("/proc/sys/vm/max_map_count");
  int64_t maps = 0;
  return limit >> maps ? maps : 65530;
}

// SimGrid puts a guard page below each actor's stack (8 MiB, virtual: only the pages touched
// are resident), which splits the stacks into up to three memory mappings each: past about
// 20,000 actors the process runs out of mappings ("Failed to protect stack"). Such runs go
// without the guard pages. Thread contexts (the sanitizer builds) have neither.
void configure_actor_stacks(int workers) {
  const int64_t maps_needed = 3 * static_cast<int64_t>(workers) + 4096;  // + the rest
  if (maps_needed > max_memory_maps()) simgrid::s4u::Engine::set_config("contexts/guard-size:0");
}

// Refuses a run whose workers need more memory than the host profile's GPU has.
void check_memory(const Platform& platform, const SimOptions& options) {
  const double has = platform.profile.memory_bytes;
  if (has <= 0 || options.memory_per_gpu_bytes <= has) return;
  throw UserError(options.scenario_source + ": the run needs " + options.memory_detail +
                  " per GPU, more than the " + format_bytes(static_cast<uint64_t>(has)) + " (" +
                  std::to_string(static_cast<uint64_t>(has)) + " bytes) of host profile " +
                  platform.profile.name + " (memory_bytes) on platform " + platform.name +
                  "; shard it (strategy.name = \"zero\"), lower batch_size or pick a GPU with "
                  "more memory");
}

}  // namespace

std::optional<Fidelity> parse_fidelity(std::string_view name) {
  return value_in(kFidelityNames, name);
}

SimStats run_on_platform(const Platform& platform, const SimOptions& options,
                         const WorkerMain& worker_main) {
  claim_process();
  SimWorld world(platform, options);
  std::vector<int> members(static_cast<size_t>(options.workers));
  std::iota(members.begin(), members.end(), 0);
  auto everyone = Group::create(world, std::move(members));

  start_faults(world);
  std::string deadlock;
  simgrid::s4u::Engine::on_deadlock_cb([&] { deadlock = world.describe_blocked(); });
  for (int i = 0; i < options.workers; ++i)
    simgrid::s4u::Actor::create(
        "worker-" + std::to_string(i), world.worker(i).host,
        [&world, &everyone, i, &worker_main] { worker_actor(world, everyone, i, worker_main); });

  const auto wall_start = std::chrono::steady_clock::now();
  simgrid::s4u::Engine::get_instance()->run();
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall_start;

  if (world.failed()) std::rethrow_exception(world.failure());
  if (!deadlock.empty()) throw SimDeadlock(deadlock);
  for (int i = 0; i < options.workers; ++i)
    if (!world.worker(i).finished && !world.worker(i).lost)
      throw SimDeadlock(world.describe_blocked());

  SimStats stats = world.stats();
  for (int i = 0; i < options.workers; ++i) {
    stats.activities += world.worker(i).sleeps;
    stats.modelled_events += world.worker(i).events;
  }
  stats.simulated_seconds = simgrid::s4u::Engine::get_clock();
  stats.losses = world.losses();
  stats.calibrated_under = platform.calibrated_under;
  stats.wall_seconds = wall.count();
  return stats;
}

SimStats run_simulation(const SimOptions& options, const WorkerMain& worker_main) {
  if (g_simulation_started) claim_process();  // throws
  EngineArgs args("syncopate", "warning");
  simgrid::s4u::Engine engine(args.argc(), args.argv());
  configure_actor_stacks(options.workers);
  configure_engine(engine, options.simgrid_config);
  const Platform platform =
      load_platform(engine, options.platform, options.platform_overrides, options.workers);
  check_memory(platform, options);
  return run_on_platform(platform, options, worker_main);
}

}  // namespace syncopate::sim
