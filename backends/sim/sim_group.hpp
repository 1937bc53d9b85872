#pragma once
// A group of workers sharing a communicator (the world, or a split of it), internal to
// backends/sim. It is shared by the group's SimCommunicators (one per member actor) and holds
// what they coordinate through: the schedule cache, mailboxes, the rendezvous of coarse-fidelity
// collectives, control rendezvous (split, create_global) and the global model.
#include <map>
#include <memory>
#include <simgrid/s4u/Mailbox.hpp>
#include <simgrid/s4u/Mutex.hpp>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/sim_world.hpp"
#include "core/comm/collective_schedule.hpp"
#include "core/base/function_ref.hpp"

namespace syncopate::sim {

enum class CollKind : uint8_t {
  kAllreduce,
  kBroadcast,
  kReduce,
  kAllgather,
  kReduceScatter,
  kBarrier
};
std::string_view to_string(CollKind kind);

// One collective call as every member must issue it.
struct CollCall {
  CollKind kind = CollKind::kAllreduce;
  Algorithm algorithm = Algorithm::kAuto;  // resolved by Group::entry
  size_t count = 0;
  int root = 0;
  ReduceOp op = ReduceOp::kSum;
  bool operator==(const CollCall&) const = default;
};

// What the group knows about one (kind, algorithm, count, root): the schedule itself (dropped
// and rebuilt when the cache grows too large) and its per-rank summaries.
struct ScheduleEntry {
  Algorithm requested = Algorithm::kRing;  // kAuto resolved: what the schedule is built for
  Algorithm algorithm = Algorithm::kRing;  // what it is (kHierarchical may fall back to kRing)
  std::shared_ptr<const Schedule> schedule;
  std::vector<uint64_t> bytes_sent, bytes_recv, sends;  // per rank
  uint64_t messages = 0;
  double analytic_seconds = -1;  // computed on first use
};

// A coarse-fidelity (flow or analytic) collective: members arrive, the last one launches it.
struct Job {
  CollCall call;
  uint64_t seq = 0;
  ScheduleEntry* entry = nullptr;
  std::shared_ptr<const Schedule> schedule;
  std::vector<std::span<float>> buffers;  // per rank (emulation)
  std::vector<char> arrived;
  int num_arrived = 0;
  SimEvent done;
  double end_time = 0;  // simulated date at which every member completes
  std::exception_ptr error;
};

// A control rendezvous (split, create_global): zero-cost, everyone leaves when the last arrives.
struct ControlSlot {
  std::vector<int> a, b;                      // per rank: e.g. color, key
  std::vector<std::span<const float>> spans;  // per rank
  std::vector<char> arrived;
  int num_arrived = 0;
  SimEvent done;
  std::vector<std::shared_ptr<class Group>> groups;  // per rank result (split)
  std::vector<int> new_rank;
};

struct GlobalModel {
  simgrid::s4u::Host* owner = nullptr;
  std::vector<float> data;
  size_t count = 0;
  simgrid::s4u::MutexPtr mutex;  // FIFO: merges run one at a time in arrival order
};

enum class Channel { kCollective, kPointToPoint };

class Group : public std::enable_shared_from_this<Group> {
 public:
  Group(SimWorld& world, std::vector<int> members);

  SimWorld& world() { return world_; }
  int id() const { return id_; }
  int size() const { return static_cast<int>(members_.size()); }
  int worker(int rank) const { return members_[static_cast<size_t>(rank)]; }
  const std::vector<int>& members() const { return members_; }
  simgrid::s4u::Host* host(int rank) const { return hosts_[static_cast<size_t>(rank)]; }
  int node(int rank) const { return node_of_rank_[static_cast<size_t>(rank)]; }
  // Latency and bandwidth of the route between two ranks' hosts (route_model, cached).
  const LinkModel& link(int from, int to);

  // The schedule entry for `call` (algorithm resolved), and its schedule (rebuilt if dropped).
  ScheduleEntry& entry(const CollCall& call);
  std::shared_ptr<const Schedule> schedule(const CollCall& call, ScheduleEntry& entry);
  double analytic_seconds(const CollCall& call, ScheduleEntry& entry);

  simgrid::s4u::Mailbox* mailbox(int src, int dst, Channel channel);

  // Coarse fidelities: rank arrives (its clock flushed) with its buffer; the last arriver
  // launches the job. The caller then waits job->done (and, analytic, until job->end_time).
  std::shared_ptr<Job> arrive(int rank, const CollCall& call, std::span<float> buffer);

  // Control rendezvous; on_last runs in the last arriver before everyone is released.
  std::shared_ptr<ControlSlot> control(int rank, int a, int b, std::span<const float> span,
                                       FunctionRef<void(ControlSlot&)> on_last);

  std::unique_ptr<GlobalModel>& global() { return global_; }

 private:
  void launch(const std::shared_ptr<Job>& job);
  std::shared_ptr<const Schedule> build(const CollCall& call) const;
  void account_steps(size_t steps);

  SimWorld& world_;
  int id_;
  std::vector<int> members_;
  std::vector<simgrid::s4u::Host*> hosts_;
  std::vector<int> node_of_rank_;

  std::map<std::tuple<CollKind, Algorithm, size_t, int>, ScheduleEntry> entries_;
  size_t cached_steps_ = 0;

  std::unordered_map<uint64_t, simgrid::s4u::Mailbox*> mailboxes_;
  std::unordered_map<uint64_t, LinkModel> routes_;

  std::vector<uint64_t> next_seq_;  // per rank
  std::map<uint64_t, std::shared_ptr<Job>> open_jobs_;
  std::shared_ptr<Job> last_job_;  // the latest launched: the next starts after it
  double stream_free_at_ = 0;      // analytic: when the latest launched job completes

  std::vector<uint64_t> next_control_;  // per rank
  std::map<uint64_t, std::shared_ptr<ControlSlot>> open_controls_;

  std::unique_ptr<GlobalModel> global_;
};

// Runs what a collective does after its schedule for rank `rank` (ReduceOp::kAvg's division).
void finish_rank(const CollCall& call, int rank, int p, std::span<float> data);

// A barrier as a schedule of zero-float messages (dissemination: ceil(log2 p) rounds).
Schedule make_barrier_schedule(int p);

// Message fidelity: runs rank `rank`'s steps with real SimGrid comms, in the calling actor.
// `blocked` (may be null) is updated with the step being waited on.
void run_steps(Group& group, int rank, const Schedule& schedule, std::span<float> data, ReduceOp op,
               BlockedOn* blocked);

// Flow fidelity: runs every round of `schedule` as concurrent host-to-host flows, in the calling
// actor, one round after the other.
void run_rounds_as_flows(Group& group, const Schedule& schedule);

// Analytic fidelity: sum over rounds of max over the round's messages of latency + bytes / B of
// the route between the two ranks (alpha-beta per message, no contention). On a platform whose
// routes are all alike this is the closed form of each algorithm (e.g. ring:
// 2(p-1) alpha + 2(p-1)/p n beta); on two-level platforms the intra- and inter-node rounds of the
// hierarchical algorithm get their own alpha and beta.
double analytic_seconds(Group& group, const Schedule& schedule);

}  // namespace syncopate::sim
