// ScheduleChannel: runs this rank's steps of a core schedule with MPI point-to-point messages.
#include "backends/mpi/schedule_channel.hpp"

#include <algorithm>
#include <cstring>

namespace syncopate::mpi {

using detail::to_count;

namespace {

// Large segments travel as chunks; each received chunk is applied as soon as it (and the chunks
// of this step's send that read the same floats) completed: the reduction then works on data
// the copy just brought into cache, while later chunks are still in transfer. The arithmetic is
// element-wise, so chunking changes no bit of the result.
constexpr size_t kChunkFloats = size_t{1} << 16;  // 256 KiB

size_t chunks_of(size_t count) {
  return count == 0 ? 1 : (count + kChunkFloats - 1) / kChunkFloats;
}
Segment chunk(Segment segment, size_t i) {
  const size_t offset = i * kChunkFloats;
  return {segment.offset + offset, std::min(kChunkFloats, segment.count - offset)};
}
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
                    CollectiveKind kind) {
  int received = 0;
  SYNC_MPI(MPI_Get_count(&status, MPI_FLOAT, &received));
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
      bytes_recv_(bytes_recv) {
  int size = 0;
  SYNC_MPI(MPI_Comm_size(comm_.get(), &size));
  SYNC_CHECK(size == size_, "communicator of " << size << " ranks, " << size_ << " nodes given");
}

Algorithm ScheduleChannel::run(CollectiveKind kind, Algorithm algorithm, std::span<float> data,
                               int root, ReduceOp op, const PollPolicy& poll) {
  const CachedSchedule& entry = cache_.entry(cache_.key(kind, algorithm, data.size(), root));
  if (scratch_.size() < entry.max_recv) scratch_.resize(entry.max_recv);
  run_steps(entry.steps, data, op, poll, kind);
  return entry.algorithm;
}

void ScheduleChannel::run_steps(const std::vector<Step>& steps, std::span<float> data, ReduceOp op,
                                const PollPolicy& poll, CollectiveKind kind) {
  MPI_Comm comm = comm_.get();
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& step = steps[k];
    const size_t n_recv = step.recv_from >= 0 ? chunks_of(step.recv.count) : 0;
    const size_t n_send = step.send_to >= 0 ? chunks_of(step.send.count) : 0;
    const bool overlap = n_recv > 0 && n_send > 0 && overlaps(step.send, step.recv);
    // A copy whose floats this step does not send lands in place, without scratch.
    const bool direct = step.action == RecvAction::kCopy && !overlap;
    requests_.assign(n_recv + n_send, MPI_REQUEST_NULL);  // keeps its capacity
    statuses_.resize(n_recv);
    for (size_t i = 0; i < n_recv; ++i) {
      const Segment c = chunk(step.recv, i);
      float* target =
          direct ? data.data() + c.offset : scratch_.data() + (c.offset - step.recv.offset);
      SYNC_MPI(MPI_Irecv(target, to_count(c.count), MPI_FLOAT, step.recv_from,
                         detail::kCollectiveTag, comm, &requests_[i]));
    }
    for (size_t i = 0; i < n_send; ++i) {
      const Segment c = chunk(step.send, i);
      SYNC_MPI(MPI_Isend(data.data() + c.offset, to_count(c.count), MPI_FLOAT, step.send_to,
                         detail::kCollectiveTag, comm, &requests_[n_recv + i]));
    }
    const detail::WaitContext context{to_string(kind).data(), static_cast<int>(k), step.send_to,
                                      step.recv_from};
    const std::span<MPI_Request> sends = std::span(requests_).subspan(n_recv);
    for (size_t i = 0; i < n_recv; ++i) {
      const Segment c = chunk(step.recv, i);
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
        detail::wait_all(
            comm, sends.subspan(lo / kChunkFloats, (hi - 1) / kChunkFloats - lo / kChunkFloats + 1),
            context, poll);
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
