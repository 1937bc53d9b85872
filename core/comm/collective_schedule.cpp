// Building collective schedules (ring, Rabenseifner, recursive doubling, trees, hierarchical,
// master) and applying their steps.
#include "core/comm/collective_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

// kAuto picks recursive doubling (latency-bound) below this many bytes.
constexpr size_t kSmallMessageBytes = 64 * 1024;

bool is_power_of_two(int p) { return p > 0 && (p & (p - 1)) == 0; }

int floor_power_of_two(int p) {
  int q = 1;
  while (q <= p / 2) q *= 2;
  return q;
}

// A schedule being built: its rounds are filled, or (with a sink) its messages only emitted.
struct Builder : Schedule {
  ScheduleSink* sink = nullptr;
  size_t num_rounds = 0;  // with a sink: 1 + the largest round emitted
};

Builder empty_schedule(Algorithm algorithm, int p, size_t count, ScheduleSink* sink) {
  SYNC_CHECK(p >= 1, "p=" << p);
  Builder s;
  s.ranks = p;
  s.count = count;
  s.algorithm = algorithm;
  s.sink = sink;
  return s;
}

// One message in `round`: `from` sends data[seg] to `to`, which applies `action` to its own
// data[seg] (every algorithm here sends and receives the same range).
void add_message(Builder& s, size_t round, int from, int to, Segment seg, RecvAction action) {
  if (s.sink != nullptr) {
    s.sink->message(ScheduledMessage{round, from, to, seg, action});
    s.num_rounds = std::max(s.num_rounds, round + 1);
    return;
  }
  while (s.rounds.size() <= round) s.rounds.emplace_back(static_cast<size_t>(s.ranks));
  Step& out = s.rounds[round][static_cast<size_t>(from)];
  Step& in = s.rounds[round][static_cast<size_t>(to)];
  SYNC_CHECK(from != to && out.send_to < 0 && in.recv_from < 0,
             "round " << round << " from " << from << " to " << to);
  out.send_to = to;
  out.send = seg;
  in.recv_from = from;
  in.recv = seg;
  in.action = action;
}

// Block i of `parts` even blocks of seg (block_of within the segment).
Segment sub_block(Segment seg, int parts, int i) {
  const BlockRange b = block_of(seg.count, parts, i);
  return {seg.offset + b.offset, b.count};
}

int mod(int a, int m) { return ((a % m) + m) % m; }

// A ring phase (RingPhase) on the ranks `ring` from round0: its messages, or the phase whole to a
// sink. Returns the first round after it.
size_t append_ring(Builder& s, size_t round0, std::span<const int> ring, Segment seg, int shift,
                   RecvAction action) {
  const RingPhase phase{
      .round0 = round0, .ring = ring, .segment = seg, .shift = shift, .action = action};
  if (s.sink == nullptr) {
    phase.for_each_message([&](const ScheduledMessage& m) {
      add_message(s, m.round, m.from, m.to, m.segment, m.action);
    });
  } else if (phase.rounds() > 0) {
    s.sink->ring(phase);
    s.num_rounds = std::max(s.num_rounds, round0 + phase.rounds());
  }
  return round0 + phase.rounds();
}

// Ring reduce-scatter over the ranks `ring` (in ring order) on segment `seg`, starting at round
// `round0`: in round k, ring[i] sends block (i-k-1) mod m to ring[i+1], which reduces it; after
// m-1 rounds ring[i] holds block i of seg fully reduced. Returns the first round after it.
size_t append_ring_reduce_scatter(Builder& s, size_t round0, std::span<const int> ring,
                                  Segment seg) {
  return append_ring(s, round0, ring, seg, 1, RecvAction::kReduce);
}

// Ring allgather: ring[i] starts with block i of seg; in round k it forwards block (i-k) mod m.
size_t append_ring_allgather(Builder& s, size_t round0, std::span<const int> ring, Segment seg) {
  return append_ring(s, round0, ring, seg, 0, RecvAction::kCopy);
}

std::vector<int> identity_ring(int p) {
  std::vector<int> ring(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) ring[static_cast<size_t>(i)] = i;
  return ring;
}

// The fold of Thakur, Rabenseifner & Gropp (2005) for non-power-of-two p: with p2 the largest
// power of two <= p and r = p - p2, rank 2i (i < r) hands its data to rank 2i+1 and sits out.
// The p2 remaining ranks get new ids: 2i+1 -> i for i < r, and x -> x - r for x >= 2r.
struct Fold {
  int p = 1;
  int p2 = 1;
  int extra() const { return p - p2; }
  int old_rank(int new_rank) const {
    return new_rank < extra() ? 2 * new_rank + 1 : new_rank + extra();
  }
};

size_t append_fold_in(Builder& s, size_t round, const Fold& fold) {
  if (fold.extra() == 0) return round;
  for (int i = 0; i < fold.extra(); ++i)
    add_message(s, round, 2 * i, 2 * i + 1, {0, s.count}, RecvAction::kReduce);
  return round + 1;
}

size_t append_fold_out(Builder& s, size_t round, const Fold& fold) {
  if (fold.extra() == 0) return round;
  for (int i = 0; i < fold.extra(); ++i)
    add_message(s, round, 2 * i + 1, 2 * i, {0, s.count}, RecvAction::kCopy);
  return round + 1;
}

Builder make_ring(int p, size_t count, ScheduleSink* sink) {
  Builder s = empty_schedule(Algorithm::kRing, p, count, sink);
  const std::vector<int> ring = identity_ring(p);
  const size_t next = append_ring_reduce_scatter(s, 0, ring, {0, count});
  append_ring_allgather(s, next, ring, {0, count});
  return s;
}

// Full-buffer exchange and reduce with partner i ^ mask. Rank a computes a (op) b and rank b
// computes b (op) a; both ops are commutative bit for bit (see apply_action), so the partners
// hold identical bits after every round, and by induction all ranks do at the end.
Builder make_recursive_doubling(int p, size_t count, ScheduleSink* sink) {
  Builder s = empty_schedule(Algorithm::kRecursiveDoubling, p, count, sink);
  const Fold fold{p, floor_power_of_two(p)};
  size_t round = append_fold_in(s, 0, fold);
  for (int mask = 1; mask < fold.p2; mask *= 2, ++round)
    for (int i = 0; i < fold.p2; ++i)
      add_message(s, round, fold.old_rank(i), fold.old_rank(i ^ mask), {0, count},
                  RecvAction::kReduce);
  append_fold_out(s, round, fold);
  return s;
}

// Reduce-scatter by recursive halving (distance p2/2 down to 1, new rank i keeps the half of its
// current range that holds block i, so it ends with block i of p2), then allgather by recursive
// doubling (distance 1 up to p2/2). Ranges are always contiguous runs of blocks.
Builder make_rabenseifner(int p, size_t count, ScheduleSink* sink) {
  Builder s = empty_schedule(Algorithm::kRabenseifner, p, count, sink);
  const Fold fold{p, floor_power_of_two(p)};
  const auto blocks = [&](int lo, int hi) {  // blocks [lo, hi) of p2 as one segment
    const size_t begin = block_of(count, fold.p2, lo).offset;
    const size_t end = hi == fold.p2 ? count : block_of(count, fold.p2, hi).offset;
    return Segment{begin, end - begin};
  };
  size_t round = append_fold_in(s, 0, fold);
  for (int mask = fold.p2 / 2; mask >= 1; mask /= 2, ++round)
    for (int i = 0; i < fold.p2; ++i) {
      const int lo = i & ~(2 * mask - 1);
      const Segment give = (i & mask) ? blocks(lo, lo + mask) : blocks(lo + mask, lo + 2 * mask);
      add_message(s, round, fold.old_rank(i), fold.old_rank(i ^ mask), give, RecvAction::kReduce);
    }
  for (int mask = 1; mask < fold.p2; mask *= 2, ++round)
    for (int i = 0; i < fold.p2; ++i) {
      const int lo = i & ~(mask - 1);
      add_message(s, round, fold.old_rank(i), fold.old_rank(i ^ mask), blocks(lo, lo + mask),
                  RecvAction::kCopy);
    }
  append_fold_out(s, round, fold);
  return s;
}

// Binomial tree over virtual ranks v = (r - root) mod p. Reduce: in round k (mask 2^k), every v
// whose lowest set bit is mask sends to v - mask. Returns the first round after it.
size_t append_binomial_reduce(Builder& s, size_t round, int root) {
  const int p = s.ranks;
  for (int mask = 1; mask < p; mask *= 2, ++round)
    for (int v = mask; v < p; v += 2 * mask)
      add_message(s, round, (v + root) % p, (v - mask + root) % p, {0, s.count},
                  RecvAction::kReduce);
  return round;
}

// Broadcast: the reduce tree run backwards, largest distance first.
size_t append_binomial_broadcast(Builder& s, size_t round, int root) {
  const int p = s.ranks;
  int top = 1;
  while (top < p) top *= 2;
  for (int mask = top / 2; mask >= 1; mask /= 2, ++round)
    for (int v = mask; v < p; v += 2 * mask)
      add_message(s, round, (v - mask + root) % p, (v + root) % p, {0, s.count}, RecvAction::kCopy);
  return round;
}

Builder make_binomial(int p, size_t count, ScheduleSink* sink) {
  Builder s = empty_schedule(Algorithm::kBinomialTree, p, count, sink);
  append_binomial_broadcast(s, append_binomial_reduce(s, 0, 0), 0);
  return s;
}

Builder make_master(int p, size_t count, ScheduleSink* sink) {
  Builder s = empty_schedule(Algorithm::kMaster, p, count, sink);
  for (int k = 1; k < p; ++k)
    add_message(s, static_cast<size_t>(k - 1), k, 0, {0, count}, RecvAction::kReduce);
  for (int k = 1; k < p; ++k)
    add_message(s, static_cast<size_t>(p - 2 + k), 0, k, {0, count}, RecvAction::kCopy);
  return s;
}

// Ring reduce-scatter inside every node (local rank j ends with shard j of L), ring allreduce
// of shard j across nodes among the ranks of local index j, ring allgather inside every node.
// Ranks of a node are ordered by global rank; nodes by their id. Needs the same number L of
// ranks in every node; otherwise this falls back to a flat ring (schedule.algorithm = kRing).
Builder make_hierarchical(int p, size_t count, std::span<const int> node_of_rank,
                          ScheduleSink* sink) {
  if (node_of_rank.size() != static_cast<size_t>(p))
    throw UserError("collective_schedule.cpp: node_of_rank: has " +
                    std::to_string(node_of_rank.size()) + " entries for " + std::to_string(p) +
                    " ranks; allowed: exactly one node id per rank");
  std::map<int, std::vector<int>> by_node;
  for (int r = 0; r < p; ++r) by_node[node_of_rank[static_cast<size_t>(r)]].push_back(r);
  std::vector<std::vector<int>> nodes;
  for (auto& [id, ranks] : by_node) nodes.push_back(std::move(ranks));
  const size_t local = nodes.front().size();
  for (const auto& n : nodes)
    if (n.size() != local) return make_ring(p, count, sink);

  Builder s = empty_schedule(Algorithm::kHierarchical, p, count, sink);
  const int num_local = static_cast<int>(local);
  const size_t cross_start = static_cast<size_t>(num_local - 1);
  for (const auto& n : nodes) append_ring_reduce_scatter(s, 0, n, {0, count});
  size_t after_cross = cross_start;
  for (size_t j = 0; j < local; ++j) {
    std::vector<int> ring;
    for (const auto& n : nodes) ring.push_back(n[j]);
    const Segment shard = sub_block({0, count}, num_local, static_cast<int>(j));
    const size_t mid = append_ring_reduce_scatter(s, cross_start, ring, shard);
    after_cross = append_ring_allgather(s, mid, ring, shard);
  }
  for (const auto& n : nodes) append_ring_allgather(s, after_cross, n, {0, count});
  return s;
}

void check_segment(Segment seg, size_t count, size_t round, size_t rank) {
  SYNC_CHECK(seg.offset <= count && seg.count <= count - seg.offset,
             "round " << round << " rank " << rank << " segment [" << seg.offset << ", +"
                      << seg.count << ") of " << count);
}

// max that is commutative bit for bit: +0 beats -0, and any NaN gives the canonical quiet NaN.
float commutative_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

}  // namespace

Algorithm resolve_algorithm(Algorithm requested, int p, size_t bytes,
                            std::span<const int> node_of_rank) {
  if (requested != Algorithm::kAuto) return requested;
  const bool multi_node = std::any_of(node_of_rank.begin(), node_of_rank.end(),
                                      [&](int node) { return node != node_of_rank.front(); });
  if (multi_node) return Algorithm::kHierarchical;
  if (bytes < kSmallMessageBytes) return Algorithm::kRecursiveDoubling;
  if (is_power_of_two(p)) return Algorithm::kRabenseifner;
  return Algorithm::kRing;
}

namespace {

Builder build_allreduce(Algorithm algorithm, int p, size_t count, std::span<const int> node_of_rank,
                        ScheduleSink* sink) {
  SYNC_CHECK(p >= 1, "p=" << p);
  switch (resolve_algorithm(algorithm, p, count * sizeof(float), node_of_rank)) {
    case Algorithm::kRing:
      return make_ring(p, count, sink);
    case Algorithm::kRabenseifner:
      return make_rabenseifner(p, count, sink);
    case Algorithm::kRecursiveDoubling:
      return make_recursive_doubling(p, count, sink);
    case Algorithm::kBinomialTree:
      return make_binomial(p, count, sink);
    case Algorithm::kHierarchical:
      return make_hierarchical(p, count, node_of_rank, sink);
    case Algorithm::kMaster:
      return make_master(p, count, sink);
    case Algorithm::kAuto:
      break;
  }
  SYNC_CHECK(false, "unresolved algorithm " << static_cast<int>(algorithm));
  return {};
}

// The layout a reduce-scatter or allgather runs in: grouped by local index for kHierarchical
// and kAuto where the ranks form equal nodes, else in place (the ring).
GatherLayout layout_for(Algorithm algorithm, int p, std::span<const int> node_of_rank) {
  if (node_of_rank.empty()) return {.ranks = p};
  SYNC_CHECK(node_of_rank.size() == static_cast<size_t>(p),
             node_of_rank.size() << " node ids for " << p << " ranks");
  return gather_layout(node_of_rank).for_algorithm(algorithm);
}

// The rings of a hierarchical reduce-scatter or allgather in the grouped layout: each node's
// ranks, and across nodes the ranks of each local index.
struct NodeRings {
  std::vector<std::vector<int>> inside;  // [node]
  std::vector<std::vector<int>> across;  // [local index]
  explicit NodeRings(const GatherLayout& layout) {
    const int per_node = layout.per_node, nodes = layout.ranks / per_node;
    inside.assign(static_cast<size_t>(nodes), {});
    across.assign(static_cast<size_t>(per_node), {});
    for (int r = 0; r < layout.ranks; ++r) {
      inside[static_cast<size_t>(r / per_node)].push_back(r);
      across[static_cast<size_t>(r % per_node)].push_back(r);
    }
  }
};

// A reduce-scatter (reduce) or an allgather. Ring: one ring over all ranks. Hierarchical (the
// grouped layout): a reduce-scatter's ring inside every node leaves local index j with shard j of
// L reduced over its node, then a ring across nodes among the ranks of index j leaves node n with
// block n of that shard, its grouped block; an allgather runs the two the other way round.
Builder build_gather_phase(bool reduce, Algorithm algorithm, int p, size_t count,
                           std::span<const int> node_of_rank, ScheduleSink* sink) {
  const GatherLayout layout = layout_for(algorithm, p, node_of_rank);
  const int shift = reduce ? 1 : 0;
  const RecvAction action = reduce ? RecvAction::kReduce : RecvAction::kCopy;
  if (layout.in_place()) {
    Builder s = empty_schedule(Algorithm::kRing, p, count, sink);
    append_ring(s, 0, identity_ring(p), {0, count}, shift, action);
    return s;
  }
  Builder s = empty_schedule(Algorithm::kHierarchical, p, count, sink);
  const NodeRings rings(layout);
  // Each runs its rings from round0 (all at once) and returns the first round after them.
  const auto inside = [&](size_t round0) {
    size_t next = round0;
    for (const auto& ring : rings.inside)
      next = append_ring(s, round0, ring, {0, count}, shift, action);
    return next;
  };
  const auto across = [&](size_t round0) {
    size_t next = round0;
    for (size_t j = 0; j < rings.across.size(); ++j)
      next =
          append_ring(s, round0, rings.across[j],
                      sub_block({0, count}, layout.per_node, static_cast<int>(j)), shift, action);
    return next;
  };
  if (reduce)
    across(inside(0));
  else
    inside(across(0));
  return s;
}

Builder build_broadcast(int p, size_t count, int root, ScheduleSink* sink) {
  Builder s = empty_schedule(Algorithm::kBinomialTree, p, count, sink);
  SYNC_CHECK(root >= 0 && root < p, "root=" << root << " p=" << p);
  append_binomial_broadcast(s, 0, root);
  return s;
}

Builder build_reduce(int p, size_t count, int root, ScheduleSink* sink) {
  Builder s = empty_schedule(Algorithm::kBinomialTree, p, count, sink);
  SYNC_CHECK(root >= 0 && root < p, "root=" << root << " p=" << p);
  append_binomial_reduce(s, 0, root);
  return s;
}

// Dissemination: in round k every rank r sends zero floats to r + 2^k and receives from r - 2^k.
Builder build_barrier(int p, ScheduleSink* sink) {
  Builder s = empty_schedule(Algorithm::kRecursiveDoubling, p, 0, sink);
  size_t round = 0;
  for (int d = 1; d < p; d *= 2, ++round)
    for (int r = 0; r < p; ++r) add_message(s, round, r, (r + d) % p, {0, 0}, RecvAction::kCopy);
  return s;
}

Builder build(CollectiveKind kind, Algorithm algorithm, int p, size_t count, int root,
              std::span<const int> node_of_rank, ScheduleSink* sink) {
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return build_allreduce(algorithm, p, count, node_of_rank, sink);
    case CollectiveKind::kReduceScatter:
      return build_gather_phase(true, algorithm, p, count, node_of_rank, sink);
    case CollectiveKind::kAllgather:
      return build_gather_phase(false, algorithm, p, count, node_of_rank, sink);
    case CollectiveKind::kBroadcast:
      return build_broadcast(p, count, root, sink);
    case CollectiveKind::kReduce:
      return build_reduce(p, count, root, sink);
    case CollectiveKind::kBarrier:
      SYNC_CHECK(count == 0, "barrier of " << count << " floats");
      return build_barrier(p, sink);
  }
  SYNC_CHECK(false, "unknown collective kind " << static_cast<int>(kind));
  return {};
}

Schedule built(Builder&& s) { return std::move(static_cast<Schedule&>(s)); }

}  // namespace

Schedule make_allreduce_schedule(Algorithm algorithm, int p, size_t count,
                                 std::span<const int> node_of_rank) {
  return built(build_allreduce(algorithm, p, count, node_of_rank, nullptr));
}

Schedule make_reduce_scatter_schedule(int p, size_t count) {
  return built(build_gather_phase(true, Algorithm::kRing, p, count, {}, nullptr));
}

Schedule make_allgather_schedule(int p, size_t count) {
  return built(build_gather_phase(false, Algorithm::kRing, p, count, {}, nullptr));
}

GatherLayout gather_layout(std::span<const int> node_of_rank) {
  const int p = static_cast<int>(node_of_rank.size());
  const GatherLayout in_place{.ranks = std::max(p, 1)};
  if (p < 2) return in_place;
  int per_node = 1;
  while (per_node < p && node_of_rank[static_cast<size_t>(per_node)] == node_of_rank[0]) ++per_node;
  if (per_node == 1 || per_node == p || p % per_node != 0) return in_place;
  std::vector<int> seen;
  for (int first = 0; first < p; first += per_node) {
    const int node = node_of_rank[static_cast<size_t>(first)];
    if (std::find(seen.begin(), seen.end(), node) != seen.end()) return in_place;
    seen.push_back(node);
    for (int r = first; r < first + per_node; ++r)
      if (node_of_rank[static_cast<size_t>(r)] != node) return in_place;
  }
  return {.ranks = p, .per_node = per_node};
}

Segment GatherLayout::block(size_t count, int rank) const {
  SYNC_CHECK(rank >= 0 && rank < ranks, "rank " << rank << " of " << ranks);
  if (in_place()) {
    const BlockRange b = block_of(count, ranks, rank);
    return {b.offset, b.count};
  }
  return sub_block(sub_block({0, count}, per_node, rank % per_node), ranks / per_node,
                   rank / per_node);
}

void GatherLayout::to_schedule(std::span<const float> caller, std::span<float> schedule) const {
  SYNC_CHECK(caller.size() == schedule.size(), caller.size() << " vs " << schedule.size());
  for (int r = 0; r < ranks; ++r) {
    const BlockRange from = block_of(caller.size(), ranks, r);
    const Segment to = block(caller.size(), r);
    std::copy_n(caller.begin() + static_cast<std::ptrdiff_t>(from.offset), from.count,
                schedule.begin() + static_cast<std::ptrdiff_t>(to.offset));
  }
}

void GatherLayout::to_caller(std::span<const float> schedule, std::span<float> caller) const {
  SYNC_CHECK(caller.size() == schedule.size(), caller.size() << " vs " << schedule.size());
  for (int r = 0; r < ranks; ++r) {
    const Segment from = block(caller.size(), r);
    const BlockRange to = block_of(caller.size(), ranks, r);
    std::copy_n(schedule.begin() + static_cast<std::ptrdiff_t>(from.offset), from.count,
                caller.begin() + static_cast<std::ptrdiff_t>(to.offset));
  }
}

void GatherLayout::into_schedule(std::span<const float> caller, std::vector<float>& work) const {
  if (in_place()) {
    work.assign(caller.begin(), caller.end());
    return;
  }
  work.resize(caller.size());
  to_schedule(caller, work);
}

void GatherLayout::back_to_caller(std::span<float> all, std::vector<float>& scratch) const {
  if (in_place()) return;
  scratch.assign(all.begin(), all.end());
  to_caller(scratch, all);
}

Schedule make_broadcast_schedule(int p, size_t count, int root) {
  return built(build_broadcast(p, count, root, nullptr));
}

Schedule make_reduce_schedule(int p, size_t count, int root) {
  return built(build_reduce(p, count, root, nullptr));
}

Schedule make_barrier_schedule(int p) { return built(build_barrier(p, nullptr)); }

void RingPhase::for_each_message(MessageSink sink) const {
  const int m = static_cast<int>(ring.size());
  for (int k = 0; k < m - 1; ++k)
    for (int i = 0; i < m; ++i)
      sink(ScheduledMessage{.round = round0 + static_cast<size_t>(k),
                            .from = ring[static_cast<size_t>(i)],
                            .to = ring[static_cast<size_t>((i + 1) % m)],
                            .segment = sub_block(segment, m, mod(i - k - shift, m)),
                            .action = action});
}

Schedule make_schedule(CollectiveKind kind, Algorithm algorithm, int p, size_t count, int root,
                       std::span<const int> node_of_rank) {
  return built(build(kind, algorithm, p, count, root, node_of_rank, nullptr));
}

ScheduleOutline stream_schedule(CollectiveKind kind, Algorithm algorithm, int p, size_t count,
                                int root, std::span<const int> node_of_rank, ScheduleSink& sink) {
  const Builder s = build(kind, algorithm, p, count, root, node_of_rank, &sink);
  return {.algorithm = s.algorithm, .rounds = s.num_rounds};
}

std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return "allreduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllgather:
      return "allgather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kBarrier:
      return "barrier";
  }
  return "?";
}

std::vector<Step> steps_of_rank(const Schedule& schedule, int rank) {
  SYNC_CHECK(rank >= 0 && rank < schedule.ranks, "rank " << rank << " of " << schedule.ranks);
  std::vector<Step> mine;
  for (const std::vector<Step>& round : schedule.rounds) {
    SYNC_CHECK(round.size() == static_cast<size_t>(schedule.ranks), "round of " << round.size());
    const Step& step = round[static_cast<size_t>(rank)];
    if (step.send_to < 0 && step.recv_from < 0) continue;
    SYNC_CHECK(step.send_to < 0 || step.send.offset + step.send.count <= schedule.count,
               "send segment");
    SYNC_CHECK(step.recv_from < 0 || step.recv.offset + step.recv.count <= schedule.count,
               "recv segment");
    mine.push_back(step);
  }
  return mine;
}

void apply_action(RecvAction action, ReduceOp op, std::span<float> dst, std::span<const float> src,
                  WireFormat wire) {
  SYNC_CHECK(dst.size() == src.size(), "dst " << dst.size() << " src " << src.size());
  if (action == RecvAction::kCopy) {
    std::copy(src.begin(), src.end(), dst.begin());
    return;
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      add_rounded(dst, src, wire);
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = commutative_max(dst[i], src[i]);
      return;
  }
  SYNC_CHECK(false, "unknown op " << static_cast<int>(op));
}

void apply_wire_action(RecvAction action, ReduceOp op, std::span<float> dst,
                       std::span<const uint16_t> src, WireFormat wire, std::span<float> scratch) {
  SYNC_CHECK(dst.size() == src.size() && scratch.size() >= src.size(),
             "dst " << dst.size() << " src " << src.size() << " scratch " << scratch.size());
  if (action == RecvAction::kCopy) return decode_wire(src, wire, dst);
  if (op == ReduceOp::kSum || op == ReduceOp::kAvg) return add_decoded(dst, src, wire);
  const std::span<float> decoded = scratch.first(src.size());
  decode_wire(src, wire, decoded);
  apply_action(action, op, dst, decoded, wire);
}

void divide_by_ranks(int p, std::span<float> data) {
  SYNC_CHECK(p >= 1, "p=" << p);
  // x / p, correctly rounded (a reference mean's bits). Where p is a power of two, 1/p is exact
  // and x * (1/p) is that same correctly rounded quotient (subnormals, infinities and NaNs
  // included), at a multiplication's cost, a fraction of a division's (see the README's
  // "Collectives on MPI"). Otherwise x * (1/p) would round twice and can differ in the last bit.
  if ((p & (p - 1)) == 0) {
    const float reciprocal = 1.0f / static_cast<float>(p);
    for (float& x : data) x *= reciprocal;
  } else {
    const float divisor = static_cast<float>(p);
    for (float& x : data) x /= divisor;
  }
}

bool forwards_received(const Step* before, const Step& step) {
  return step.send_to >= 0 && before != nullptr && before->recv_from >= 0 &&
         before->action == RecvAction::kCopy && before->recv.offset == step.send.offset &&
         before->recv.count == step.send.count;
}

void prepare(ReduceOp op, int p, std::span<float> data, WireFormat wire) {
  if (wire == WireFormat::kFp32 || p == 1) return;
  if (op == ReduceOp::kAvg) divide_by_ranks(p, data);
  round_to_wire(data, wire);
}

void finish(ReduceOp op, int p, std::span<float> data, WireFormat wire) {
  if (op != ReduceOp::kAvg || wire != WireFormat::kFp32 || p == 1) return;
  divide_by_ranks(p, data);
}

void execute_in_memory(const Schedule& schedule, std::span<const std::span<float>> buffers,
                       ReduceOp op, WireFormat wire) {
  const size_t p = static_cast<size_t>(schedule.ranks);
  SYNC_CHECK(buffers.size() == p, "buffers " << buffers.size() << " ranks " << p);
  for (size_t r = 0; r < p; ++r)
    SYNC_CHECK(buffers[r].size() == schedule.count,
               "rank " << r << " buffer " << buffers[r].size() << " count " << schedule.count);
  std::vector<std::vector<float>> in_flight(p);  // in_flight[r]: what rank r sends this round
  for (size_t k = 0; k < schedule.rounds.size(); ++k) {
    const std::vector<Step>& round = schedule.rounds[k];
    SYNC_CHECK(round.size() == p, "round " << k << " has " << round.size() << " steps");
    for (size_t r = 0; r < p; ++r) {
      const Step& step = round[r];
      if (step.send_to < 0) continue;
      SYNC_CHECK(static_cast<size_t>(step.send_to) < p &&
                     round[static_cast<size_t>(step.send_to)].recv_from == static_cast<int>(r),
                 "round " << k << ": rank " << r << " sends to " << step.send_to
                          << " which does not receive from it");
      check_segment(step.send, schedule.count, k, r);
      const auto first = buffers[r].begin() + static_cast<std::ptrdiff_t>(step.send.offset);
      in_flight[r].assign(first, first + static_cast<std::ptrdiff_t>(step.send.count));
    }
    for (size_t r = 0; r < p; ++r) {
      const Step& step = round[r];
      if (step.recv_from < 0) continue;
      const size_t from = static_cast<size_t>(step.recv_from);
      SYNC_CHECK(from < p && round[from].send_to == static_cast<int>(r) &&
                     round[from].send.count == step.recv.count,
                 "round " << k << ": rank " << r << " receives " << step.recv.count << " from "
                          << step.recv_from << " which does not send that to it");
      check_segment(step.recv, schedule.count, k, r);
      apply_action(step.action, op, buffers[r].subspan(step.recv.offset, step.recv.count),
                   in_flight[from], wire);
    }
  }
}

size_t bytes_sent(const Schedule& schedule, int rank, WireFormat wire) {
  SYNC_CHECK(rank >= 0 && rank < schedule.ranks, "rank=" << rank << " p=" << schedule.ranks);
  size_t bytes = 0;
  for (const auto& round : schedule.rounds) {
    const Step& step = round[static_cast<size_t>(rank)];
    if (step.send_to >= 0 && step.send_to != rank) bytes += step.send.count * element_bytes(wire);
  }
  return bytes;
}

}  // namespace syncopate
