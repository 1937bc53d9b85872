// SimCommunicator: collectives, point-to-point and the shared model on simulated time.
#include "backends/sim/sim_communicator.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <simgrid/Exception.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <string>
#include <tuple>

#include "backends/sim/master_collective.hpp"
#include "backends/sim/sim_executor.hpp"
#include "backends/sim/sim_faults.hpp"
#include "core/comm/fault_abort.hpp"

namespace syncopate::sim {

namespace {

// A point-to-point message: the count always travels (to check it), the data in emulation.
struct Message {
  size_t count = 0;
  std::vector<float> data;
};

void sleep_until(double date) {
  const double now = simgrid::s4u::Engine::get_clock();
  if (date > now) simgrid::s4u::this_actor::sleep_for(date - now);
}

// Waits in a Work's destructor (the interface's "destroying an un-waited Work waits for it").
// Not while unwinding (the actor is failing or being killed). A wait that fails records the
// error as the worker's failure, rethrown by run_on_platform.
template <typename WaitFn>
void wait_in_destructor(SimWorld& world, int worker, WaitFn&& wait_fn) {
  if (std::uncaught_exceptions() > 0) return;
  try {
    wait_fn();
  } catch (const std::exception&) {  // a simgrid::ForcefulKillException is not one: it unwinds
    world.record_failure(worker, std::current_exception());
  }
}

class MessageWork final : public Work {
 public:
  MessageWork(SimWorld& world, WorkerState& me, std::shared_ptr<RankJob> job, BlockedOn what,
              Algorithm algorithm)
      : world_(world),
        me_(me),
        job_(std::move(job)),
        what_(what),
        launched_(simgrid::s4u::Engine::get_clock()),
        completion_{.algorithm = algorithm} {}
  ~MessageWork() override {
    if (job_) wait_in_destructor(world_, me_.id, [this] { wait(); });
  }
  void wait() override {
    if (!job_) return;
    const std::shared_ptr<RankJob> job = std::move(job_);
    me_.flush();
    {
      BlockedScope scope(me_, what_);
      job->done.wait();
    }
    if (job->error) std::rethrow_exception(job->error);
    completion_.elapsed_s = job->end_time - launched_;
  }
  Completion completion() const override { return completion_; }

 private:
  SimWorld& world_;
  WorkerState& me_;
  std::shared_ptr<RankJob> job_;
  BlockedOn what_;
  double launched_;
  Completion completion_;
};

class JobWork final : public Work {
 public:
  JobWork(SimWorld& world, WorkerState& me, std::shared_ptr<Job> job, BlockedOn what)
      : world_(world), me_(me), job_(std::move(job)), what_(what), launched_(me.now()) {
    what_.arrived = &job_->arrived;
  }
  ~JobWork() override {
    if (job_) wait_in_destructor(world_, me_.id, [this] { wait(); });
  }
  void wait() override {
    if (!job_) return;
    const std::shared_ptr<Job> job = std::move(job_);
    const bool own_clock = world_.collectives_on_own_clocks();
    if (!own_clock) me_.flush();
    const double before = me_.now();
    {
      BlockedScope scope(me_, what_);
      job->done.wait();
    }
    if (job->error) std::rethrow_exception(job->error);
    if (own_clock) {  // the clock reads the later of its own date and the collective's end
      me_.lag = std::max(before, job->end_time) - simgrid::s4u::Engine::get_clock();
    } else if (job->end_time > simgrid::s4u::Engine::get_clock()) {
      sleep_until(job->end_time);
      ++world_.stats().activities;
    }
    completion_ = {.elapsed_s = job->end_time - launched_,
                   .algorithm = job->entry != nullptr ? job->entry->algorithm : Algorithm::kAuto};
  }
  Completion completion() const override { return completion_; }

 private:
  SimWorld& world_;
  WorkerState& me_;
  std::shared_ptr<Job> job_;
  BlockedOn what_;
  double launched_;
  Completion completion_;
};

// A reduce-scatter's Work: the collective runs on a copy of the input (in the group's gather
// layout); when it completes, this rank's reduced block is finished (kAvg's division) into the
// output.
class ScatterWork final : public Work {
 public:
  ScatterWork(WorkPtr collective, std::unique_ptr<std::vector<float>> buffer, Segment block,
              std::span<float> out, ReduceOp op, WireFormat wire, int size)
      : buffer_(std::move(buffer)),
        collective_(std::move(collective)),
        block_(block),
        out_(out),
        op_(op),
        wire_(wire),
        size_(size) {}
  // The collective's own Work waits in its destructor if this one was never waited for.
  void wait() override {
    if (done_) return;
    done_ = true;
    collective_->wait();
    const auto first = buffer_->begin() + static_cast<std::ptrdiff_t>(block_.offset);
    std::copy(first, first + static_cast<std::ptrdiff_t>(block_.count), out_.begin());
    finish(op_, size_, out_, wire_);
  }
  Completion completion() const override { return collective_->completion(); }

 private:
  // The collective's buffer, declared first so that it outlives the collective (whose
  // destructor waits for it).
  std::unique_ptr<std::vector<float>> buffer_;
  WorkPtr collective_;
  Segment block_;
  std::span<float> out_;
  ReduceOp op_;
  WireFormat wire_;
  int size_;
  bool done_ = false;
};

// An allgather's Work where the group's gather layout is not in place: the collective runs on
// the output in that layout; when it completes, the blocks are put back in the caller's.
class GatherWork final : public Work {
 public:
  GatherWork(WorkPtr collective, const GatherLayout& layout, std::span<float> all)
      : collective_(std::move(collective)), layout_(layout), all_(all) {}
  void wait() override {
    if (done_) return;
    done_ = true;
    collective_->wait();
    const std::vector<float> gathered(all_.begin(), all_.end());
    layout_.to_caller(gathered, all_);
  }
  Completion completion() const override { return collective_->completion(); }

 private:
  WorkPtr collective_;
  GatherLayout layout_;
  std::span<float> all_;
  bool done_ = false;
};

// Elastic runs: a collective that lost a member (MemberLost) is issued again on the live members
// of the communicator, until it completes (from its input again: `issue` restores it).
class ElasticWork final : public Work {
 public:
  explicit ElasticWork(std::function<WorkPtr()> issue)
      : issue_(std::move(issue)), work_(issue_()) {}
  void wait() override {
    for (;;) {
      try {
        work_->wait();
        return;
      } catch (const MemberLost&) {
        work_ = issue_();  // on the survivors: the buffers were not touched
      }
    }
  }
  Completion completion() const override { return work_->completion(); }

 private:
  std::function<WorkPtr()> issue_;
  WorkPtr work_;
};

}  // namespace

SimCommunicator::SimCommunicator(std::shared_ptr<Group> group, int rank)
    : group_(std::move(group)),
      rank_(rank),
      world_(group_->world()),
      me_(world_.worker(group_->worker(rank))) {}

void SimCommunicator::rejoin() {
  while (group_->broken()) {
    group_ = group_->survivors();
    rank_ = group_->rank_of(me_.id);
  }
}

WorkPtr SimCommunicator::start_elastic(const CollCall& call, std::span<float> data) {
  if (!world_.options().elastic) return start(call, data, true);
  // At kMessage the steps change the buffer as they go: a retry starts again from the input.
  std::vector<float> input;
  if (world_.fidelity() == Fidelity::kMessage && world_.emulate())
    input.assign(data.begin(), data.end());
  return std::make_unique<ElasticWork>([this, call, data, input, retry = false]() mutable {
    if (retry) std::copy(input.begin(), input.end(), data.begin());
    retry = true;
    me_.flush();
    rejoin();
    return start(call, data, true);
  });
}

WorkPtr SimCommunicator::start(const CollCall& call, std::span<float> data, bool async) {
  if (!world_.collectives_on_own_clocks()) me_.flush();
  ++me_.events;
  if (world_.options().elastic && group_->broken())
    throw MemberLost("sim: worker " + std::to_string(me_.id) + ": " +
                     std::string(to_string(call.kind)) + " on communicator " +
                     std::to_string(group_->id()) +
                     " after a member was lost; allowed: allreduce and barrier, which the "
                     "survivors retry among themselves");
  const CachedSchedule& entry = group_->entry(call);
  const bool through_master = runs_through_master(world_, entry);
  if (through_master && call.wire != WireFormat::kFp32)
    throw UserError("sim: allreduce through the master host in " +
                    std::string(to_string(call.wire)) +
                    "; allowed: wire format fp32 (the master's transfers are modelled in fp32)");
  if (through_master) {  // this worker's buffer to the master and back
    counters_.bytes_sent += call.count * sizeof(float);
    counters_.bytes_recv += call.count * sizeof(float);
  } else {
    const RankTraffic& traffic = entry.traffic[static_cast<size_t>(rank_)];
    counters_.bytes_sent += traffic.bytes_sent;
    counters_.bytes_recv += traffic.bytes_recv;
  }
  BlockedOn what{.operation = to_string(call.kind).data(),
                 .group = group_->id(),
                 .count = call.count,
                 .seq = ++issued_,
                 .members = &group_->members()};

  if (world_.fidelity() != Fidelity::kMessage || through_master)
    return std::make_unique<JobWork>(world_, me_, group_->arrive(rank_, call, data), what);

  world_.stats().messages += entry.traffic[static_cast<size_t>(rank_)].sends;
  std::shared_ptr<const Schedule> schedule = group_->schedule(entry);
  // Elastic runs: every collective runs as a part of the group's job (Group::begin_part), which
  // a lost member fails on every member alike.
  const bool elastic = world_.options().elastic;
  if (!async && !elastic) {
    drain();
    {
      BlockedScope scope(me_, what);
      if (world_.emulate()) prepare_rank(call, size(), data);
      run_steps(*group_, rank_, *schedule, data, call, &me_.blocked);
    }
    if (world_.emulate()) finish_rank(call, rank_, size(), data);
    return std::make_unique<CompletedWork>();
  }
  auto job = std::make_shared<RankJob>();
  std::shared_ptr<RankJob> previous = std::exchange(last_async_, job);
  std::shared_ptr<Job> collective = elastic ? group_->begin_part(rank_, call, job) : nullptr;
  const std::string name =
      concat('w', me_.id, "/g", group_->id(), '/', what.operation, '#', what.seq);
  const simgrid::s4u::ActorPtr helper = simgrid::s4u::Actor::create(
      name, me_.host,
      [group = group_, rank = rank_, &me = me_, schedule, data, call, previous, job, collective,
       what] {
        try {
          if (previous) previous->done.wait();  // one collective at a time, in issue order
          me.in_flight = what;
          if (group->world().emulate()) prepare_rank(call, group->size(), data);
          run_steps(*group, rank, *schedule, data, call, &me.in_flight, collective.get());
          if (collective) group->end_part(rank, *collective);
          if (group->world().emulate()) finish_rank(call, rank, group->size(), data);
        } catch (const simgrid::ForcefulKillException&) {
          me.in_flight = {};  // stopped by Job::release: its group may go before the worker
          throw;
        } catch (...) {
          job->error = std::current_exception();
        }
        me.in_flight = {};
        job->end_time = simgrid::s4u::Engine::get_clock();
        job->done.fire();
      });
  if (collective) collective->helpers[static_cast<size_t>(rank_)] = helper->get_pid();
  return std::make_unique<MessageWork>(world_, me_, std::move(job), what, schedule->algorithm);
}

void SimCommunicator::drain() {
  if (!last_async_) return;
  const std::shared_ptr<RankJob> job = std::move(last_async_);
  BlockedScope scope(
      me_, BlockedOn{.operation = "earlier asynchronous collective", .group = group_->id()});
  job->done.wait();  // its error, if any, is rethrown by its own Work
}

WorkPtr SimCommunicator::allreduce_async(std::span<float> data, const CollectiveOptions& options) {
  return start_elastic({.kind = CollectiveKind::kAllreduce,
                        .algorithm = options.algorithm,
                        .count = data.size(),
                        .op = options.op,
                        .wire = options.wire},
                       data);
}

void SimCommunicator::broadcast(std::span<float> data, int root) {
  check_root(root, "broadcast");
  start({.kind = CollectiveKind::kBroadcast, .count = data.size(), .root = root}, data, false)
      ->wait();
}

void SimCommunicator::reduce(std::span<float> data, int root, ReduceOp op) {
  check_root(root, "reduce");
  start({.kind = CollectiveKind::kReduce, .count = data.size(), .root = root, .op = op}, data,
        false)
      ->wait();
}

void SimCommunicator::allgather(std::span<const float> mine, std::span<float> all,
                                const GatherOptions& options) {
  start_allgather(mine, all, options, false)->wait();
}

WorkPtr SimCommunicator::allgather_async(std::span<const float> mine, std::span<float> all,
                                         const GatherOptions& options) {
  return start_allgather(mine, all, options, true);
}

WorkPtr SimCommunicator::start_allgather(std::span<const float> mine, std::span<float> all,
                                         const GatherOptions& options, bool async) {
  const BlockRange block = block_of(all.size(), size(), rank_);
  if (mine.size() != block.count)
    throw UserError(
        "sim: allgather: rank " + std::to_string(rank_) + " contributes " +
        std::to_string(mine.size()) + " floats of " + std::to_string(all.size()) +
        "; allowed: block_of(all.size(), size(), rank()).count = " + std::to_string(block.count));
  const WireFormat wire = options.wire;
  const GatherLayout layout = group_->gather_layout(options.algorithm);
  if (world_.emulate()) {  // rounded as the other blocks will arrive
    const Segment placed = layout.block(all.size(), rank_);
    if (!mine.empty()) std::memmove(all.data() + placed.offset, mine.data(), mine.size_bytes());
    prepare(ReduceOp::kSum, size(), all.subspan(placed.offset, placed.count), wire);
  }
  WorkPtr collective = start({.kind = CollectiveKind::kAllgather,
                              .algorithm = options.algorithm,
                              .count = all.size(),
                              .wire = wire},
                             all, async);
  if (!world_.emulate() || layout.in_place()) return collective;
  return std::make_unique<GatherWork>(std::move(collective), layout, all);
}

void SimCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                                     const GatherOptions& options) {
  start_reduce_scatter(in, out, op, options, false)->wait();
}

WorkPtr SimCommunicator::reduce_scatter_async(std::span<const float> in, std::span<float> out,
                                              ReduceOp op, const GatherOptions& options) {
  return start_reduce_scatter(in, out, op, options, true);
}

WorkPtr SimCommunicator::start_reduce_scatter(std::span<const float> in, std::span<float> out,
                                              ReduceOp op, const GatherOptions& options,
                                              bool async) {
  const BlockRange block = block_of(in.size(), size(), rank_);
  if (out.size() != block.count)
    throw UserError(
        "sim: reduce_scatter: rank " + std::to_string(rank_) + " output has " +
        std::to_string(out.size()) + " floats for an input of " + std::to_string(in.size()) +
        "; allowed: block_of(in.size(), size(), rank()).count = " + std::to_string(block.count));
  const WireFormat wire = options.wire;
  const GatherLayout layout = group_->gather_layout(options.algorithm);
  auto work = std::make_unique<std::vector<float>>();
  if (world_.emulate()) {
    work->resize(in.size());
    layout.to_schedule(in, *work);
  }
  WorkPtr collective = start({.kind = CollectiveKind::kReduceScatter,
                              .algorithm = options.algorithm,
                              .count = in.size(),
                              .op = op,
                              .wire = wire},
                             *work, async);
  if (!world_.emulate()) return collective;
  return std::make_unique<ScatterWork>(std::move(collective), std::move(work),
                                       layout.block(in.size(), rank_), out, op, wire, size());
}

void SimCommunicator::barrier() {
  const CollCall call{.kind = CollectiveKind::kBarrier, .algorithm = Algorithm::kRecursiveDoubling};
  (world_.options().elastic ? start_elastic(call, {}) : start(call, {}, false))->wait();
}

void SimCommunicator::check_peer(int peer, const char* operation) const {
  if (peer < 0 || peer >= size() || peer == rank_)
    throw UserError(std::string("sim: ") + operation + ": peer " + std::to_string(peer) +
                    " from rank " + std::to_string(rank_) + "; allowed: 0.." +
                    std::to_string(size() - 1) + " other than the caller");
}

void SimCommunicator::check_root(int root, const char* operation) const {
  if (root < 0 || root >= size())
    throw UserError(std::string("sim: ") + operation + ": root " + std::to_string(root) +
                    "; allowed: 0.." + std::to_string(size() - 1));
}

void SimCommunicator::send(std::span<const float> data, int peer) {
  check_peer(peer, "send");
  me_.flush();
  auto message = std::make_unique<Message>();
  message->count = data.size();
  if (world_.emulate()) message->data.assign(data.begin(), data.end());
  const uint64_t bytes = data.size() * sizeof(float);
  counters_.bytes_sent += bytes;
  ++world_.stats().comms;
  ++world_.stats().activities;
  ++world_.stats().messages;
  BlockedScope scope(
      me_,
      BlockedOn{.operation = "send", .group = group_->id(), .peer = peer, .count = data.size()});
  // Ownership passes to the receiver once the comm completes.
  simgrid::s4u::CommPtr comm =
      group_->mailbox(rank_, peer, Channel::kPointToPoint)->put_async(message.get(), bytes);
  comm->wait();
  std::ignore = message.release();
}

void SimCommunicator::recv(std::span<float> data, int peer) {
  check_peer(peer, "recv");
  me_.flush();
  Message* received = nullptr;
  {
    BlockedScope scope(
        me_,
        BlockedOn{.operation = "recv", .group = group_->id(), .peer = peer, .count = data.size()});
    group_->mailbox(peer, rank_, Channel::kPointToPoint)->get_async(&received)->wait();
  }
  const std::unique_ptr<Message> message(received);
  SYNC_CHECK(message != nullptr, "recv from " << peer);
  if (message->count != data.size())
    throw UserError("sim: recv: rank " + std::to_string(rank_) + " expected " +
                    std::to_string(data.size()) + " floats from rank " + std::to_string(peer) +
                    " which sent " + std::to_string(message->count) +
                    "; allowed: send and recv of the same size");
  counters_.bytes_recv += data.size() * sizeof(float);
  if (world_.emulate()) std::copy(message->data.begin(), message->data.end(), data.begin());
}

std::unique_ptr<Communicator> SimCommunicator::split(int color, int key) {
  me_.flush();
  BlockedScope scope(me_, BlockedOn{.operation = "split", .group = group_->id()});
  std::shared_ptr<ControlSlot> slot = group_->control(rank_, color, key, {}, [&](ControlSlot& s) {
    const int p = size();
    std::map<int, std::vector<int>> by_color;  // color -> old ranks
    for (int r = 0; r < p; ++r) by_color[s.a[static_cast<size_t>(r)]].push_back(r);
    s.groups.resize(static_cast<size_t>(p));
    s.new_rank.resize(static_cast<size_t>(p));
    for (auto& [c, ranks] : by_color) {
      std::stable_sort(ranks.begin(), ranks.end(), [&](int x, int y) {
        return std::tie(s.b[static_cast<size_t>(x)], x) < std::tie(s.b[static_cast<size_t>(y)], y);
      });
      std::vector<int> workers;
      for (int r : ranks) workers.push_back(group_->worker(r));
      auto group = Group::create(world_, std::move(workers));
      for (size_t i = 0; i < ranks.size(); ++i) {
        s.groups[static_cast<size_t>(ranks[i])] = group;
        s.new_rank[static_cast<size_t>(ranks[i])] = static_cast<int>(i);
      }
    }
  });
  const size_t r = static_cast<size_t>(rank_);
  auto group = std::make_unique<SimCommunicator>(slot->groups[r], slot->new_rank[r]);
  group->set_default_timeout(timeout_s_);
  return group;
}

std::unique_ptr<SharedModel> SimCommunicator::create_shared_model(std::span<const float> initial,
                                                                  GlobalModelPlacement placement) {
  me_.flush();
  BlockedScope scope(me_, BlockedOn{.operation = "create_shared_model", .group = group_->id()});
  std::shared_ptr<ControlSlot> slot =
      group_->control(rank_, static_cast<int>(initial.size()), 0, initial, [&](ControlSlot& s) {
        for (int r = 0; r < size(); ++r)
          if (s.a[static_cast<size_t>(r)] != s.a[0]) {
            s.error = std::make_exception_ptr(
                UserError("sim: create_shared_model: rank " + std::to_string(r) + " passed " +
                          std::to_string(s.a[static_cast<size_t>(r)]) + " floats, rank 0 " +
                          std::to_string(s.a[0]) + "; allowed: the same model size on every rank"));
            return;
          }
        auto global = std::make_shared<GlobalModel>();
        const Platform& platform = world_.platform();
        global->placement = placement;
        global->owner = platform.master != nullptr && placement == GlobalModelPlacement::kMaster
                            ? platform.master
                            : world_.worker(group_->worker(0)).host;
        global->count = initial.size();
        if (world_.emulate()) global->data.assign(s.spans[0].begin(), s.spans[0].end());
        global->mutex = simgrid::s4u::Mutex::create();
        s.shared_model = std::move(global);
      });
  if (slot->error) std::rethrow_exception(slot->error);
  return std::make_unique<SimSharedModel>(*this, slot->shared_model);
}

void SimCommunicator::transfer(simgrid::s4u::Host* from, simgrid::s4u::Host* to,
                               const LinkModel& link, uint64_t bytes) {
  if (from == to) return;  // a host's own memory: not on the network
  ++world_.stats().activities;
  const NetworkFactors& network = world_.platform().network;
  if (world_.fidelity() == Fidelity::kAnalytic) {
    simgrid::s4u::this_actor::sleep_for(
        message_seconds(network, link.latency_s, link.bandwidth_Bps, static_cast<double>(bytes)));
    return;
  }
  ++world_.stats().comms;
  if (network.send_overhead_s > 0) simgrid::s4u::this_actor::sleep_for(network.send_overhead_s);
  simgrid::s4u::Comm::sendto(from, to, bytes);
  if (network.recv_overhead_s > 0) simgrid::s4u::this_actor::sleep_for(network.recv_overhead_s);
}

void SimCommunicator::merge(GlobalModel* global, std::span<float> local, const MergeRule& rule) {
  check_merge_size(local.size(), global->count, "sim", rank_);
  me_.flush();
  if (world_.options().elastic) rejoin();  // the survivors learn of a loss at their next merge
  const Platform& platform = world_.platform();
  const uint64_t bytes = local.size() * sizeof(float);
  {
    BlockedScope scope(me_, BlockedOn{.operation = "shared model merge (lock)",
                                      .group = group_->id(),
                                      .count = local.size()});
    global->mutex->lock();
  }
  me_.in_merge = true;
  if (global->placement == GlobalModelPlacement::kMigrating && !global->owner->is_on())
    throw FaultAbort("sim: worker " + std::to_string(me_.id) +
                         ": epoch_async's global model was lost with the host of the worker "
                         "that merged last (" +
                         global->owner->get_name() +
                         "; strategy.global_model = \"migrating\" keeps it there); the job "
                         "aborts",
                     {.kind = "host_failure",
                      .worker = -1,
                      .link = {},
                      .at_s = simgrid::s4u::Engine::get_clock()});
  const LinkModel link = route_model(me_.host, global->owner);  // kAnalytic's alpha and B
  const bool migrating = global->placement == GlobalModelPlacement::kMigrating;
  if (migrating)
    fetch_global_model(global->owner, bytes);
  else
    transfer(me_.host, global->owner, link, bytes);
  const double n = static_cast<double>(local.size());
  const double merge_seconds = compute_seconds(
      platform.profile, Cost{.flops = 3 * n, .bytes = 12 * n, .kind = OpKind::kElementwise});
  if (merge_seconds > 0) {
    simgrid::s4u::this_actor::sleep_for(merge_seconds);
    ++world_.stats().activities;
  }
  if (world_.emulate()) {
    apply_merge_rule(rule, global->data, local);
    std::copy(global->data.begin(), global->data.end(), local.begin());
  }
  if (migrating) {
    global->owner = me_.host;  // the merged model stays where it was made
  } else {
    transfer(global->owner, me_.host, link, bytes);
    counters_.bytes_sent += bytes;
    counters_.bytes_recv += bytes;
  }
  global->mutex->unlock();
  me_.in_merge = false;
  if (me_.doomed != nullptr) lose_worker_now(world_, me_.id, me_.doomed);  // ends this actor
}

// kMigrating: the model comes from the worker that merged last (over Ethernet across nodes when
// the platform has a master host, else over the route); the merging worker counts it received.
void SimCommunicator::fetch_global_model(simgrid::s4u::Host* holder, uint64_t bytes) {
  if (holder == me_.host) return;
  counters_.bytes_recv += bytes;
  const double ethernet = ethernet_fetch_seconds(world_, holder, me_.host, bytes);
  if (ethernet < 0) {
    transfer(holder, me_.host, route_model(holder, me_.host), bytes);
    return;
  }
  ++world_.stats().activities;
  simgrid::s4u::this_actor::sleep_for(ethernet);
}

}  // namespace syncopate::sim
