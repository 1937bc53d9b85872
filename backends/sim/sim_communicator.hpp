#pragma once
// The simulator's Communicator: one per worker actor (and per split group it belongs to).
//
// Every collective builds the core schedule (core/comm/collective_schedule.hpp; cached per group by
// kind, algorithm, count and root) and runs it at the world's fidelity:
//   kMessage  - each rank's actor performs its own steps with mailbox comms (payload: a snapshot
//               of the sent segment in emulation, nothing in cost-only; simulated size: bytes);
//   kFlow     - members rendezvous; then a driver actor runs the schedule round by round, each
//               round as concurrent host-to-host flows (Comm::sendto_async), and the arithmetic
//               once for all ranks (execute_in_memory);
//   kAnalytic - members rendezvous; the completion date is computed from the schedule's rounds
//               with the platform's link models (no flows); arithmetic as for kFlow.
// Ordering and overlap: the collectives of one communicator execute one at a time, in issue
// order (like one NCCL stream). allreduce_async (and allgather_async, reduce_scatter_async)
// returns at once; the collective starts when all
// members issued it and the previous one finished, and it progresses while the workers compute
// (kMessage: a helper actor per rank on the worker's host; kFlow: the driver actor; kAnalytic:
// nothing to progress). wait() returns at the collective's completion date. The blocking
// collectives are an issue followed by a wait. The caller must not touch the buffer in between.
// Cost-only: buffers are never read or written (they may alias across workers), only their sizes
// count.
//
// send/recv are blocking, rendezvous (MPI_Ssend-like) mailbox comms at every fidelity.
// SharedModel::merge: FIFO mutex, model sent to the owner (the platform's master host if any,
// else worker 0's host), merged there (elementwise compute on the host profile), sent back;
// kAnalytic times the two transfers as alpha + bytes / B of the route instead of flows.
// Under GlobalModelPlacement::kMigrating the merging worker instead fetches the model from the
// worker that merged last (master_collective.hpp), merges on its own host and keeps it.
// split and create_shared_model are zero-time rendezvous (members wait for the last one).
// barrier is a dissemination pattern of zero-byte messages (ceil(log2 p) latencies).
// Reductions cost no simulated time (GPUs reduce far faster than links deliver).
#include <memory>

#include "backends/sim/sim_group.hpp"
#include "core/comm/comm.hpp"

namespace syncopate::sim {

class SimCommunicator final : public Communicator {
 public:
  SimCommunicator(std::shared_ptr<Group> group, int rank);

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  int node() const override { return group_->node(rank_); }

  WorkPtr allreduce_async(std::span<float> data, const CollectiveOptions& options) override;
  void broadcast(std::span<float> data, int root) override;
  void reduce(std::span<float> data, int root, ReduceOp op) override;
  void allgather(std::span<const float> mine, std::span<float> all,
                 const GatherOptions& options) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                      const GatherOptions& options) override;
  WorkPtr allgather_async(std::span<const float> mine, std::span<float> all,
                          const GatherOptions& options) override;
  WorkPtr reduce_scatter_async(std::span<const float> in, std::span<float> out, ReduceOp op,
                               const GatherOptions& options) override;
  void barrier() override;
  void send(std::span<const float> data, int peer) override;
  void recv(std::span<float> data, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::unique_ptr<SharedModel> create_shared_model(std::span<const float> initial,
                                                   GlobalModelPlacement placement) override;
  CommCounters counters() const override { return counters_; }
  // Stored for split groups; the simulator has no timeouts (a hang is reported as a deadlock).
  void set_default_timeout(double seconds) override { timeout_s_ = seconds; }
  double default_timeout() const override { return timeout_s_; }

 private:
  friend class SimSharedModel;
  void merge(GlobalModel* global, std::span<float> local, const MergeRule& rule);
  WorkPtr start(const CollCall& call, std::span<float> data, bool async);
  WorkPtr start_allgather(std::span<const float> mine, std::span<float> all,
                          const GatherOptions& options, bool async);
  WorkPtr start_reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                               const GatherOptions& options, bool async);
  // Elastic runs (SimOptions::elastic): an allreduce or barrier that loses a member is issued
  // again on the live members (rejoin: this communicator's group becomes their group, its rank
  // and size theirs), so that averages are over the live replicas. Otherwise start(async).
  WorkPtr start_elastic(const CollCall& call, std::span<float> data);
  void rejoin();
  void drain();  // kMessage: waits for this rank's asynchronous collectives
  void check_peer(int peer, const char* operation) const;
  void check_root(int root, const char* operation) const;
  void transfer(simgrid::s4u::Host* from, simgrid::s4u::Host* to, const LinkModel& link,
                uint64_t bytes);
  void fetch_global_model(simgrid::s4u::Host* holder, uint64_t bytes);

  std::shared_ptr<Group> group_;
  int rank_;
  SimWorld& world_;
  WorkerState& me_;
  CommCounters counters_;
  uint64_t issued_ = 0;                  // collectives issued (for descriptions)
  std::shared_ptr<RankJob> last_async_;  // kMessage: the latest asynchronous collective
  double timeout_s_ = kNoTimeout;
};

// A shared model of the simulator: merges run on the communicator that created it.
class SimSharedModel final : public SharedModel {
 public:
  SimSharedModel(SimCommunicator& comm, std::shared_ptr<GlobalModel> model)
      : comm_(comm), model_(std::move(model)) {}
  size_t size() const override { return model_->count; }
  void merge(std::span<float> local, const MergeRule& rule) override {
    comm_.merge(model_.get(), local, rule);
  }

 private:
  SimCommunicator& comm_;
  std::shared_ptr<GlobalModel> model_;
};

}  // namespace syncopate::sim
