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

// Every message of a whole schedule, round by round, in rank order.
void for_each_message(const Schedule& s, MessageSink sink) {
  for (size_t k = 0; k < s.rounds.size(); ++k)
    for (size_t r = 0; r < s.rounds[k].size(); ++r) {
      const Step& step = s.rounds[k][r];
      if (step.send_to < 0) continue;
      const Step& peer = s.rounds[k][static_cast<size_t>(step.send_to)];
      sink(ScheduledMessage{k, static_cast<int>(r), step.send_to, step.send, peer.action});
    }
}

}  // namespace

ScheduleCache::ScheduleCache(std::vector<int> node_of_rank, CacheScope scope, int rank)
    : node_of_rank_(std::move(node_of_rank)), scope_(scope), rank_(rank) {
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

CachedSchedule ScheduleCache::stream(const ScheduleKey& key, const MessageSink* also) const {
  CachedSchedule e;
  e.key = key;
  e.traffic.assign(static_cast<size_t>(ranks()), {});
  const ScheduleOutline outline =
      stream_schedule(key.kind, key.algorithm, ranks(), key.count, key.root, node_of_rank_,
                      [&](const ScheduledMessage& m) {
                        add_traffic(m, e);
                        if (also != nullptr) (*also)(m);
                      });
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

const CachedSchedule& ScheduleCache::entry(const ScheduleKey& key, const MessageSink* also) {
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
