#pragma once
// The faults of [[sim.faults]] on the simulated platform, built on SimGrid's own state
// machinery (internal to backends/sim):
//   - host_failure: at at_s, Host::turn_off() on the worker's GPU host (SimGrid kills the
//     actors there). The job aborts as a real NCCL job would (FaultAbort, core/comm/
//     fault_abort.hpp): the run ends at at_s and the time since the last checkpoint is lost.
//   - link_failure: Link::turn_off() over [from_s, until_s), then turn_on(). A communication
//     crossing the link meanwhile fails with SimGrid's NetworkFailureException, which aborts the
//     job the same way (NCCL does not retry a failed transfer); one that crosses none is
//     untouched.
//   - link_degradation: Link::set_bandwidth(bandwidth x factor) over the interval (both
//     directions of a split-duplex link), then the bandwidth is restored; flows in progress
//     share the new bandwidth from that instant (SimGrid re-solves the network).
//   - straggler: the worker's compute runs at `factor` times its speed over the interval. The
//     executor accounts compute lazily (no SimGrid Exec activities: sim_executor.hpp), so the
//     speed profile is applied by stretched_seconds() below, exactly as a host speed profile
//     would stretch an execution that crosses the interval.
// Elastic runs (SimOptions::elastic: epoch_sync and epoch_async) do not abort on a
// host_failure, nor on a link_failure of a worker's NIC (`worker`, no `link`): the job loses the
// worker (SimWorld::lose_worker): its host is turned off (a NIC failure kills its actor, which
// can no longer reach anyone), every collective waiting for it fails with MemberLost, and the
// survivors retry their allreduce on the live members (SimCommunicator). A worker inside its
// epoch_async merge holds the shared model's lock: it is lost when the merge ends. A
// link_failure of a named link still aborts. Every other strategy aborts.
// Link faults name a link of the platform (`link`, a split-duplex name meaning both directions)
// or a worker's NIC: the first link named "*nic*" on its route to a GPU of another node. They
// need the message or flow fidelity (the analytic one crosses no links): refused otherwise.
#include <span>
#include <vector>

#include "backends/sim/sim_world.hpp"

namespace syncopate::sim {

// Compute speed `factor` over [from_s, until_s) of simulated time.
struct SpeedWindow {
  double from_s = 0, until_s = 0, factor = 1;
};

// The stragglers of `worker` among `faults`, sorted by start (they do not overlap).
std::vector<SpeedWindow> straggler_windows(std::span<const SimFault> faults, int worker);

// Seconds that `work` seconds of compute at full speed take when started at `start`.
double stretched_seconds(double start, double work, std::span<const SpeedWindow> windows);

// Checks the link faults against the platform (UserError naming the fault's file:line) and
// starts one daemon actor per host or link fault. Called before the engine runs.
void start_faults(SimWorld& world);

// Elastic runs: the job loses `worker` now, by a fault of `kind` ("host_failure" turns its
// host off, "link_failure" kills its actor). Called by the fault actors, or by the worker itself
// at the end of a merge during which the fault came.
void lose_worker_now(SimWorld& world, int worker, const char* kind);

// The FaultAbort that a SimGrid network or host failure seen by `worker` becomes.
std::exception_ptr fault_abort(SimWorld& world, int worker, const std::exception& cause);

}  // namespace syncopate::sim
