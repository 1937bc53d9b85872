// Simulated faults: straggler windows, and the actors that turn hosts and links off or slow.
#include "backends/sim/sim_faults.hpp"

#include <algorithm>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <string>

#include "backends/sim/platform/platform.hpp"
#include "core/comm/fault_abort.hpp"

namespace syncopate::sim {
namespace {

namespace sg4 = simgrid::s4u;

bool is_link_fault(const SimFault& f) {
  return f.kind == FaultKind::kLinkFailure || f.kind == FaultKind::kLinkDegradation;
}

// Both directions of split-duplex link `name`, or the link of that name; empty if none.
std::vector<sg4::Link*> links_named(const std::string& name) {
  const sg4::Engine* engine = sg4::Engine::get_instance();
  sg4::Link* up = engine->link_by_name_or_null(name + "_UP");
  sg4::Link* down = engine->link_by_name_or_null(name + "_DOWN");
  if (up != nullptr && down != nullptr) return {up, down};
  if (sg4::Link* link = engine->link_by_name_or_null(name)) return {link};
  return {};
}

std::string without_direction(const std::string& name) {
  for (const std::string suffix : {"_UP", "_DOWN"})
    if (name.size() > suffix.size() && name.ends_with(suffix))
      return name.substr(0, name.size() - suffix.size());
  return name;
}

// The worker's NIC: the first link named "*nic*" on its route to a GPU of another node.
std::string nic_of(SimWorld& world, const SimFault& f) {
  const Platform& platform = world.platform();
  const int node = platform.node_of_gpu[static_cast<size_t>(f.worker)];
  for (size_t g = 0; g < platform.gpus.size(); ++g) {
    if (platform.node_of_gpu[g] == node) continue;
    std::vector<sg4::Link*> route;
    double latency = 0;
    world.worker(f.worker).host->route_to(platform.gpus[g], route, &latency);
    for (const sg4::Link* link : route)
      if (link->get_name().find("nic") != std::string::npos)
        return without_direction(link->get_name());
    break;
  }
  throw UserError(f.where + ".worker: worker " + std::to_string(f.worker) +
                  " has no NIC (no link named *nic* on a route to another node of platform " +
                  platform.name + "); allowed: name the link (link = \"...\")");
}

struct LinkFault {
  SimFault fault;
  std::string name;
  std::vector<sg4::Link*> links;
};

LinkFault resolve(SimWorld& world, const SimFault& f) {
  if (world.fidelity() == Fidelity::kAnalytic)
    throw UserError(f.where + ": " + std::string(to_string(f.kind)) +
                    " needs sim.fidelity = \"message\" or \"flow\" (the analytic fidelity "
                    "crosses no links); sim.fidelity is \"analytic\"");
  LinkFault out{f, f.link.empty() ? nic_of(world, f) : f.link, {}};
  out.links = links_named(out.name);
  if (out.links.empty())
    throw UserError(f.where + ".link: no link '" + out.name + "' on platform " +
                    world.platform().name + "; allowed: a link of the platform by name");
  return out;
}

void degrade_link(const LinkFault& lf) {
  sg4::this_actor::sleep_until(lf.fault.from_s);
  std::vector<double> bandwidths;
  for (sg4::Link* link : lf.links) {
    bandwidths.push_back(link->get_bandwidth());
    link->set_bandwidth(link->get_bandwidth() * lf.fault.factor);
  }
  sg4::this_actor::sleep_until(lf.fault.until_s);
  for (size_t i = 0; i < lf.links.size(); ++i) lf.links[i]->set_bandwidth(bandwidths[i]);
}

// Elastic runs: the worker is lost at the current date, or at the end of the merge it is in.
void lose_worker_at_fault(SimWorld& world, int worker, const char* kind) {
  WorkerState& w = world.worker(worker);
  if (w.finished || w.lost) return;  // a worker that finished its training loses nothing
  if (w.in_merge) {
    w.doomed = kind;
    return;
  }
  lose_worker_now(world, worker, kind);
}

void fail_link(SimWorld& world, const LinkFault& lf) {
  sg4::this_actor::sleep_until(lf.fault.from_s);
  if (world.options().elastic && lf.fault.link.empty())  // the worker's NIC: it is cut off
    lose_worker_at_fault(world, lf.fault.worker, "link_failure");
  world.links_down().push_back(lf.name);
  for (sg4::Link* link : lf.links) link->turn_off();
  sg4::this_actor::sleep_until(lf.fault.until_s);
  for (sg4::Link* link : lf.links) link->turn_on();
  std::erase(world.links_down(), lf.name);
}

// The job aborts at the failure: NCCL's watchdog tears the communicator down on every rank.
void fail_host(SimWorld& world, const SimFault& f) {
  sg4::this_actor::sleep_until(f.at_s);
  if (world.options().elastic) {
    lose_worker_at_fault(world, f.worker, "host_failure");
    return;
  }
  FaultRecord record{
      .kind = "host_failure", .worker = f.worker, .link = {}, .at_s = sg4::Engine::get_clock()};
  sg4::Host* host = world.worker(f.worker).host;
  world.record_failure(
      f.worker, std::make_exception_ptr(FaultAbort(
                    "sim: worker " + std::to_string(f.worker) + "'s host " + host->get_name() +
                        " failed at t=" + std::to_string(record.at_s) + " s (" + f.where +
                        "); the job aborts, as NCCL does, losing " +
                        std::to_string(record.lost_seconds()) + " s since the last checkpoint",
                    record)));
  if (sg4::this_actor::get_host() != host) host->turn_off();  // kills the actors on it
  sg4::Actor::kill_all();
  host->turn_off();
}

// A host for the fault actors that no host_failure turns off, if there is one.
sg4::Host* fault_actor_host(SimWorld& world) {
  if (world.platform().master != nullptr) return world.platform().master;
  for (int w = 0; w < world.num_workers(); ++w) {
    const auto& faults = world.options().faults;
    if (std::none_of(faults.begin(), faults.end(), [w](const SimFault& f) {
          return f.kind == FaultKind::kHostFailure && f.worker == w;
        }))
      return world.worker(w).host;
  }
  return world.worker(0).host;
}

}  // namespace

std::vector<SpeedWindow> straggler_windows(std::span<const SimFault> faults, int worker) {
  std::vector<SpeedWindow> windows;
  for (const SimFault& f : faults)
    if (f.kind == FaultKind::kStraggler && f.worker == worker)
      windows.push_back({f.from_s, f.until_s, f.factor});
  std::ranges::sort(windows, {}, &SpeedWindow::from_s);
  return windows;
}

double stretched_seconds(double start, double work, std::span<const SpeedWindow> windows) {
  double t = start;
  for (const SpeedWindow& w : windows) {
    if (w.until_s <= t) continue;
    if (w.from_s > t) {  // full speed until the window opens
      if (work <= w.from_s - t) break;
      work -= w.from_s - t;
      t = w.from_s;
    }
    const double capacity = (w.until_s - t) * w.factor;
    if (work <= capacity) return t - start + work / w.factor;
    work -= capacity;
    t = w.until_s;
  }
  return t == start ? work : t - start + work;  // untouched work keeps its exact duration
}

void start_faults(SimWorld& world) {
  sg4::Host* host = fault_actor_host(world);
  for (const SimFault& f : world.options().faults) {
    if (f.link.empty() && (f.worker < 0 || f.worker >= world.num_workers()))
      throw UserError(f.where + ".worker: " + std::to_string(f.worker) +
                      " does not exist; allowed: 0.." + std::to_string(world.num_workers() - 1));
    if (f.kind == FaultKind::kStraggler) continue;  // the executor's
    if (f.kind == FaultKind::kHostFailure) {
      sg4::Actor::create("fault-host", host, [&world, f] { fail_host(world, f); })->daemonize();
      continue;
    }
    SYNC_CHECK(is_link_fault(f), "kind " << to_string(f.kind));
    LinkFault lf = resolve(world, f);
    if (f.kind == FaultKind::kLinkFailure)
      sg4::Actor::create("fault-link", host, [&world, lf] { fail_link(world, lf); })->daemonize();
    else
      sg4::Actor::create("fault-link", host, [lf] { degrade_link(lf); })->daemonize();
  }
}

void lose_worker_now(SimWorld& world, int worker, const char* kind) {
  WorkerState& w = world.worker(worker);
  w.doomed = nullptr;
  const auto stop = [&w, kind] {
    if (std::string(kind) == "host_failure")
      w.host->turn_off();  // kills the actors there
    else if (w.actor != nullptr)
      w.actor->kill();
  };
  // The failed collectives are marked first, so that a transfer the stop makes fail is not
  // taken for a network failure; the worker is stopped before anyone wakes (a worker stopping
  // itself at the end of its merge waits in no collective: it wakes the others first).
  const bool self = simgrid::s4u::Actor::self() == w.actor;
  const std::vector<std::shared_ptr<Job>> failed = world.lose_worker(worker, kind);
  if (!self) stop();
  world.release(failed);
  if (self) stop();
}

std::exception_ptr fault_abort(SimWorld& world, int worker, const std::exception& cause) {
  FaultRecord record{
      .kind = "link_failure", .worker = -1, .link = {}, .at_s = sg4::Engine::get_clock()};
  std::string links;
  for (const std::string& name : world.links_down()) links += (links.empty() ? "" : ", ") + name;
  record.link = links;
  return std::make_exception_ptr(
      FaultAbort("sim: worker " + std::to_string(worker) +
                     ": a communication failed at t=" + std::to_string(record.at_s) + " s (" +
                     cause.what() + "; links down: " + (links.empty() ? "none" : links) +
                     "); the job aborts, as NCCL does, losing " +
                     std::to_string(record.lost_seconds()) + " s since the last checkpoint",
                 record));
}

}  // namespace syncopate::sim
