// Group: the workers of one communicator, their schedules and how a collective runs at each
// fidelity.
#include "backends/sim/sim_group.hpp"

#include <algorithm>
#include <array>
#include <simgrid/Exception.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <string>
#include <tuple>

#include "backends/sim/master_collective.hpp"
#include "backends/sim/round_maxima.hpp"

namespace syncopate::sim {
namespace {

// SimGrid refuses a null payload: cost-only messages carry this (never read).
char g_no_payload = 0;

uint64_t payload_bytes(size_t count, WireFormat wire) {
  return static_cast<uint64_t>(count) * element_bytes(wire);
}

std::vector<int> nodes_of(const Platform& platform, const std::vector<int>& workers) {
  std::vector<int> nodes;
  for (int w : workers) nodes.push_back(platform.node_of_gpu[static_cast<size_t>(w)]);
  return nodes;
}

// A message's software overhead ([network] send_overhead / recv_overhead) on the calling actor;
// nothing when it is 0 (the plain model).
void pay_overhead(SimStats& stats, double seconds) {
  if (seconds <= 0) return;
  simgrid::s4u::this_actor::sleep_for(seconds);
  ++stats.activities;
}

// Analytic fidelity, cost-only: nothing runs a schedule, so only its traffic is kept.
CacheScope cache_scope(const SimWorld& world) {
  return world.fidelity() == Fidelity::kAnalytic && !world.emulate() ? CacheScope::kTrafficOnly
                                                                     : CacheScope::kAllRanks;
}

// A message's time over its route (message_seconds: latency and bandwidth with the [network]
// terms), for RoundMaxima.
class RouteSeconds {
 public:
  RouteSeconds(Group& group, WireFormat wire)
      : group_(&group),
        network_(&group.world().platform().network),
        wire_(wire),
        last_to_(static_cast<size_t>(group.size()), -1),
        last_link_(static_cast<size_t>(group.size()), nullptr) {}
  double operator()(int from, int to, size_t count) {
    const auto f = static_cast<size_t>(from);
    if (last_to_[f] != to) {  // a rank mostly sends to one peer: its ring neighbour
      last_to_[f] = to;
      last_link_[f] = &group_->link(from, to);
    }
    const LinkModel& link = *last_link_[f];
    return message_seconds(*network_, link.latency_s, link.bandwidth_Bps,
                           static_cast<double>(payload_bytes(count, wire_)));
  }

 private:
  Group* group_;
  const NetworkFactors* network_;
  WireFormat wire_;
  std::vector<int> last_to_;  // per sender: the peer of its latest message
  std::vector<const LinkModel*> last_link_;
};

std::string describe(const CollCall& call) {
  return std::string(to_string(call.kind)) + "(" + std::string(to_string(call.algorithm)) + ", " +
         std::to_string(call.count) + " floats, root " + std::to_string(call.root) + ", " +
         std::string(to_string(call.op)) + ", " + std::string(to_string(call.wire)) + ")";
}

}  // namespace

void wait_or_cancel(std::span<const simgrid::s4u::CommPtr> comms) {
  for (size_t i = 0; i < comms.size(); ++i) {
    try {
      if (comms[i]) comms[i]->wait();
    } catch (const simgrid::Exception&) {
      for (size_t j = i + 1; j < comms.size(); ++j)
        if (comms[j]) comms[j]->cancel();
      throw;
    }
  }
}

Group::Group(SimWorld& world, std::vector<int> members)
    : world_(world),
      id_(world.next_group_id()),
      members_(std::move(members)),
      node_of_rank_(nodes_of(world.platform(), members_)),
      schedules_(node_of_rank_, cache_scope(world)) {
  for (int w : members_) {
    hosts_.push_back(world.worker(w).host);
    core_share_ = std::max(core_share_, world.worker(w).core_share);
  }
  next_seq_.assign(members_.size(), 0);
  next_control_.assign(members_.size(), 0);
}

const LinkModel& Group::link(int from, int to) {
  const uint64_t key =
      static_cast<uint64_t>(from) * static_cast<uint64_t>(size()) + static_cast<uint64_t>(to);
  return find_or_create(routes_, key, [&] { return route_model(host(from), host(to)); });
}

const CachedSchedule& Group::entry(const CollCall& call) {
  const ScheduleKey key =
      schedules_.key(call.kind, call.algorithm, call.count, call.root, call.wire);
  if (world_.fidelity() != Fidelity::kAnalytic || analytic_seconds_.contains(key))
    return schedules_.entry(key);
  // Analytic: the duration is worked out from the messages as the entry is made.
  const NetworkFactors& network = world_.platform().network;
  RoundMaxima::PassSeconds passes;  // none without speeds: each message as before
  const WireFormat wire = key.wire;
  if (network.has_passes(wire))
    passes = [this, &network, wire](RecvAction action, size_t count, bool forwarded) {
      return cpu_seconds(send_pass_seconds(network, wire, count, forwarded) +
                         recv_pass_seconds(network, wire, action, count));
    };
  RoundMaxima rounds(RouteSeconds(*this, wire), std::move(passes), wire != WireFormat::kFp32);
  const CachedSchedule& e = schedules_.entry(key, &rounds);
  analytic_seconds_.emplace(key, rounds.total());
  return e;
}

double Group::setup_seconds(const CollCall& call) const {
  const NetworkFactors& network = world_.platform().network;
  const int p = size();
  const bool reduction =
      call.kind == CollectiveKind::kAllreduce || call.kind == CollectiveKind::kReduceScatter;
  const size_t block = (call.count + static_cast<size_t>(p) - 1) / static_cast<size_t>(p);
  // A 16-bit format's passes before the first round, as prepare(): a reduction's (kAvg's
  // division and the rounding of its buffer), an allgather's rounding of its own block.
  double rounding = 0;
  if (reduction)
    rounding = prepare_pass_seconds(network, call.op, call.wire, p, call.count);
  else if (call.kind == CollectiveKind::kAllgather)
    rounding = prepare_pass_seconds(network, ReduceOp::kSum, call.wire, p, block);
  // One rank's copies touch buffers that no other rank does: solo_copy's speeds where known.
  const std::vector<SizeFactor>& copy =
      p == 1 && !network.solo_copy.empty() ? network.solo_copy : network.copy;
  if (copy.empty()) return cpu_seconds(rounding);
  const auto pass = [&copy](size_t floats) {
    return local_pass_seconds(copy, static_cast<double>(floats * sizeof(float)));
  };
  const bool permuted = !gather_layout(call.algorithm).in_place();
  switch (call.kind) {
    case CollectiveKind::kAllgather:  // the contribution; then to the caller's layout and back
      return cpu_seconds(rounding + pass(block) + (permuted ? 2 * pass(call.count) : 0.0));
    case CollectiveKind::kReduceScatter:  // the input (permuted or not), then the block out
      return cpu_seconds(rounding + pass(call.count) + pass(block));
    default:
      return cpu_seconds(rounding);
  }
}

double Group::finish_seconds(const CollCall& call, int rank) const {
  const int p = size();
  size_t count = 0;  // the floats that rank divides, as finish_rank and ScatterWork
  switch (call.kind) {
    case CollectiveKind::kAllreduce:
      count = call.count;
      break;
    case CollectiveKind::kReduce:
      count = rank == call.root ? call.count : 0;
      break;
    case CollectiveKind::kReduceScatter:
      count = block_of(call.count, p, rank).count;
      break;
    default:
      return 0;
  }
  return cpu_seconds(finish_pass_seconds(world_.platform().network, call.op, call.wire, p, count));
}

double Group::finish_seconds(const CollCall& call) const {
  // The largest share: the root's result, the whole buffer, or rank 0's block (blocks differ
  // by at most one float, the first ranks' the larger).
  return finish_seconds(call, call.kind == CollectiveKind::kReduce ? call.root : 0);
}

double Group::analytic_seconds(const CachedSchedule& e, const CollCall& call) {
  const auto it = analytic_seconds_.find(e.key);
  SYNC_CHECK(it != analytic_seconds_.end(),
             "no analytic duration for a schedule of " << e.key.count << " floats");
  // The passes around the rounds depend on the call's op too, which the key leaves out.
  return setup_seconds(call) + it->second + finish_seconds(call);
}

simgrid::s4u::Mailbox* Group::mailbox(int src, int dst, Channel channel) {
  const uint64_t p = static_cast<uint64_t>(size());
  const uint64_t key = (static_cast<uint64_t>(src) * p + static_cast<uint64_t>(dst)) * 2 +
                       (channel == Channel::kCollective ? 0 : 1);
  return find_or_create(mailboxes_, key, [&] {
    return simgrid::s4u::Mailbox::by_name(
        concat('g', id_, channel == Channel::kCollective ? 'c' : 'p', src, '>', dst));
  });
}

std::shared_ptr<Group> Group::create(SimWorld& world, std::vector<int> members) {
  auto group = std::make_shared<Group>(world, std::move(members));
  world.groups().push_back(group);
  return group;
}

bool Group::broken() const {
  return std::any_of(members_.begin(), members_.end(), [&](int w) { return !world_.alive(w); });
}

std::shared_ptr<Group> Group::survivors() {
  if (!survivors_) {
    std::vector<int> live;
    for (int w : members_)
      if (world_.alive(w)) live.push_back(w);
    survivors_ = create(world_, std::move(live));
  }
  return survivors_;
}

int Group::rank_of(int w) const {
  const auto it = std::find(members_.begin(), members_.end(), w);
  SYNC_CHECK(it != members_.end(), "worker " << w << " is not in communicator " << id_);
  return static_cast<int>(it - members_.begin());
}

std::vector<std::shared_ptr<Job>> Group::lose_member(int w) {
  if (std::find(members_.begin(), members_.end(), w) == members_.end()) return {};
  const auto lost =
      std::make_exception_ptr(MemberLost("sim: worker " + std::to_string(w) + " of communicator " +
                                         std::to_string(id_) + " was lost"));
  std::vector<std::shared_ptr<Job>> failed;
  for (auto& [seq, job] : open_jobs_) failed.push_back(job);
  open_jobs_.clear();
  for (const std::shared_ptr<Job>& job : in_flight_)
    if (!job->done.fired()) failed.push_back(job);
  in_flight_.clear();
  for (const std::shared_ptr<Job>& job : failed) {
    job->abandoned = true;
    job->error = lost;
  }
  return failed;
}

std::shared_ptr<Job> Group::join(int rank, const CollCall& call) {
  const uint64_t seq = next_seq_[static_cast<size_t>(rank)]++;
  std::shared_ptr<Job> job = find_or_create(open_jobs_, seq, [&] {
    auto created = std::make_shared<Job>();
    created->call = call;
    created->seq = seq;
    created->buffers.resize(members_.size());
    created->arrived.assign(members_.size(), 0);
    return created;
  });
  if (job->error) std::rethrow_exception(job->error);  // failed by a mismatched member
  if (!(job->call == call)) {
    job->error = std::make_exception_ptr(
        UserError("sim: collective #" + std::to_string(seq + 1) + " on communicator " +
                  std::to_string(id_) + ": worker " + std::to_string(worker(rank)) + " called " +
                  describe(call) + " but another member called " + describe(job->call) +
                  "; allowed: every member issues the same collectives in the same order"));
    job->done.fire();  // the members that arrived before get the error from their wait
    std::rethrow_exception(job->error);
  }
  return job;
}

std::shared_ptr<Job> Group::arrive(int rank, const CollCall& call, std::span<float> buffer) {
  const size_t r = static_cast<size_t>(rank);
  std::shared_ptr<Job> job = join(rank, call);
  job->buffers[r] = buffer;
  job->arrived[r] = 1;
  job->last_arrival = std::max(job->last_arrival, world_.worker(worker(rank)).now());
  if (++job->num_arrived == size()) {
    open_jobs_.erase(job->seq);
    launch(job);
  }
  return job;
}

std::shared_ptr<Job> Group::begin_part(int rank, const CollCall& call,
                                       std::shared_ptr<RankJob> part) {
  std::shared_ptr<Job> job = join(rank, call);
  if (job->parts.empty()) {
    job->parts.resize(members_.size());
    job->helpers.assign(members_.size(), -1);
  }
  job->parts[static_cast<size_t>(rank)] = std::move(part);
  return job;
}

void Group::end_part(int rank, Job& job) {
  job.arrived[static_cast<size_t>(rank)] = 1;
  if (!job.error && ++job.num_arrived == size()) {
    open_jobs_.erase(job.seq);
    job.done.fire();
  }
  job.done.wait();
  if (job.error) std::rethrow_exception(job.error);
}

void Job::release() {
  for (size_t r = 0; r < parts.size(); ++r) {
    if (!parts[r] || parts[r]->done.fired()) continue;
    if (const simgrid::s4u::ActorPtr helper = simgrid::s4u::Actor::by_pid(helpers[r]))
      helper->kill();
    parts[r]->error = error;
    parts[r]->done.fire();
  }
  done.fire();
}

void Group::launch(const std::shared_ptr<Job>& job) {
  job->entry = &entry(job->call);
  world_.stats().messages += job->entry->messages;
  const bool emulate = world_.emulate();
  const auto compute = [emulate](Job& j) {
    if (!emulate) return;
    const int p = static_cast<int>(j.buffers.size());
    for (int r = 0; r < p; ++r) prepare_rank(j.call, p, j.buffers[static_cast<size_t>(r)]);
    execute_in_memory(*j.schedule, j.buffers, j.call.op, j.call.wire);
    for (int r = 0; r < p; ++r) finish_rank(j.call, r, p, j.buffers[static_cast<size_t>(r)]);
  };

  const bool master = runs_through_master(world_, *job->entry);
  if (world_.fidelity() == Fidelity::kAnalytic) {
    const double seconds = master ? through_master_seconds(*this, job->call.count)
                                  : analytic_seconds(*job->entry, job->call);
    // Flushed members arrive in date order: the last one's date is the engine clock.
    const double start = std::max(job->last_arrival, stream_free_at_);
    job->end_time = stream_free_at_ = start + seconds;
    if (emulate) job->schedule = schedule(*job->entry);
    compute(*job);
    job->schedule.reset();
    job->done.fire();
    return;
  }

  SYNC_CHECK(world_.fidelity() == Fidelity::kFlow || master,
             "fidelity " << to_string(world_.fidelity()));
  job->schedule = schedule(*job->entry);
  std::shared_ptr<Job> previous = std::move(last_job_);
  last_job_ = job;
  if (world_.options().elastic) {
    std::erase_if(in_flight_, [](const std::shared_ptr<Job>& j) { return j->done.fired(); });
    in_flight_.push_back(job);
  }
  const std::string name = concat('g', id_, '/', to_string(job->call.kind), '#', job->seq + 1);
  simgrid::s4u::Actor::create(
      name, host(0), [self = shared_from_this(), job, previous, compute, master] {
        try {
          if (previous) previous->done.wait();  // one collective at a time, in issue order
          if (master)
            run_through_master_as_flows(*self, job->call.count);
          else
            run_rounds_as_flows(*self, *job->schedule, job->call);
          if (!job->abandoned) compute(*job);
        } catch (const simgrid::ForcefulKillException&) {
          throw;
        } catch (...) {
          if (!job->abandoned) job->error = std::current_exception();
        }
        job->end_time = simgrid::s4u::Engine::get_clock();
        job->schedule.reset();
        job->done.fire();
      });
}

std::shared_ptr<ControlSlot> Group::control(int rank, int a, int b, std::span<const float> span,
                                            FunctionRef<void(ControlSlot&)> on_last) {
  const size_t r = static_cast<size_t>(rank);
  const uint64_t seq = next_control_[r]++;
  std::shared_ptr<ControlSlot> result = find_or_create(open_controls_, seq, [&] {
    auto created = std::make_shared<ControlSlot>();
    const size_t p = members_.size();
    created->a.assign(p, 0);
    created->b.assign(p, 0);
    created->spans.resize(p);
    created->arrived.assign(p, 0);
    return created;
  });
  result->a[r] = a;
  result->b[r] = b;
  result->spans[r] = span;
  result->arrived[r] = 1;
  if (++result->num_arrived == size()) {
    open_controls_.erase(seq);
    on_last(*result);
    result->done.fire();
  } else {
    result->done.wait();
  }
  return result;
}

void prepare_rank(const CollCall& call, int p, std::span<float> data) {
  if (call.kind == CollectiveKind::kAllreduce || call.kind == CollectiveKind::kReduceScatter)
    prepare(call.op, p, data, call.wire);
}

void finish_rank(const CollCall& call, int rank, int p, std::span<float> data) {
  if (call.kind == CollectiveKind::kAllreduce ||
      (call.kind == CollectiveKind::kReduce && rank == call.root))
    finish(call.op, p, data, call.wire);
}

void run_steps(Group& group, int rank, const Schedule& schedule, std::span<float> data,
               const CollCall& call, BlockedOn* blocked, Job* job) {
  SimWorld& world = group.world();
  const bool emulate = world.emulate();
  SimStats& stats = world.stats();
  const NetworkFactors& overheads = world.platform().network;
  const WireFormat wire = call.wire;
  pay_overhead(stats, group.setup_seconds(call));
  const Step* before = nullptr;  // this rank's step before, idle rounds skipped
  for (size_t k = 0; k < schedule.rounds.size(); ++k) {
    const Step& step = schedule.rounds[k][static_cast<size_t>(rank)];
    if (step.send_to < 0 && step.recv_from < 0) continue;
    simgrid::s4u::CommPtr out, in;
    if (step.send_to >= 0) {
      pay_overhead(stats, overheads.send_overhead_s);
      pay_overhead(stats, group.cpu_seconds(send_pass_seconds(overheads, wire, step.send.count,
                                                              forwards_received(before, step))));
      void* payload = &g_no_payload;
      if (emulate) {  // a snapshot of the segment, the receiver's once the comm completes
        const auto first = data.begin() + static_cast<std::ptrdiff_t>(step.send.offset);
        auto segment = std::make_unique<std::vector<float>>(
            first, first + static_cast<std::ptrdiff_t>(step.send.count));
        payload = segment.get();
        if (job != nullptr)  // or the job's (Job::sent)
          job->sent.push_back(std::move(segment));
        else
          std::ignore = segment.release();
      }
      out = group.mailbox(rank, step.send_to, Channel::kCollective)
                ->put_async(payload, payload_bytes(step.send.count, wire));
      ++stats.comms;
      ++stats.activities;
    }
    std::vector<float>* received = nullptr;
    if (step.recv_from >= 0)
      in = group.mailbox(step.recv_from, rank, Channel::kCollective)->get_async(&received);
    if (blocked != nullptr) {
      blocked->round = static_cast<int>(k);
      blocked->peer = step.recv_from >= 0 ? step.recv_from : step.send_to;
    }
    try {
      wait_or_cancel(std::array{out, in});
    } catch (const simgrid::Exception&) {
      // A transfer with a member that was lost fails: the whole collective is (Job::release).
      if (job != nullptr && job->error) std::rethrow_exception(job->error);
      throw;
    }
    if (in) {
      pay_overhead(stats, overheads.recv_overhead_s);
      pay_overhead(stats, group.cpu_seconds(
                              recv_pass_seconds(overheads, wire, step.action, step.recv.count)));
    }
    before = &step;
    if (in && emulate) {
      const std::unique_ptr<std::vector<float>> owned(job == nullptr ? received : nullptr);
      SYNC_CHECK(received != nullptr, "round " << k << " rank " << rank << ": no payload");
      if (received->size() != step.recv.count)
        throw UserError("sim: collective on communicator " + std::to_string(group.id()) +
                        ": worker " + std::to_string(group.worker(rank)) + " expected " +
                        std::to_string(step.recv.count) + " floats from worker " +
                        std::to_string(group.worker(step.recv_from)) + " in round " +
                        std::to_string(k) + " but got " + std::to_string(received->size()) +
                        "; allowed: every member issues the same collectives in the same order");
      apply_action(step.action, call.op, data.subspan(step.recv.offset, step.recv.count), *received,
                   wire);
    }
  }
  pay_overhead(stats, group.finish_seconds(call, rank));
}

void run_rounds_as_flows(Group& group, const Schedule& schedule, const CollCall& call) {
  SimStats& stats = group.world().stats();
  const NetworkFactors& overheads = group.world().platform().network;
  const WireFormat wire = call.wire;
  pay_overhead(stats, group.setup_seconds(call));  // every rank at once
  std::vector<simgrid::s4u::CommPtr> flows;
  // Per rank, its step before (idle rounds skipped), for the encodings that forwarding saves.
  std::vector<const Step*> before(static_cast<size_t>(schedule.ranks), nullptr);
  for (const std::vector<Step>& round : schedule.rounds) {
    double encode = 0, receive = 0;  // the round's longest pass of a sender, of a receiver
    for (size_t r = 0; r < round.size(); ++r) {
      const Step& step = round[r];
      if (step.send_to >= 0) {
        encode = std::max(encode, send_pass_seconds(overheads, wire, step.send.count,
                                                    forwards_received(before[r], step)));
      }
      if (step.recv_from >= 0)
        receive =
            std::max(receive, recv_pass_seconds(overheads, wire, step.action, step.recv.count));
      if (step.send_to >= 0 || step.recv_from >= 0) before[r] = &step;
    }
    pay_overhead(stats, overheads.send_overhead_s);  // every sender at once
    pay_overhead(stats, group.cpu_seconds(encode));  // after its encoding
    flows.clear();
    for (size_t r = 0; r < round.size(); ++r) {
      const Step& step = round[r];
      if (step.send_to < 0) continue;
      flows.push_back(simgrid::s4u::Comm::sendto_async(group.host(static_cast<int>(r)),
                                                       group.host(step.send_to),
                                                       payload_bytes(step.send.count, wire)));
    }
    stats.comms += flows.size();
    stats.activities += flows.size();
    wait_or_cancel(flows);
    pay_overhead(stats, overheads.recv_overhead_s);   // every receiver at once
    pay_overhead(stats, group.cpu_seconds(receive));  // and its pass
  }
  pay_overhead(stats, group.finish_seconds(call));  // the longest finish
}

}  // namespace syncopate::sim
