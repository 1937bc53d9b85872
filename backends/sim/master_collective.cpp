// An allreduce through the platform's master host: uploads, reduction on the master, downloads.
#include "backends/sim/master_collective.hpp"

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <vector>

#include "backends/sim/sim_executor.hpp"

namespace syncopate::sim {
namespace {

// The master's sum of the members' buffers: (p - 1) additions of n floats.
double reduction_seconds(const Group& group, SimWorld& world, size_t count) {
  const double n = static_cast<double>(count);
  const double others = static_cast<double>(group.size() - 1);
  return compute_seconds(
      world.platform().profile,
      Cost{.flops = others * n, .bytes = 4 * (others + 2) * n, .kind = OpKind::kElementwise});
}

}  // namespace

bool runs_through_master(const SimWorld& world, const CachedSchedule& entry) {
  return entry.algorithm == Algorithm::kMaster && entry.key.kind == CollectiveKind::kAllreduce &&
         world.platform().master != nullptr && entry.traffic.size() > 1;
}

double through_master_seconds(Group& group, size_t count) {
  simgrid::s4u::Host* master = group.world().platform().master;
  double latency = 0, bandwidth = 0;
  for (int r = 0; r < group.size(); ++r) {
    const LinkModel link = route_model(group.host(r), master);
    latency = std::max(latency, link.latency_s);
    if (group.host(r) != master)
      bandwidth = bandwidth == 0 ? link.bandwidth_Bps : std::min(bandwidth, link.bandwidth_Bps);
  }
  const double bytes = 4.0 * static_cast<double>(count) * group.size();
  const double one_way = bandwidth > 0 ? latency + bytes / bandwidth : 0;
  return 2 * one_way + reduction_seconds(group, group.world(), count);
}

void run_through_master_as_flows(Group& group, size_t count) {
  SimWorld& world = group.world();
  simgrid::s4u::Host* master = world.platform().master;
  const uint64_t bytes = 4 * static_cast<uint64_t>(count);
  std::vector<simgrid::s4u::CommPtr> flows;
  const auto all_at_once = [&](bool up) {
    flows.clear();
    for (int r = 0; r < group.size(); ++r) {
      if (group.host(r) == master) continue;  // a host's own memory: not on the network
      flows.push_back(up ? simgrid::s4u::Comm::sendto_async(group.host(r), master, bytes)
                         : simgrid::s4u::Comm::sendto_async(master, group.host(r), bytes));
    }
    world.stats().comms += flows.size();
    world.stats().activities += flows.size();
    for (const auto& flow : flows) flow->wait();
  };
  all_at_once(true);
  const double reduce = reduction_seconds(group, world, count);
  if (reduce > 0) {
    simgrid::s4u::this_actor::sleep_for(reduce);
    ++world.stats().activities;
  }
  all_at_once(false);
}

}  // namespace syncopate::sim
