// ScheduleChannel: runs this rank's steps of a core schedule with MPI point-to-point messages.
#include "backends/mpi/schedule_channel.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace syncopate::mpi {

using detail::to_count;

namespace {

// Large segments travel as chunks; each received chunk is applied as soon as it (and the chunks
// of this step's send that read the same floats) completed: the reduction then works on data
// the copy just brought into cache, while later chunks are still in transfer. The arithmetic is
// element-wise, so chunking changes no bit of the result.
constexpr size_t kChunkBytes = size_t{256} << 10;
// Mid-sized segments travel as messages that fit an eager send, which needs no rendezvous, where
// a rendezvous (a handshake, then a single copy by the receiver) costs more than the copy of such
// a segment. Open MPI's shared-memory transport sends up to 4 KiB, its header included, eagerly
// (vader's btl_vader_eager_limit), and larger messages by rendezvous: by a single copy (CMA,
// process_vm_readv, by default) or, with single copy off, in 32 KiB fragments through shared
// memory, the first of which goes with the handshake. Measured with 2 ranks here, single copy on:
// a 64 KiB ring allreduce (two 32 KiB steps) 24.8 us in 4,000-byte messages against 28.1 us
// whole, 16 KiB 11.1 against 19.0; a 256 KiB one 82 against 65 us (two copies per eager message
// outweigh the handshake), hence the bound. With single copy off, the split is a loss (64 KiB:
// 19 us against 11), so it is made only where the transport does single copies.
constexpr size_t kEagerBytes = 4000;
constexpr size_t kEagerSegmentBytes = size_t{32} << 10;

// How a step's segment of `element`-byte elements is cut into messages; sender and receiver see
// the same segment and, in one job, the same transport.
struct Chunking {
  size_t element;  // bytes: 4 (fp32) or 2 (a 16-bit wire format)
  bool eager;      // mid-sized segments in eager messages

  size_t per(size_t count) const {
    const size_t bytes = count * element;
    return (eager && bytes > kEagerBytes && bytes <= kEagerSegmentBytes ? kEagerBytes
                                                                        : kChunkBytes) /
           element;
  }
  size_t count_of(size_t count) const {
    return count == 0 ? 1 : (count + per(count) - 1) / per(count);
  }
  Segment chunk(Segment segment, size_t i) const {
    const size_t n = per(segment.count), offset = i * n;
    return {segment.offset + offset, std::min(n, segment.count - offset)};
  }
};

bool overlaps(Segment a, Segment b) {
  return a.offset < b.offset + b.count && b.offset < a.offset + a.count;
}

int rank_of(MPI_Comm comm) {
  SYNC_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int rank = 0;
  SYNC_MPI(MPI_Comm_rank(comm, &rank));
  return rank;
}

// A received chunk must have the size the schedule says (the sender ran the same schedule).
void check_received(const MPI_Status& status, size_t expected, int rank, int peer, size_t step,
                    CollectiveKind kind, MPI_Datatype type = MPI_FLOAT) {
  int received = 0;
  SYNC_MPI(MPI_Get_count(&status, type, &received));
  if (static_cast<size_t>(received) != expected)
    throw UserError("mpi: " + std::string(to_string(kind)) + ": rank " + std::to_string(rank) +
                    " expected " + std::to_string(expected) + " floats from rank " +
                    std::to_string(peer) + " in step " + std::to_string(step) + " but got " +
                    std::to_string(received) +
                    "; allowed: every member issues the same collectives in the same order");
}

}  // namespace

ScheduleChannel::ScheduleChannel(CommHandle comm, std::vector<int> node_of_rank,
                                 std::atomic<uint64_t>* bytes_sent,
                                 std::atomic<uint64_t>* bytes_recv)
    : comm_(std::move(comm)),
      rank_(rank_of(comm_.get())),
      size_(static_cast<int>(node_of_rank.size())),
      cache_(std::move(node_of_rank), CacheScope::kOneRank, rank_),
      bytes_sent_(bytes_sent),
      bytes_recv_(bytes_recv),
      eager_(detail::shared_memory_single_copy()) {
  int size = 0;
  SYNC_MPI(MPI_Comm_size(comm_.get(), &size));
  SYNC_CHECK(size == size_, "communicator of " << size << " ranks, " << size_ << " nodes given");
}

Algorithm ScheduleChannel::run(CollectiveKind kind, Algorithm algorithm, std::span<float> data,
                               int root, ReduceOp op, const PollPolicy& poll, WireFormat wire) {
  const CachedSchedule& entry = cache_.entry(cache_.key(kind, algorithm, data.size(), root, wire));
  if (scratch_.size() < entry.max_recv) scratch_.resize(entry.max_recv);
  if (wire == WireFormat::kFp32)
    run_steps(entry.steps, data, op, poll, kind);
  else
    run_wire_steps(entry.steps, data, op, poll, kind, wire);
  return entry.algorithm;
}

void ScheduleChannel::run_wire_steps(const std::vector<Step>& steps, std::span<float> data,
                                     ReduceOp op, const PollPolicy& poll, CollectiveKind kind,
                                     WireFormat wire) {
  MPI_Comm comm = comm_.get();
  const uint64_t element = element_bytes(wire);
  const Chunking chunks{element, eager_};
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& step = steps[k];
    const size_t n_recv = step.recv_from >= 0 ? chunks.count_of(step.recv.count) : 0;
    const size_t n_send = step.send_to >= 0 ? chunks.count_of(step.send.count) : 0;
    requests_.assign(n_recv + n_send, MPI_REQUEST_NULL);
    statuses_.resize(n_recv);
    // A segment that the step before received and copied, sent on unchanged (a ring's
    // allgather), goes out in the encoding it came in.
    const bool forward = n_send > 0 && forwards_received(k > 0 ? &steps[k - 1] : nullptr, step);
    if (forward) std::swap(wire_in_, wire_out_);
    if (n_recv > 0) wire_in_.resize(step.recv.count);
    for (size_t i = 0; i < n_recv; ++i) {
      const Segment c = chunks.chunk(step.recv, i);
      SYNC_MPI(MPI_Irecv(wire_in_.data() + (c.offset - step.recv.offset), to_count(c.count),
                         MPI_UINT16_T, step.recv_from, detail::kCollectiveTag, comm,
                         &requests_[i]));
    }
    if (n_send > 0 && !forward) {  // encoded before this round's action: sends read the old buffer
      wire_out_.resize(step.send.count);
      encode_wire(data.subspan(step.send.offset, step.send.count), wire, wire_out_);
    }
    for (size_t i = 0; i < n_send; ++i) {
      const Segment c = chunks.chunk(step.send, i);
      SYNC_MPI(MPI_Isend(wire_out_.data() + (c.offset - step.send.offset), to_count(c.count),
                         MPI_UINT16_T, step.send_to, detail::kCollectiveTag, comm,
                         &requests_[n_recv + i]));
    }
    const detail::WaitContext context{to_string(kind).data(), static_cast<int>(k), step.send_to,
                                      step.recv_from};
    detail::wait_all(comm, std::span(requests_).first(n_recv), context, poll, statuses_.data());
    for (size_t i = 0; i < n_recv; ++i) {
      try {
        check_received(statuses_[i], chunks.chunk(step.recv, i).count, rank_, step.recv_from, k,
                       kind, MPI_UINT16_T);
      } catch (const UserError&) {
        detail::withdraw(requests_);
        throw;
      }
    }
    detail::wait_all(comm, std::span(requests_).subspan(n_recv), context, poll);
    if (n_recv > 0)  // the sends were encoded: the buffer may change under them
      apply_wire_action(step.action, op, data.subspan(step.recv.offset, step.recv.count), wire_in_,
                        wire, scratch_);
    if (step.recv_from >= 0 && step.recv_from != rank_) *bytes_recv_ += step.recv.count * element;
    if (step.send_to >= 0 && step.send_to != rank_) *bytes_sent_ += step.send.count * element;
  }
}

void ScheduleChannel::run_steps(const std::vector<Step>& steps, std::span<float> data, ReduceOp op,
                                const PollPolicy& poll, CollectiveKind kind) {
  MPI_Comm comm = comm_.get();
  const Chunking chunks{sizeof(float), eager_};
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& step = steps[k];
    const size_t n_recv = step.recv_from >= 0 ? chunks.count_of(step.recv.count) : 0;
    const size_t n_send = step.send_to >= 0 ? chunks.count_of(step.send.count) : 0;
    const bool overlap = n_recv > 0 && n_send > 0 && overlaps(step.send, step.recv);
    // A copy whose floats this step does not send lands in place, without scratch.
    const bool direct = step.action == RecvAction::kCopy && !overlap;
    requests_.assign(n_recv + n_send, MPI_REQUEST_NULL);  // keeps its capacity
    statuses_.resize(n_recv);
    for (size_t i = 0; i < n_recv; ++i) {
      const Segment c = chunks.chunk(step.recv, i);
      float* target =
          direct ? data.data() + c.offset : scratch_.data() + (c.offset - step.recv.offset);
      SYNC_MPI(MPI_Irecv(target, to_count(c.count), MPI_FLOAT, step.recv_from,
                         detail::kCollectiveTag, comm, &requests_[i]));
    }
    for (size_t i = 0; i < n_send; ++i) {
      const Segment c = chunks.chunk(step.send, i);
      SYNC_MPI(MPI_Isend(data.data() + c.offset, to_count(c.count), MPI_FLOAT, step.send_to,
                         detail::kCollectiveTag, comm, &requests_[n_recv + i]));
    }
    const detail::WaitContext context{to_string(kind).data(), static_cast<int>(k), step.send_to,
                                      step.recv_from};
    const std::span<MPI_Request> sends = std::span(requests_).subspan(n_recv);
    for (size_t i = 0; i < n_recv; ++i) {
      const Segment c = chunks.chunk(step.recv, i);
      detail::wait_all(comm, std::span(&requests_[i], 1), context, poll, &statuses_[i]);
      try {
        check_received(statuses_[i], c.count, rank_, step.recv_from, k, kind);
      } catch (const UserError&) {
        detail::withdraw(requests_);
        throw;
      }
      if (direct) continue;
      if (overlap && overlaps(c, step.send) && c.count > 0) {
        // Sends read the buffer as it was before this round: finish those reading c first.
        const size_t lo = std::max(c.offset, step.send.offset) - step.send.offset;
        const size_t hi =
            std::min(c.offset + c.count, step.send.offset + step.send.count) - step.send.offset;
        const size_t per = chunks.per(step.send.count);
        detail::wait_all(comm, sends.subspan(lo / per, (hi - 1) / per - lo / per + 1), context,
                         poll);
      }
      apply_action(
          step.action, op, data.subspan(c.offset, c.count),
          std::span<const float>(scratch_.data() + (c.offset - step.recv.offset), c.count));
    }
    detail::wait_all(comm, sends, context, poll);
    if (step.recv_from >= 0 && step.recv_from != rank_)
      *bytes_recv_ += step.recv.count * sizeof(float);
    if (step.send_to >= 0 && step.send_to != rank_) *bytes_sent_ += step.send.count * sizeof(float);
  }
}

}  // namespace syncopate::mpi
