// SimWorld: state shared by every actor (workers and their clocks, fast-forward votes, failures).
#include "backends/sim/sim_world.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <sstream>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/sim_group.hpp"
#include "core/base/rng.hpp"

namespace syncopate::sim {

SimEvent::SimEvent() : semaphore_(simgrid::s4u::Semaphore::create(0)) {}

void SimEvent::wait() {
  if (fired_) return;
  ++waiters_;
  semaphore_->acquire();
}

void SimEvent::fire() {
  if (fired_) return;
  // Marked last: an actor killed while it releases (its simcall throws) leaves the rest to the
  // next fire() (Job::release after a lost member).
  for (; waiters_ > 0; --waiters_) semaphore_->release();
  fired_ = true;
}

namespace {

// The standard normal quantile: Phi(z) = p, by bisection on erfc (to double precision).
double normal_quantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

std::vector<double> worker_speed_factors(int workers, double spread, uint64_t seed) {
  std::vector<double> factors(static_cast<size_t>(std::max(workers, 0)), 1.0);
  if (workers < 2 || spread <= 0) return factors;
  // Blom's scores: the expected order statistics of `workers` standard normal draws, to within
  // a few percent, symmetric about 0 (the factors' log has mean 0).
  std::vector<int> order(static_cast<size_t>(workers));
  std::iota(order.begin(), order.end(), 0);
  Rng({.seed = seed, .purpose = RngPurpose::kWorkerSpeed}).shuffle(order.data(), order.size());
  for (int i = 0; i < workers; ++i) {
    const double z = normal_quantile((order[size_t(i)] + 1 - 0.375) / (workers + 0.25));
    factors[size_t(i)] = std::exp(spread * z);
  }
  return factors;
}

void WorkerState::flush() {
  if (lag > 0) {
    ++sleeps;
    simgrid::s4u::this_actor::sleep_for(lag);
  }
  lag = 0;
}

double WorkerState::now() const { return simgrid::s4u::Engine::get_clock() + lag; }

SimWorld::SimWorld(const Platform& platform, const SimOptions& options)
    : platform_(platform), options_(options) {
  if (options.workers < 1)
    throw UserError("sim: workers: " + std::to_string(options.workers) + "; allowed: >= 1");
  if (static_cast<size_t>(options.workers) > platform.gpus.size())
    throw UserError("sim: workers: " + std::to_string(options.workers) + " but platform '" +
                    platform.name + "' has " + std::to_string(platform.gpus.size()) +
                    " GPUs; allowed: at most one worker per GPU");
  SYNC_CHECK(platform.node_of_gpu.size() == platform.gpus.size(),
             "node_of_gpu " << platform.node_of_gpu.size() << " gpus " << platform.gpus.size());
  own_clocks_ = options.fidelity == Fidelity::kAnalytic && options.cost_only &&
                options.noise.kind != NoiseKind::kNone &&
                std::ranges::all_of(options.faults, [](const SimFault& f) {
                  return f.kind == FaultKind::kStraggler;
                });
  workers_.resize(static_cast<size_t>(options.workers));
  live_ = options.workers;
  for (int i = 0; i < options.workers; ++i) {
    WorkerState& w = workers_[static_cast<size_t>(i)];
    w.id = i;
    w.host = platform.gpus[static_cast<size_t>(i)];
  }
  if (platform.cores_per_node > 0) {  // workers time-sharing their node's cores
    std::map<int, int> on_node;
    for (int i = 0; i < options.workers; ++i) ++on_node[platform.node_of_gpu[size_t(i)]];
    for (int i = 0; i < options.workers; ++i) {
      const int sharing = on_node[platform.node_of_gpu[size_t(i)]];
      WorkerState& w = workers_[size_t(i)];
      w.core_share = std::max(1.0, static_cast<double>(sharing) / platform.cores_per_node);
      w.slowdown = w.core_share;
    }
  }
  const std::vector<double> speeds =
      worker_speed_factors(options.workers, platform.profile.worker_spread, options.noise.seed);
  for (int i = 0; i < options.workers; ++i) workers_[size_t(i)].slowdown *= speeds[size_t(i)];
  for (const auto& [worker, factor] : options.slowdown) {
    if (worker < 0 || worker >= options.workers)
      throw UserError("sim: slowdown: worker " + std::to_string(worker) +
                      " does not exist; allowed: 0.." + std::to_string(options.workers - 1));
    if (!(factor > 0))
      throw UserError("sim: slowdown: worker " + std::to_string(worker) + " factor " +
                      std::to_string(factor) + "; allowed: > 0");
    workers_[static_cast<size_t>(worker)].slowdown *= factor;
  }
}

bool SimWorld::all_agree(int id, bool vote) {
  WorkerState& me = worker(id);
  // The worker keeps its own clock: early arrivers wait in wall order only; afterwards their
  // lag is set so that their clock reads what it read on arrival.
  const double arrival = me.now();
  if (!agreement_) {
    auto created = std::make_shared<Agreement>();
    created->done = std::make_shared<SimEvent>();  // may let other actors run
    created->voted.assign(workers_.size(), 0);
    if (!agreement_) agreement_ = std::move(created);
  }
  const std::shared_ptr<Agreement> agreement = agreement_;
  agreement->all_yes = agreement->all_yes && vote;
  agreement->voted[static_cast<size_t>(id)] = 1;
  ++agreement->arrived;
  ++agreement->live_votes;  // a lost worker votes no more
  resolve_agreement();
  if (!agreement->done->fired()) {
    BlockedScope scope(me, BlockedOn{.operation = "all_agree"});
    agreement->done->wait();
  }
  me.lag = arrival - simgrid::s4u::Engine::get_clock();
  return agreement->result;
}

// Releases the open agreement once every live worker voted (O(1): a vote is counted once, and
// taken back when its worker is lost).
void SimWorld::resolve_agreement() {
  if (!agreement_ || agreement_->live_votes < live_) return;
  const std::shared_ptr<Agreement> agreement = std::move(agreement_);
  agreement->result = agreement->all_yes;
  agreement->done->fire();
}

std::vector<std::shared_ptr<Job>> SimWorld::lose_worker(int id, const std::string& kind) {
  WorkerState& lost = worker(id);
  if (lost.lost) return {};
  lost.lost = true;
  --live_;
  if (agreement_ && agreement_->voted[static_cast<size_t>(id)]) --agreement_->live_votes;
  losses_.push_back({.worker = id, .at_s = simgrid::s4u::Engine::get_clock(), .kind = kind});
  std::vector<std::shared_ptr<Job>> failed;
  std::erase_if(groups_, [](const std::weak_ptr<Group>& g) { return g.expired(); });
  for (const std::weak_ptr<Group>& weak : groups_) {
    const std::vector<std::shared_ptr<Job>> jobs = weak.lock()->lose_member(id);
    failed.insert(failed.end(), jobs.begin(), jobs.end());
  }
  return failed;
}

void SimWorld::release(std::span<const std::shared_ptr<Job>> failed) {
  for (const std::shared_ptr<Job>& job : failed) job->release();
  resolve_agreement();
}

void SimWorld::record_failure(int worker, std::exception_ptr error) {
  if (failure_) return;
  failure_ = std::move(error);
  failed_worker_ = worker;
}

namespace {
void describe(std::ostream& out, const BlockedOn& b) {
  out << b.operation;
  if (b.seq > 0) out << " #" << b.seq;
  if (b.count > 0) out << " of " << b.count << " floats";
  if (b.round >= 0) out << ", round " << b.round;
  if (b.peer >= 0) out << ", peer rank " << b.peer;
  if (b.group >= 0) out << ", communicator " << b.group;
  if (b.arrived != nullptr && b.members != nullptr) {
    out << "; not yet called by worker(s)";
    for (size_t r = 0; r < b.arrived->size(); ++r)
      if (!(*b.arrived)[r]) out << ' ' << (*b.members)[r];
  }
}
}  // namespace

std::string SimWorld::describe_blocked() const {
  std::ostringstream out;
  out << "simulated deadlock at t=" << simgrid::s4u::Engine::get_clock() << " s:";
  for (const WorkerState& w : workers_) {
    if (w.finished || !w.started || w.lost) continue;
    out << "\n  worker " << w.id << " (" << w.host->get_name() << "): ";
    if (w.blocked.operation == nullptr) {
      out << "blocked outside the communicator";
      continue;
    }
    describe(out, w.blocked);
    if (w.in_flight.operation != nullptr) {
      out << "; its asynchronous collective is in ";
      describe(out, w.in_flight);
    }
  }
  return out.str();
}

}  // namespace syncopate::sim
