#pragma once
// Shared state of one simulation (internal to backends/sim): the platform, the per-worker
// clocks, statistics, failure and deadlock bookkeeping. All actors run in one OS thread
// (SimGrid's sequential contexts), so plain data shared between them needs no locking; only
// blocking goes through SimGrid primitives.
#include <cstdint>
#include <exception>
#include <memory>
#include <simgrid/s4u/Semaphore.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "backends/sim/sim_backend.hpp"

namespace simgrid::s4u {
class Actor;
class Host;
}  // namespace simgrid::s4u

namespace syncopate::sim {

// Streams parts into a string (names of actors and mailboxes).
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// map[key], created by make() if absent. make() may block in SimGrid (a simcall lets other
// actors run): an entry another actor inserted meanwhile wins. Never hold a reference into
// shared state across a SimGrid call.
template <typename Map, typename Make>
typename Map::mapped_type& find_or_create(Map& map, const typename Map::key_type& key,
                                          Make&& make) {
  if (auto it = map.find(key); it != map.end()) return it->second;
  auto value = make();
  return map.try_emplace(key, std::move(value)).first->second;
}

// A one-shot event: wait() blocks the calling actor until fire(). No lost wake-ups: a release
// counted on the semaphore before the waiter's acquire is processed is kept.
class SimEvent {
 public:
  SimEvent();
  bool fired() const { return fired_; }
  void wait();
  void fire();

 private:
  simgrid::s4u::SemaphorePtr semaphore_;
  bool fired_ = false;
  int waiters_ = 0;
};

// What a worker is blocked on, formatted only when a deadlock is reported.
struct BlockedOn {
  const char* operation = nullptr;  // nullptr: not blocked
  int group = -1;                   // communicator id
  int peer = -1;                    // group rank of the peer (send/recv), or -1
  size_t count = 0;                 // floats
  uint64_t seq = 0;                 // 1-based collective number in its group (0: none)
  int round = -1;                   // schedule round being waited on, or -1
  // For rendezvous collectives: which group ranks have arrived (nullptr otherwise).
  const std::vector<char>* arrived = nullptr;
  const std::vector<int>* members = nullptr;  // group rank -> worker
};

// Each worker's compute-time factor among `workers` of unequal speed (HostProfile::
// worker_spread): exp(spread x z), z the worker's normal score (Blom's approximation of the
// expected order statistics of `workers` standard normal draws), dealt to the workers in an
// order drawn from `seed` (sim.noise.seed). All 1 for one worker or no spread.
std::vector<double> worker_speed_factors(int workers, double spread, uint64_t seed);

struct WorkerState {
  int id = 0;
  simgrid::s4u::Host* host = nullptr;
  // Compute-time multiplier: its node's time-sharing (Platform::cores_per_node) times its speed
  // among unequal workers (worker_speed_factors) times its straggler factor
  // (SimOptions::slowdown).
  double slowdown = 1;
  // Its node's time-sharing alone: workers / cores_per_node where workers outnumber the cores,
  // else 1. A collective's local passes (Group::cpu_seconds) are stretched by it as compute is.
  double core_share = 1;
  // Simulated time this worker has accounted but not yet slept (compute is lazy: it only adds
  // here). Its own clock is Engine clock + lag. Negative after a zero-time all_agree that
  // resolved later than the worker arrived; flush() then moves it forward to the engine clock.
  double lag = 0;
  uint64_t sleeps = 0;  // SimGrid sleeps flush() started (added to SimStats::activities)
  uint64_t events = 0;  // computes and collectives (added to SimStats::modelled_events)
  bool started = false;
  bool finished = false;
  bool lost = false;             // elastic: the job lost this worker (its host or NIC failed)
  bool in_merge = false;         // holds the shared model's lock (a failure waits for it)
  const char* doomed = nullptr;  // the fault kind that came during the merge: lost at its end
  simgrid::s4u::Actor* actor = nullptr;
  BlockedOn blocked;
  BlockedOn in_flight;  // message fidelity: the step an asynchronous collective's helper waits on

  // Sleeps the pending lag so that the engine clock equals this worker's clock. Called before
  // every interaction with other actors.
  void flush();
  double now() const;
};

// Sets a worker's BlockedOn for the lifetime of a blocking call.
class BlockedScope {
 public:
  BlockedScope(WorkerState& worker, const BlockedOn& what) : worker_(worker) {
    worker_.blocked = what;
  }
  ~BlockedScope() { worker_.blocked = {}; }
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;

 private:
  WorkerState& worker_;
};

class Group;
struct Job;

class SimWorld {
 public:
  SimWorld(const Platform& platform, const SimOptions& options);

  const Platform& platform() const { return platform_; }
  const SimOptions& options() const { return options_; }
  bool emulate() const { return !options_.cost_only; }
  Fidelity fidelity() const { return options_.fidelity; }
  // Coarse collectives take their dates from the members' own clocks (WorkerState::now): a
  // member arrives and leaves without sleeping, so its clock stays pending time and most steps
  // cost no SimGrid activity at all. Valid where no date needs the engine clock: analytic
  // fidelity (no flows), cost-only (no arithmetic at the launch), no [[sim.faults]] but
  // stragglers (the others act at engine dates). The dates are the same up to rounding (the
  // engine adds its clock up event by event: they differ in the last bits, 3e-13 relative
  // measured), so it is taken where every step must be simulated anyway: with per-step
  // compute noise (nothing to fast-forward). Runs without noise keep their figures bit for bit.
  bool collectives_on_own_clocks() const { return own_clocks_; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  WorkerState& worker(int id) { return workers_[static_cast<size_t>(id)]; }
  SimStats& stats() { return stats_; }
  int next_group_id() { return next_group_id_++; }

  // Zero-simulated-time consensus of all live workers (Executor::all_agree).
  bool all_agree(int worker, bool vote);

  // Elastic runs: marks `worker` lost at the current date by a fault of `kind`, and fails the
  // collectives of every group holding it (Group::lose_member; no SimGrid call). The caller
  // stops the worker's actor and then calls release(): the survivors waiting on those
  // collectives (at message fidelity, their helper actors stopped first: Job::release), or in
  // all_agree, go on (and retry on the live members).
  std::vector<std::shared_ptr<Job>> lose_worker(int worker, const std::string& kind);
  void release(std::span<const std::shared_ptr<Job>> failed);
  bool alive(int worker) const { return !workers_[static_cast<size_t>(worker)].lost; }
  int live_workers() const { return live_; }
  const std::vector<WorkerLoss>& losses() const { return losses_; }
  // Every group of the simulation (Group::create).
  std::vector<std::weak_ptr<Group>>& groups() { return groups_; }

  // The first failure is kept and rethrown by run_on_platform.
  void record_failure(int worker, std::exception_ptr error);
  bool failed() const { return static_cast<bool>(failure_); }
  std::exception_ptr failure() const { return failure_; }

  // Names of the links a link_failure holds off now (sim_faults.cpp).
  std::vector<std::string>& links_down() { return links_down_; }

  // Description of every unfinished worker and what it waits on.
  std::string describe_blocked() const;

 private:
  struct Agreement {
    std::vector<char> voted;  // per worker
    int arrived = 0;
    int live_votes = 0;  // the votes of workers not lost
    bool all_yes = true;
    bool result = false;
    std::shared_ptr<SimEvent> done;
  };

  const Platform& platform_;
  SimOptions options_;
  bool own_clocks_ = false;
  std::vector<WorkerState> workers_;
  int live_ = 0;  // workers not lost
  SimStats stats_;
  int next_group_id_ = 0;
  std::shared_ptr<Agreement> agreement_;
  std::exception_ptr failure_;
  int failed_worker_ = -1;
  std::vector<std::string> links_down_;
  std::vector<WorkerLoss> losses_;
  std::vector<std::weak_ptr<Group>> groups_;

  void resolve_agreement();
};

}  // namespace syncopate::sim
