#pragma once
// The paper's aggregation on a platform with a master host: every member sends its buffer to the
// master over its route (the master's Ethernet link, shared by all uploads), the master reduces
// them, and sends the result back. Algorithm::kMaster runs this way whenever the platform has a
// master; without one, rank 0 plays the master over the fabric (the plain kMaster schedule).
// The arithmetic is the kMaster schedule's either way, so results do not depend on the platform.
#include <cstddef>
#include <cstdint>

#include "backends/sim/sim_group.hpp"

namespace syncopate::sim {

// Whether the collective of `entry` runs through the platform's master host (an allreduce of
// kMaster over more than one member).
bool runs_through_master(const SimWorld& world, const CachedSchedule& entry);

// Analytic fidelity: the slowest upload's latency plus every member's bytes over the
// narrowest route bandwidth to the master (they share the master's link), the reduction on the
// master, then the same back; with the platform's [network] terms as the flows have them.
double through_master_seconds(Group& group, size_t count);

// Flow and message fidelity: the uploads as concurrent flows, the reduction, the downloads as
// concurrent flows, in the calling actor.
void run_through_master_as_flows(Group& group, size_t count);

// epoch_async's migrating global model (strategy.global_model = "migrating"): the merging worker
// fetches the model from `holder`, the host of the worker that merged last. Across nodes of a
// platform with a master host, the fetch goes over the two nodes' Ethernet NICs (the paper's
// runtime moved its files over Ethernet): the route's latency to the master (GPU to master, end
// to end) plus the bytes over the narrower of the two nodes' own Ethernet links (the links of
// their routes to the master that the two routes do not share). Merges are exclusive, so these
// links carry one model at a time: the fetch is this closed form at every fidelity. Returns the
// seconds, or a negative value where the fetch takes the ordinary route between the two hosts
// (one node, or no master host: NVLink or the fabric). With the [network] terms of one message.
double ethernet_fetch_seconds(const SimWorld& world, simgrid::s4u::Host* holder,
                              simgrid::s4u::Host* merger, uint64_t bytes);

}  // namespace syncopate::sim
