// An allreduce through the platform's master host: uploads, reduction on the master, downloads;
// and the Ethernet fetch of epoch_async's migrating global model.
#include "backends/sim/master_collective.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Link.hpp>
#include <string>
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

// Each way, the m members' messages of s bytes share the master's link of bandwidth B, which
// SimGrid's CM02 sees as B x bandwidth_factor(s) for each of them: m s / (B x factor), after the
// latency x latency_factor(s) and between a send and a receive overhead (one pair per
// direction, as the flows pay them).
double through_master_seconds(Group& group, size_t count) {
  simgrid::s4u::Host* master = group.world().platform().master;
  double latency = 0, bandwidth = 0;
  int on_network = 0;
  for (int r = 0; r < group.size(); ++r) {
    const LinkModel link = route_model(group.host(r), master);
    latency = std::max(latency, link.latency_s);
    if (group.host(r) == master) continue;
    bandwidth = bandwidth == 0 ? link.bandwidth_Bps : std::min(bandwidth, link.bandwidth_Bps);
    ++on_network;
  }
  const NetworkFactors& network = group.world().platform().network;
  const double message = 4.0 * static_cast<double>(count);
  double one_way = 0;
  if (bandwidth > 0) {
    one_way = network.overhead_s() + latency * factor_at(network.latency, message) +
              message * on_network / (bandwidth * factor_at(network.bandwidth, message));
  }
  return 2 * one_way + reduction_seconds(group, group.world(), count);
}

void run_through_master_as_flows(Group& group, size_t count) {
  SimWorld& world = group.world();
  simgrid::s4u::Host* master = world.platform().master;
  const uint64_t bytes = 4 * static_cast<uint64_t>(count);
  std::vector<simgrid::s4u::CommPtr> flows;
  const NetworkFactors& network = world.platform().network;
  const auto pay = [&](double seconds) {  // every member at once
    if (seconds <= 0) return;
    simgrid::s4u::this_actor::sleep_for(seconds);
    ++world.stats().activities;
  };
  const auto all_at_once = [&](bool up) {
    pay(network.send_overhead_s);
    flows.clear();
    for (int r = 0; r < group.size(); ++r) {
      if (group.host(r) == master) continue;  // a host's own memory: not on the network
      flows.push_back(up ? simgrid::s4u::Comm::sendto_async(group.host(r), master, bytes)
                         : simgrid::s4u::Comm::sendto_async(master, group.host(r), bytes));
    }
    world.stats().comms += flows.size();
    world.stats().activities += flows.size();
    wait_or_cancel(flows);  // a failed flow (a fault) cancels the others and rethrows
    pay(network.recv_overhead_s);
  };
  all_at_once(true);
  const double reduce = reduction_seconds(group, world, count);
  if (reduce > 0) {
    simgrid::s4u::this_actor::sleep_for(reduce);
    ++world.stats().activities;
  }
  all_at_once(false);
}

namespace {

std::string node_of(const simgrid::s4u::Host* host) {
  const char* node = host->get_property("node");
  return node != nullptr ? node : "0";
}

// The smallest bandwidth among the links of `route` that `other` does not hold (+infinity if none).
double own_links_bandwidth(const std::vector<simgrid::s4u::Link*>& route,
                           const std::vector<simgrid::s4u::Link*>& other) {
  double bandwidth = std::numeric_limits<double>::infinity();
  for (const simgrid::s4u::Link* link : route)
    if (std::find(other.begin(), other.end(), link) == other.end())
      bandwidth = std::min(bandwidth, link->get_bandwidth());
  return bandwidth;
}

}  // namespace

double ethernet_fetch_seconds(const SimWorld& world, simgrid::s4u::Host* holder,
                              simgrid::s4u::Host* merger, uint64_t bytes) {
  simgrid::s4u::Host* master = world.platform().master;
  if (master == nullptr || holder == merger || node_of(holder) == node_of(merger)) return -1;
  std::vector<simgrid::s4u::Link*> up, down;
  double up_latency = 0, down_latency = 0;
  holder->route_to(master, up, &up_latency);
  merger->route_to(master, down, &down_latency);
  double bandwidth = std::min(own_links_bandwidth(up, down), own_links_bandwidth(down, up));
  if (!std::isfinite(bandwidth)) bandwidth = route_model(holder, master).bandwidth_Bps;
  SYNC_CHECK(bandwidth > 0 && std::isfinite(bandwidth),
             "Ethernet bandwidth " << bandwidth << " from " << holder->get_name());
  return message_seconds(world.platform().network, std::max(up_latency, down_latency), bandwidth,
                         static_cast<double>(bytes));
}

}  // namespace syncopate::sim
