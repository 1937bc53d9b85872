#pragma once
// A group of workers sharing a communicator (the world, or a split of it), internal to
// backends/sim. It is shared by the group's SimCommunicators (one per member actor) and holds
// what they coordinate through: the schedule cache, mailboxes, the rendezvous of coarse-fidelity
// collectives, control rendezvous (split, create_shared_model) and the shared models.
#include <map>
#include <memory>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Mailbox.hpp>
#include <simgrid/s4u/Mutex.hpp>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/sim_world.hpp"
#include "core/base/function_ref.hpp"
#include "core/comm/collective_schedule.hpp"
#include "core/comm/schedule_cache.hpp"

namespace syncopate::sim {

// One collective call as every member must issue it.
struct CollCall {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  Algorithm algorithm = Algorithm::kAuto;  // resolved by the schedule cache's key
  size_t count = 0;
  int root = 0;
  ReduceOp op = ReduceOp::kSum;
  WireFormat wire = WireFormat::kFp32;  // allreduce, allgather and reduce_scatter
  bool operator==(const CollCall&) const = default;
};

// A collective that lost a member (elastic runs: SimWorld::lose_worker): the survivors retry
// it on the live members (Group::survivors).
class MemberLost : public PeerFailure {
 public:
  using PeerFailure::PeerFailure;
};

// kMessage: one rank's asynchronous collective, run by a helper actor.
struct RankJob {
  SimEvent done;
  std::exception_ptr error;
  double end_time = 0;  // simulated date at which this rank's part completed
};

// A coarse-fidelity (flow or analytic) collective: members arrive, the last one launches it.
// At kMessage in elastic runs, the collective that the members' helper actors run step by step
// (Group::begin_part).
struct Job {
  CollCall call;
  uint64_t seq = 0;
  const CachedSchedule* entry = nullptr;
  std::shared_ptr<const Schedule> schedule;
  std::vector<std::span<float>> buffers;  // per rank (emulation)
  std::vector<char> arrived;
  int num_arrived = 0;
  SimEvent done;
  double last_arrival = 0;  // the latest of the members' clocks when they arrived
  double end_time = 0;      // simulated date at which every member completes
  std::exception_ptr error;
  bool abandoned = false;  // a member was lost in flight: the buffers are no longer touched
  // kMessage, elastic runs: per rank, its helper actor and what it reports to (num_arrived counts
  // the members whose steps are done), and every segment sent, kept until the job ends rather
  // than handed to the receiver, since a lost collective stops its members wherever they are.
  std::vector<aid_t> helpers;
  std::vector<std::shared_ptr<RankJob>> parts;
  std::vector<std::unique_ptr<std::vector<float>>> sent;

  // Wakes the members of a job that lost one (after the lost worker stopped): at kMessage, each
  // live helper actor is stopped and its part fails with `error`.
  void release();
};

// The shared model of epoch_async (one per create_shared_model call).
struct GlobalModel {
  GlobalModelPlacement placement = GlobalModelPlacement::kMaster;
  simgrid::s4u::Host* owner = nullptr;  // kMigrating: the host of the worker that merged last
  std::vector<float> data;
  size_t count = 0;
  simgrid::s4u::MutexPtr mutex;  // FIFO: merges run one at a time in arrival order
};

// A control rendezvous (split, create_shared_model): zero-cost, everyone leaves when the last
// arrives.
struct ControlSlot {
  std::vector<int> a, b;                      // per rank: e.g. color, key
  std::vector<std::span<const float>> spans;  // per rank
  std::vector<char> arrived;
  int num_arrived = 0;
  SimEvent done;
  std::vector<std::shared_ptr<class Group>> groups;  // per rank result (split)
  std::vector<int> new_rank;
  std::shared_ptr<GlobalModel> shared_model;  // create_shared_model's result
  std::exception_ptr error;                   // set by on_last: every member throws it
};

enum class Channel { kCollective, kPointToPoint };

class Group : public std::enable_shared_from_this<Group> {
 public:
  Group(SimWorld& world, std::vector<int> members);
  // A group registered with the world (SimWorld::groups), so that a lost worker's collectives
  // can be failed.
  static std::shared_ptr<Group> create(SimWorld& world, std::vector<int> members);

  SimWorld& world() { return world_; }
  int id() const { return id_; }
  int size() const { return static_cast<int>(members_.size()); }
  int worker(int rank) const { return members_[static_cast<size_t>(rank)]; }
  const std::vector<int>& members() const { return members_; }
  simgrid::s4u::Host* host(int rank) const { return hosts_[static_cast<size_t>(rank)]; }
  int node(int rank) const { return node_of_rank_[static_cast<size_t>(rank)]; }
  // Where its reduce-scatters and allgathers with `algorithm` keep the blocks.
  GatherLayout gather_layout(Algorithm algorithm) const {
    return schedules_.gather_layout(algorithm);
  }
  // Latency and bandwidth of the route between two ranks' hosts (route_model, cached).
  const LinkModel& link(int from, int to);

  // The cached schedule of `call` (algorithm resolved), and its whole schedule (rebuilt if
  // dropped; never kept at analytic fidelity in cost-only runs, which need the traffic and
  // the duration only). Entries stay valid as long as the group.
  const CachedSchedule& entry(const CollCall& call);
  std::shared_ptr<const Schedule> schedule(const CachedSchedule& entry) {
    return schedules_.schedule(entry);
  }
  // Analytic fidelity: the modelled duration of `call` on its schedule `entry`: its rounds (worked
  // out when entry() made it) and the passes around them (setup_seconds, finish_seconds).
  double analytic_seconds(const CachedSchedule& entry, const CollCall& call);
  // The local passes a rank makes around the schedule of `call`, at the platform's [network]
  // speeds, as the real backend makes them: the copies (an allgather's contribution into place,
  // a reduce-scatter's input into its working buffer and its block out of it, and the blocks'
  // permutation where the layout is not in place: the largest rank's share), a 16-bit
  // reduction's kAvg division and rounding of the buffer, and a 16-bit allgather's rounding of
  // its own block (prepare_pass_seconds); stretched by cpu_seconds. 0 without speeds.
  double setup_seconds(const CollCall& call) const;
  // The pass rank `rank` makes after the schedule of `call`, as the real backend's finish():
  // kAvg's division in fp32 of an allreduce's buffer, a reduce-scatter's block, or a reduce's
  // result on its root (finish_pass_seconds); stretched by cpu_seconds. 0 without speeds and
  // for every other call.
  double finish_seconds(const CollCall& call, int rank) const;
  // The longest of finish_seconds over the ranks: the part of the collective after its last round.
  double finish_seconds(const CollCall& call) const;
  // `seconds` of a rank's local passes in a collective (measured on a core of its own) on the
  // cores its members time-share: stretched by the largest WorkerState::core_share among them,
  // as their compute is. A message's software overheads are not (message_seconds has them at
  // analytic fidelity).
  double cpu_seconds(double seconds) const { return seconds * core_share_; }

  simgrid::s4u::Mailbox* mailbox(int src, int dst, Channel channel);

  // Coarse fidelities: rank arrives (its clock flushed, unless on its own clock) with its
  // buffer; the last arriver launches the job. The caller then waits job->done (and, analytic,
  // until job->end_time).
  // A call that differs from another member's throws UserError there and fails the job, so
  // that every member of it gets the error.
  std::shared_ptr<Job> arrive(int rank, const CollCall& call, std::span<float> buffer);

  // Elastic runs. A group is broken once one of its members is lost; survivors() is the group
  // of its live members (made once, shared by them; it may itself be broken by a later loss).
  // lose_member fails the collectives that wait for `worker` (not launched yet, or in flight at
  // kFlow) with MemberLost, and returns them for the caller to release (Job::done) once the
  // worker is stopped; an analytic collective launched before the loss completes.
  bool broken() const;
  std::shared_ptr<Group> survivors();
  int rank_of(int worker) const;
  std::vector<std::shared_ptr<Job>> lose_member(int worker);

  // kMessage, elastic runs: `rank` starts its part of its next collective, to run in a helper
  // actor that reports to `part`; end_part, called by that actor once its steps are done, returns
  // when every member's are, and throws MemberLost when a member was lost before that. So the
  // survivors agree on whether the collective completed: either all keep its result, or all
  // retry it among themselves.
  std::shared_ptr<Job> begin_part(int rank, const CollCall& call, std::shared_ptr<RankJob> part);
  void end_part(int rank, Job& job);

  // Control rendezvous; on_last runs in the last arriver before everyone is released.
  std::shared_ptr<ControlSlot> control(int rank, int a, int b, std::span<const float> span,
                                       FunctionRef<void(ControlSlot&)> on_last);

 private:
  // This rank's next collective (its sequence number among the group's), the job of it that
  // the first member to reach it made; UserError on every member when calls differ.
  std::shared_ptr<Job> join(int rank, const CollCall& call);
  void launch(const std::shared_ptr<Job>& job);

  SimWorld& world_;
  int id_;
  std::vector<int> members_;
  std::vector<simgrid::s4u::Host*> hosts_;
  std::vector<int> node_of_rank_;
  double core_share_ = 1;  // the largest of its members' WorkerState::core_share

  ScheduleCache schedules_;
  std::map<ScheduleKey, double> analytic_seconds_;

  std::unordered_map<uint64_t, simgrid::s4u::Mailbox*> mailboxes_;
  std::unordered_map<uint64_t, LinkModel> routes_;

  std::vector<uint64_t> next_seq_;  // per rank
  std::map<uint64_t, std::shared_ptr<Job>> open_jobs_;
  std::shared_ptr<Job> last_job_;                // the latest launched: the next starts after it
  std::vector<std::shared_ptr<Job>> in_flight_;  // kFlow, elastic runs: launched, not done
  std::shared_ptr<Group> survivors_;
  double stream_free_at_ = 0;  // analytic: when the latest launched job completes

  std::vector<uint64_t> next_control_;  // per rank
  std::map<uint64_t, std::shared_ptr<ControlSlot>> open_controls_;
};

// Runs what a collective does before its schedule (a 16-bit wire format's rounding; an
// allgather's contribution is rounded when it is placed) and, for rank `rank`, after it
// (ReduceOp::kAvg's division).
void prepare_rank(const CollCall& call, int p, std::span<float> data);
void finish_rank(const CollCall& call, int rank, int p, std::span<float> data);

// Message fidelity: runs rank `rank`'s steps of `call` with real SimGrid comms, in the calling
// actor: its setup passes first (Group::setup_seconds), then each step, the sender paying its
// encoding pass before the send and the receiver its pass after the receive (send_pass_seconds,
// recv_pass_seconds), and its finish pass last (Group::finish_seconds). `blocked` (may be null)
// is updated with the step being waited on. `job` (elastic runs, else null) keeps the segments
// sent.
void run_steps(Group& group, int rank, const Schedule& schedule, std::span<float> data,
               const CollCall& call, BlockedOn* blocked, Job* job = nullptr);

// Flow fidelity: runs every round of `schedule` as concurrent host-to-host flows, in the calling
// actor, one round after the other, each between its senders' longest local pass and its
// receivers'; the setup passes of `call` first, the longest finish pass last.
void run_rounds_as_flows(Group& group, const Schedule& schedule, const CollCall& call);

// Waits each comm; when one fails (a link or host of [[sim.faults]]), cancels the others, so
// that none is freed unfinished, and rethrows SimGrid's exception.
void wait_or_cancel(std::span<const simgrid::s4u::CommPtr> comms);

}  // namespace syncopate::sim
