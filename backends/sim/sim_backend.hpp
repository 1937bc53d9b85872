#pragma once
// The SimGrid runtime: one S4U actor per worker, each running the same WorkerMain (the training
// code) against a SimCommunicator and a SimExecutor.
//
// Time model (see sim_executor.hpp and sim_communicator.hpp for details):
//   - compute advances the worker's simulated clock by max(flops / speed, bytes / memory bw)
//     times its slowdown (its node's time-sharing of cores, its straggler factor); each step
//     begins with the profile's step overhead (idle
//     time, outside the compute);
//   - collectives run the core schedules (core/comm/collective_schedule.hpp) at one of three
//     fidelities: kMessage (every message is a SimGrid comm between the ranks' actors), kFlow
//     (every round of the schedule is a set of concurrent host-to-host flows), kAnalytic (every
//     round costs max over its messages of alpha + bytes / B of its route, no flows);
//   - the collectives of one communicator run one at a time in issue order (like one NCCL
//     stream); an asynchronous one progresses while its workers compute;
//   - at kFlow and kAnalytic a collective starts when its last member issued it; at kMessage
//     each message starts when both its ends posted it, so early members may already exchange;
//   - Executor::all_agree is a consensus of all workers of the simulation that leaves every
//     worker's clock unchanged (its wait is absorbed by the worker's next compute); every worker
//     must reach it (a worker that returned cannot vote: a deadlock).
// In cost-only mode the spans given to the communicator are never read or written, only their
// sizes count: workers may share one scratch buffer.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/check.hpp"
#include "core/comm/comm.hpp"
#include "core/scenario/choices.hpp"

namespace syncopate::sim {

struct Platform;

using syncopate::Fidelity;  // the scenario's sim.fidelity (core/scenario/choices.hpp)
std::optional<Fidelity> parse_fidelity(std::string_view name);  // "message", "flow", "analytic"

struct SimOptions {
  std::string platform = "mn5-acc";
  std::map<std::string, std::string> platform_overrides;
  int workers = 1;
  Fidelity fidelity = Fidelity::kMessage;
  bool cost_only = false;                   // Executor::cost_only(): no math, time only
  std::map<int, double> slowdown;           // worker -> compute-time multiplier (stragglers)
  ComputeNoise noise;                       // per-step compute noise (sim_executor.hpp)
  std::vector<SimFault> faults;             // [[sim.faults]] (sim_faults.hpp)
  std::vector<std::string> simgrid_config;  // extra "key:value" for the engine
  // What one worker needs (bytes, and the figures in words, core/train/memory.hpp); refused
  // when the host profile gives a smaller memory_bytes. 0: not checked.
  double memory_per_gpu_bytes = 0;
  std::string memory_detail;
  std::string scenario_source;  // names the scenario in that refusal
  // epoch_sync and epoch_async: a worker lost to a host_failure (or to a link_failure of its
  // NIC) leaves the job and the survivors go on (sim_faults.hpp); otherwise the job aborts.
  bool elastic = false;
};

// A worker that an elastic job lost: who, when (simulated seconds) and by which fault kind.
struct WorkerLoss {
  int worker = -1;
  double at_s = 0;
  std::string kind;  // "host_failure" or "link_failure"
};

struct SimStats {
  double simulated_seconds = 0;  // simulated date at which the last worker finished
  double wall_seconds = 0;       // wall time of the simulation (engine run)
  uint64_t comms = 0;            // simulated point-to-point transfers and flows (SimGrid comms)
  uint64_t activities = 0;       // every SimGrid activity started: comms + sleeps
  uint64_t messages = 0;         // point-to-point messages the collectives stand for, at any
                                 // fidelity (== the comms they cost at kMessage)
  uint64_t modelled_events = 0;  // what the workers had modelled: computes accounted and
                                 // collectives issued, summed over workers

  std::vector<WorkerLoss> losses;  // elastic runs: the workers lost, in order
  // The platform's [calibrated_under] settings (Platform::calibrated_under).
  std::vector<std::pair<std::string, bool>> calibrated_under;
};

// A simulated deadlock: every remaining worker is blocked forever. The message names each
// blocked worker and what it waits on.
class SimDeadlock : public UserError {
 public:
  using UserError::UserError;
};

using WorkerMain = std::function<void(Communicator& comm, Executor& exec)>;

// Creates the engine, configures it (CM02, no cross-traffic, raised TCP-gamma, plus
// options.simgrid_config), loads options.platform, starts one actor per worker on
// platform.gpus[i] running worker_main, and runs to completion. The first exception thrown by
// a worker_main is rethrown here (the other actors are killed). A simulated deadlock throws
// SimDeadlock. SimGrid cannot be reset: call at most once per process.
SimStats run_simulation(const SimOptions& options, const WorkerMain& worker_main);

// Lower level, for tests and benchmarks that build their own platform: the engine must already
// exist and be configured, the platform sealed. options.platform and platform_overrides are
// ignored; options.workers <= platform.gpus.size(). Also once per process.
SimStats run_on_platform(const Platform& platform, const SimOptions& options,
                         const WorkerMain& worker_main);

}  // namespace syncopate::sim
