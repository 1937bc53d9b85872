#pragma once
// ScheduleCache: the collective schedules a group has run, built once per (kind, algorithm,
// count, root) and kept with their per-rank traffic. Every backend runs its schedules from one:
// MPI and NCCL keep one per communicator in each process (this rank's steps only), the
// simulator one per group for all its ranks (one address space runs them all), or only their
// traffic when it times them without running them (analytic fidelity, cost-only).
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "core/comm/collective_schedule.hpp"

namespace syncopate {

// Identifies a schedule. Made by ScheduleCache::key: kAuto resolved for kAllreduce (from the
// bytes in the wire format) and for kReduceScatter and kAllgather (kAuto and kHierarchical give
// kHierarchical where the group's gather_layout(kAuto) is not in place; the rest kRing), that of
// the other kinds left kAuto (fixed by the kind) and the root of kinds without one zeroed. The wire
// format sets the bytes of the traffic.
struct ScheduleKey {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  Algorithm algorithm = Algorithm::kAuto;
  size_t count = 0;
  int root = 0;
  WireFormat wire = WireFormat::kFp32;
  auto operator<=>(const ScheduleKey&) const = default;
};

// What a rank sends and receives over one schedule.
struct RankTraffic {
  uint64_t bytes_sent = 0;
  uint64_t bytes_recv = 0;
  uint64_t sends = 0;  // messages sent
};

// One cached schedule.
struct CachedSchedule {
  ScheduleKey key;
  Algorithm algorithm = Algorithm::kRing;    // what it is (kHierarchical may fall back to kRing)
  std::vector<RankTraffic> traffic;          // per rank
  uint64_t messages = 0;                     // all ranks
  std::vector<Step> steps;                   // CacheScope::kOneRank: the rank's steps
  size_t max_recv = 0;                       // kOneRank: the largest recv.count among them
  std::shared_ptr<const Schedule> schedule;  // kAllRanks: null once dropped (see schedule())
  size_t rounds = 0;                         // the schedule's
};

enum class CacheScope {
  kOneRank,   // one process of a distributed run: keeps that rank's steps only
  kAllRanks,  // one address space runs every rank: keeps whole schedules
  // One address space times every rank's schedule without running it: keeps the traffic only;
  // the messages are streamed (stream_schedule), never stored, so the memory is O(ranks) per
  // entry where a whole schedule is O(rounds x ranks).
  kTrafficOnly,
};

class ScheduleCache {
 public:
  // node_of_rank: the node of each rank of the group (its size is the group's), for
  // kHierarchical and for resolving kAuto. `rank`: whose steps kOneRank keeps.
  ScheduleCache(std::vector<int> node_of_rank, CacheScope scope, int rank = 0);

  int ranks() const { return static_cast<int>(node_of_rank_.size()); }
  std::span<const int> node_of_rank() const { return node_of_rank_; }
  // Where reduce-scatters and allgathers run with `algorithm` keep the blocks.
  GatherLayout gather_layout(Algorithm algorithm) const {
    return gather_layout_.for_algorithm(algorithm);
  }

  ScheduleKey key(CollectiveKind kind, Algorithm algorithm, size_t count, int root,
                  WireFormat wire = WireFormat::kFp32) const;
  // The schedule for `key`, built on first use. kOneRank keeps at most kMaxEntries schedules
  // (then starts afresh: references from earlier calls become invalid); kAllRanks keeps every
  // entry (references stay valid) but drops whole schedules beyond kMaxSteps steps in all.
  // `also` (may be null) is given every message of the schedule: as it is built or streamed
  // for a new entry, else from the kept schedule (kAllRanks) or streamed again. Streamed
  // (kTrafficOnly), ring phases come whole (ScheduleSink::ring), and so does their traffic.
  const CachedSchedule& entry(const ScheduleKey& key, ScheduleSink* also = nullptr);
  // kAllRanks: the whole schedule of an entry, rebuilt if it was dropped.
  std::shared_ptr<const Schedule> schedule(const CachedSchedule& entry);

  static constexpr size_t kMaxEntries = 256;
  // Steps (56 bytes each) of whole schedules kept at most: a flat ring at p = 1024 alone is
  // 2.1 M steps.
  static constexpr size_t kMaxSteps = size_t{6} << 20;

 private:
  Schedule build(const ScheduleKey& key) const;
  CachedSchedule stream(const ScheduleKey& key, ScheduleSink* also) const;
  void account_steps(size_t steps);

  std::vector<int> node_of_rank_;
  GatherLayout gather_layout_;
  CacheScope scope_;
  int rank_;
  std::map<ScheduleKey, CachedSchedule> entries_;
  size_t cached_steps_ = 0;
};

}  // namespace syncopate
