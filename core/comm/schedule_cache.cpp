// ScheduleCache: schedules built once per key, with their per-rank traffic.
#include "core/comm/schedule_cache.hpp"

#include "core/base/check.hpp"

namespace syncopate {
namespace {

uint64_t payload_bytes(size_t count, WireFormat wire) {
  return static_cast<uint64_t>(count) * element_bytes(wire);
}

bool has_root(CollectiveKind kind) {
  return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce;
}

// Per-rank traffic, checking that every send meets the receive that the runners pair it with.
void summarise(const Schedule& s, CachedSchedule& e) {
  const size_t p = static_cast<size_t>(s.ranks);
  e.traffic.assign(p, {});
  for (size_t k = 0; k < s.rounds.size(); ++k) {
    SYNC_CHECK(s.rounds[k].size() == p, "round " << k << " size " << s.rounds[k].size());
    for (size_t r = 0; r < p; ++r) {
      const Step& step = s.rounds[k][r];
      if (step.send_to >= 0) {
        const Step& peer = s.rounds[k][static_cast<size_t>(step.send_to)];
        SYNC_CHECK(peer.recv_from == static_cast<int>(r) && peer.recv.count == step.send.count,
                   "round " << k << ": rank " << r << " sends to " << step.send_to);
        e.traffic[r].bytes_sent += payload_bytes(step.send.count, e.key.wire);
        e.traffic[r].sends += 1;
        e.messages += 1;
      }
      if (step.recv_from >= 0)
        e.traffic[r].bytes_recv += payload_bytes(step.recv.count, e.key.wire);
    }
  }
}

void add_traffic(const ScheduledMessage& m, CachedSchedule& e) {
  const uint64_t bytes = payload_bytes(m.segment.count, e.key.wire);
  RankTraffic& from = e.traffic[static_cast<size_t>(m.from)];
  from.bytes_sent += bytes;
  from.sends += 1;
  e.traffic[static_cast<size_t>(m.to)].bytes_recv += bytes;
  e.messages += 1;
}

// A ring phase's traffic in closed form: ring[i] sends (and ring[i + 1] receives) every block of
// the segment but block (i + 1 - shift) mod m, in m - 1 messages.
void add_ring_traffic(const RingPhase& phase, CachedSchedule& e) {
  const size_t m = phase.ring.size();
  if (m < 2) return;
  const int parts = static_cast<int>(m);
  for (size_t i = 0; i < m; ++i) {
    const int kept = static_cast<int>((i + m + 1 - static_cast<size_t>(phase.shift)) % m);
    const uint64_t bytes = payload_bytes(
        phase.segment.count - block_of(phase.segment.count, parts, kept).count, e.key.wire);
    RankTraffic& from = e.traffic[static_cast<size_t>(phase.ring[i])];
    from.bytes_sent += bytes;
    from.sends += m - 1;
    e.traffic[static_cast<size_t>(phase.ring[(i + 1) % m])].bytes_recv += bytes;
  }
  e.messages += m * (m - 1);
}

// The traffic of a streamed schedule, passing everything on to `also` (may be null).
class TrafficSink final : public ScheduleSink {
 public:
  TrafficSink(CachedSchedule& e, ScheduleSink* also) : e_(e), also_(also) {}
  void message(const ScheduledMessage& m) override {
    add_traffic(m, e_);
    if (also_ != nullptr) also_->message(m);
  }
  void ring(const RingPhase& phase) override {
    add_ring_traffic(phase, e_);
    if (also_ != nullptr) also_->ring(phase);
  }

 private:
  CachedSchedule& e_;
  ScheduleSink* also_;
};

// Every message of a whole schedule, round by round, in rank order.
void for_each_message(const Schedule& s, ScheduleSink& sink) {
  for (size_t k = 0; k < s.rounds.size(); ++k)
    for (size_t r = 0; r < s.rounds[k].size(); ++r) {
      const Step& step = s.rounds[k][r];
      if (step.send_to < 0) continue;
      const Step& peer = s.rounds[k][static_cast<size_t>(step.send_to)];
      sink.message(ScheduledMessage{k, static_cast<int>(r), step.send_to, step.send, peer.action});
    }
}

}  // namespace

ScheduleCache::ScheduleCache(std::vector<int> node_of_rank, CacheScope scope, int rank)
    : node_of_rank_(std::move(node_of_rank)),
      gather_layout_(syncopate::gather_layout(node_of_rank_)),
      scope_(scope),
      rank_(rank) {
  SYNC_CHECK(!node_of_rank_.empty() && rank_ >= 0 && rank_ < ranks(),
             "rank " << rank_ << " of " << node_of_rank_.size());
}

ScheduleKey ScheduleCache::key(CollectiveKind kind, Algorithm algorithm, size_t count, int root,
                               WireFormat wire) const {
  ScheduleKey key{
      .kind = kind, .algorithm = Algorithm::kAuto, .count = count, .root = 0, .wire = wire};
  if (kind == CollectiveKind::kAllreduce)
    key.algorithm =
        resolve_algorithm(algorithm, ranks(), payload_bytes(count, wire), node_of_rank_);
  if (kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllgather)
    key.algorithm = gather_layout_.for_algorithm(algorithm).in_place() ? Algorithm::kRing
                                                                       : Algorithm::kHierarchical;
  if (has_root(kind)) key.root = root;
  return key;
}

Schedule ScheduleCache::build(const ScheduleKey& key) const {
  Schedule s = make_schedule(key.kind, key.algorithm, ranks(), key.count, key.root, node_of_rank_);
  SYNC_CHECK(s.ranks == ranks() && s.count == key.count,
             "schedule for " << s.ranks << " ranks / " << s.count << " floats, wanted " << ranks()
                             << " / " << key.count);
  return s;
}

CachedSchedule ScheduleCache::stream(const ScheduleKey& key, ScheduleSink* also) const {
  CachedSchedule e;
  e.key = key;
  e.traffic.assign(static_cast<size_t>(ranks()), {});
  TrafficSink sink(e, also);
  const ScheduleOutline outline =
      stream_schedule(key.kind, key.algorithm, ranks(), key.count, key.root, node_of_rank_, sink);
  e.algorithm = outline.algorithm;
  e.rounds = outline.rounds;
  return e;
}

void ScheduleCache::account_steps(size_t steps) {
  if (cached_steps_ + steps > kMaxSteps) {
    for (auto& [k, e] : entries_) e.schedule.reset();
    cached_steps_ = 0;
  }
  cached_steps_ += steps;
}

const CachedSchedule& ScheduleCache::entry(const ScheduleKey& key, ScheduleSink* also) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (also == nullptr) return it->second;
    if (scope_ == CacheScope::kTrafficOnly)
      stream(key, also);
    else if (scope_ == CacheScope::kAllRanks)
      for_each_message(*schedule(it->second), *also);
    else
      for_each_message(build(key), *also);
    return it->second;
  }
  if (scope_ == CacheScope::kOneRank && entries_.size() >= kMaxEntries) entries_.clear();
  if (scope_ == CacheScope::kTrafficOnly)
    return entries_.emplace(key, stream(key, also)).first->second;
  Schedule s = build(key);
  CachedSchedule e;
  e.key = key;
  e.algorithm = s.algorithm;
  e.rounds = s.rounds.size();
  summarise(s, e);
  if (also != nullptr) for_each_message(s, *also);
  if (scope_ == CacheScope::kOneRank) {
    e.steps = steps_of_rank(s, rank_);
    for (const Step& step : e.steps)
      if (step.recv_from >= 0 && step.recv.count > e.max_recv) e.max_recv = step.recv.count;
  } else {
    account_steps(s.rounds.size() * static_cast<size_t>(ranks()));
    e.schedule = std::make_shared<const Schedule>(std::move(s));
  }
  return entries_.emplace(key, std::move(e)).first->second;
}

std::shared_ptr<const Schedule> ScheduleCache::schedule(const CachedSchedule& entry) {
  SYNC_CHECK(scope_ == CacheScope::kAllRanks, "whole schedules are kept by kAllRanks only");
  auto it = entries_.find(entry.key);
  SYNC_CHECK(it != entries_.end() && &it->second == &entry, "entry of another cache");
  CachedSchedule& e = it->second;
  if (!e.schedule) {
    Schedule s = build(e.key);
    account_steps(s.rounds.size() * static_cast<size_t>(ranks()));
    e.schedule = std::make_shared<const Schedule>(std::move(s));
  }
  return e.schedule;
}

}  // namespace syncopate
