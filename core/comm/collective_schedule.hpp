#pragma once
// Collective algorithms as data: for every rank, a list of steps, round by round.
//
// Every backend runs the same schedules: the MPI backend with point-to-point messages, the
// simulator with SimGrid comms (message fidelity) or by executing the arithmetic in memory and
// timing the rounds as flows or closed forms (coarser fidelities). All of them therefore perform
// the same additions in the same order, so an emulated simulation and an MPI run agree bit for
// bit, and every rank ends with bit-identical results.
//
// Semantics of one step of rank r: send data[send.offset, +send.count) to send_to (if >= 0);
// receive recv.count floats from recv_from (if >= 0) into scratch; then, after both completed,
// apply `action` to data[recv.offset, +recv.count) with the scratch. Sends read the buffer as it
// was before this round's actions. A rank's round k+1 starts after its round k completed; the
// messages of one round may all be in flight at once.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/function_ref.hpp"
#include "core/comm/comm.hpp"

namespace syncopate {

struct Segment {
  size_t offset = 0;
  size_t count = 0;
};

enum class RecvAction { kReduce, kCopy };

struct Step {
  int send_to = -1;
  Segment send;
  int recv_from = -1;
  Segment recv;
  RecvAction action = RecvAction::kCopy;
};

struct Schedule {
  int ranks = 0;
  size_t count = 0;                        // elements in each rank's buffer
  Algorithm algorithm = Algorithm::kRing;  // resolved (never kAuto)
  std::vector<std::vector<Step>> rounds;   // rounds[k][r]: rank r's step in round k
};

// Picks a concrete algorithm for kAuto from the rank count, message size and whether the ranks
// span several nodes (node_of_rank has more than one distinct value).
Algorithm resolve_algorithm(Algorithm requested, int p, size_t bytes,
                            std::span<const int> node_of_rank);

// Allreduce (sum; ReduceOp::kAvg is a sum followed by finish()). node_of_rank (size p) is used by
// kHierarchical; for the others it may be empty. kMaster: p-1 rounds in which rank k sends to
// rank 0, which reduces in rank order, then p-1 rounds in which rank 0 sends back.
Schedule make_allreduce_schedule(Algorithm algorithm, int p, size_t count,
                                 std::span<const int> node_of_rank = {});
// Ring reduce-scatter: rank i ends with block_of(count, p, i) reduced, in place.
Schedule make_reduce_scatter_schedule(int p, size_t count);
// Ring allgather: rank i starts with block_of(count, p, i) in place; all end with every block.
Schedule make_allgather_schedule(int p, size_t count);

// Where the reduce-scatter and allgather schedules keep the ranks' blocks. A caller's buffer
// holds rank r's block at block_of(count, p, r), and the ring keeps it there. When the ranks span
// N > 1 nodes of L ranks each, numbered node by node (rank r = n L + j: node n, local index j),
// the hierarchical schedules keep it at sub_block(block_of(count, L, j), N, n) instead: the
// blocks of one local index lie together, so that the ring inside a node moves one contiguous
// range per message and the ring across nodes (the ranks of one local index) works within that
// range. Each rank's block has the same size in both layouts (block_of's rule; tested), so the
// two differ by a permutation of blocks, which the backends apply around the schedule.
struct GatherLayout {
  int ranks = 1;
  int per_node = 0;  // L when grouped by local index; 0: in place (the ring's layout)
  bool in_place() const { return per_node == 0; }
  // The layout `algorithm` runs in: this one for kAuto and kHierarchical, in place for the rest.
  GatherLayout for_algorithm(Algorithm algorithm) const {
    const bool hierarchical =
        algorithm == Algorithm::kAuto || algorithm == Algorithm::kHierarchical;
    return hierarchical ? *this : GatherLayout{.ranks = ranks};
  }
  // Rank `rank`'s block of a `count`-element buffer in this layout.
  Segment block(size_t count, int rank) const;
  // Copies every block from the caller's layout to this one; the spans have one size and do not
  // overlap.
  void to_schedule(std::span<const float> caller, std::span<float> schedule) const;
  // The inverse.
  void to_caller(std::span<const float> schedule, std::span<float> caller) const;
  // A reduce-scatter's input: `work` = `caller` in this layout (resized; its capacity kept).
  void into_schedule(std::span<const float> caller, std::vector<float>& work) const;
  // A gathered buffer, in this layout, back to the caller's in place through `scratch` (nothing
  // when in place).
  void back_to_caller(std::span<float> all, std::vector<float>& scratch) const;
};
// The layout of the hierarchical reduce-scatter and allgather on ranks placed as node_of_rank
// says: grouped by local index when the ranks span several nodes, each of them holding the
// same number of consecutive ranks; in place otherwise (they then run the ring).
GatherLayout gather_layout(std::span<const int> node_of_rank);

// Binomial trees rooted at `root`.
Schedule make_broadcast_schedule(int p, size_t count, int root);
Schedule make_reduce_schedule(int p, size_t count, int root);
// A barrier as zero-float messages (dissemination: ceil(log2 p) rounds; count must be 0).
Schedule make_barrier_schedule(int p);

// The collectives that have schedules, and one entry point for all of them. `algorithm` matters
// for kAllreduce, and for kReduceScatter and kAllgather: kHierarchical or kAuto (the same) run a
// ring inside every node and then one across nodes per local index (an allgather: across nodes
// first) where gather_layout(node_of_rank) is not in place; otherwise, and for every other
// algorithm, they run the ring. The others are binomial trees. `root` matters for kBroadcast and
// kReduce.
enum class CollectiveKind { kAllreduce, kReduceScatter, kAllgather, kBroadcast, kReduce, kBarrier };
std::string_view to_string(CollectiveKind kind);
Schedule make_schedule(CollectiveKind kind, Algorithm algorithm, int p, size_t count, int root,
                       std::span<const int> node_of_rank = {});
// What one rank of a distributed run executes: its steps that send or receive, in round order
// (a schedule holds every rank's: O(p^2) for a ring). Checks each segment against the count.
std::vector<Step> steps_of_rank(const Schedule& schedule, int rank);

// One message of a schedule: in `round`, `from` sends data[segment] to `to`, which applies
// `action` to its own data[segment].
struct ScheduledMessage {
  size_t round = 0;
  int from = -1;
  int to = -1;
  Segment segment;
  RecvAction action = RecvAction::kCopy;
};
using MessageSink = FunctionRef<void(const ScheduledMessage&)>;

// A ring phase (a ring reduce-scatter or allgather, alone or inside the hierarchical
// allreduce): m - 1 rounds from round0 in which ring[i] sends block (i - k - shift) mod m of
// `segment` (block_of within it) to ring[(i + 1) mod m], which applies `action`; shift is 1 for
// a reduce-scatter, 0 for an allgather.
struct RingPhase {
  size_t round0 = 0;
  std::span<const int> ring;  // ranks in ring order
  Segment segment;
  int shift = 0;
  RecvAction action = RecvAction::kCopy;
  size_t rounds() const { return ring.size() < 2 ? 0 : ring.size() - 1; }
  // Its m (m - 1) messages, round by round, in ring order.
  void for_each_message(MessageSink sink) const;
};

// Receives a streamed schedule: single messages, and ring phases whole, which a sink may account
// in closed form (m (m - 1) messages: 2.1 G per hierarchical allreduce over 65,536 ranks). By
// default a phase's messages come to message() one by one.
class ScheduleSink {
 public:
  virtual void message(const ScheduledMessage& m) = 0;
  virtual void ring(const RingPhase& phase) {
    phase.for_each_message([this](const ScheduledMessage& m) { message(m); });
  }

 protected:
  ~ScheduleSink() = default;
};

// A ScheduleSink that gives every message, those of ring phases included, to a callable (which
// it holds).
template <typename F>
class EachMessage final : public ScheduleSink {
 public:
  explicit EachMessage(F f) : f_(std::move(f)) {}
  void message(const ScheduledMessage& m) override { f_(m); }

 private:
  F f_;
};

struct ScheduleOutline {
  Algorithm algorithm = Algorithm::kRing;  // as Schedule::algorithm
  size_t rounds = 0;                       // as Schedule::rounds.size()
};
// The messages of make_schedule(kind, algorithm, p, count, root, node_of_rank), given to `sink`
// one by one instead of being stored: O(p) memory where the schedule holds rounds x p steps
// (a hierarchical allreduce over n nodes of L ranks has 2(n - 1) + 2(L - 1) rounds). Rounds may
// interleave (the hierarchical one emits each node's rounds in turn); within a round each message
// comes once.
ScheduleOutline stream_schedule(CollectiveKind kind, Algorithm algorithm, int p, size_t count,
                                int root, std::span<const int> node_of_rank, ScheduleSink& sink);

// dst = dst (op) src, or dst = src for kCopy. In a 16-bit wire format each reduced element is
// rounded to it (src is already representable: see core/comm/compression.hpp).
void apply_action(RecvAction action, ReduceOp op, std::span<float> dst, std::span<const float> src,
                  WireFormat wire = WireFormat::kFp32);
// apply_action of a segment received encoded in a 16-bit wire format, in one pass where the action
// allows: kCopy decodes into dst, a sum adds as it decodes (add_decoded); kMax decodes into
// `scratch` (at least src.size() floats) first. The bits of decode_wire, then apply_action.
void apply_wire_action(RecvAction action, ReduceOp op, std::span<float> dst,
                       std::span<const uint16_t> src, WireFormat wire, std::span<float> scratch);
// Whether `step` sends on, unchanged, the segment that `before` (the same rank's step before it,
// idle rounds skipped; nullptr for its first) received and copied, as a ring's allgather does. In a
// 16-bit wire format such a send goes out in the encoding it came in, with no encoding pass:
// decoding and encoding are exact on every encoding that encode_wire makes.
bool forwards_received(const Step* before, const Step& step);
// Starts a reduction in a 16-bit wire format over p > 1 ranks: for kAvg divides by p, then
// rounds every element to the format. Nothing for kFp32 or p = 1.
void prepare(ReduceOp op, int p, std::span<float> data, WireFormat wire);
// Completes a reduction: for kAvg in fp32 divides by p (a 16-bit format divided in prepare());
// nothing for kSum/kMax, or for p = 1 (x / 1 is x: the pass would only cost time).
void finish(ReduceOp op, int p, std::span<float> data, WireFormat wire = WireFormat::kFp32);
// data[i] / p, correctly rounded (kAvg's division in prepare() and finish()).
void divide_by_ranks(int p, std::span<float> data);

// Runs a schedule over all ranks' buffers in one address space (buffers[r] is rank r's), with
// exactly the arithmetic a distributed run performs. Used by tests and by the simulator's coarse
// fidelity levels in emulation mode. Does not call prepare() or finish().
void execute_in_memory(const Schedule& schedule, std::span<const std::span<float>> buffers,
                       ReduceOp op, WireFormat wire = WireFormat::kFp32);

// Bytes rank r sends over the whole schedule (for counters and cost models).
size_t bytes_sent(const Schedule& schedule, int rank, WireFormat wire = WireFormat::kFp32);

}  // namespace syncopate
