// ScheduleChannel: runs this rank's steps of a core schedule with MPI point-to-point messages.
#include "backends/mpi/schedule_channel.hpp"

#include <algorithm>
#include <cstring>

namespace syncopate::mpi {

using detail::to_count;

ScheduleChannel::ScheduleChannel(CommHandle comm, std::vector<int> node_of_rank,
                                 std::atomic<uint64_t>* bytes_sent,
                                 std::atomic<uint64_t>* bytes_recv)
    : comm_(std::move(comm)),
      node_of_rank_(std::move(node_of_rank)),
      bytes_sent_(bytes_sent),
      bytes_recv_(bytes_recv) {
  SYNC_MPI(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
  SYNC_MPI(MPI_Comm_rank(comm_.get(), &rank_));
  SYNC_MPI(MPI_Comm_size(comm_.get(), &size_));
}

const std::vector<Step>& ScheduleChannel::steps(CollectiveKind kind, Algorithm algorithm,
                                                size_t count, int root) {
  const auto key = std::make_tuple(kind, algorithm, count, root);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (cache_.size() >= 256) cache_.clear();  // bound the cache if sizes never repeat
  const Schedule schedule = make_schedule(kind, algorithm, size_, count, root, node_of_rank_);
  SYNC_CHECK(schedule.ranks == size_ && schedule.count == count,
             "schedule for " << schedule.ranks << " ranks / " << schedule.count
                             << " floats, wanted " << size_ << " / " << count);
  std::vector<Step> mine = steps_of_rank(schedule, rank_);
  for (const Step& step : mine)
    if (step.recv_from >= 0 && scratch_.size() < step.recv.count) scratch_.resize(step.recv.count);
  return cache_.emplace(key, std::move(mine)).first->second;
}

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

}  // namespace

void ScheduleChannel::run(const std::vector<Step>& steps, std::span<float> data, ReduceOp op,
                          const PollPolicy& poll) {
  MPI_Comm comm = comm_.get();
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& step = steps[k];
    const size_t n_recv = step.recv_from >= 0 ? chunks_of(step.recv.count) : 0;
    const size_t n_send = step.send_to >= 0 ? chunks_of(step.send.count) : 0;
    const bool overlap = n_recv > 0 && n_send > 0 && overlaps(step.send, step.recv);
    // A copy whose floats this step does not send lands in place, without scratch.
    const bool direct = step.action == RecvAction::kCopy && !overlap;
    requests_.assign(n_recv + n_send, MPI_REQUEST_NULL);  // keeps its capacity
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
    const detail::WaitContext context{"collective", static_cast<int>(k), step.send_to,
                                      step.recv_from};
    const std::span<MPI_Request> sends = std::span(requests_).subspan(n_recv);
    for (size_t i = 0; i < n_recv; ++i) {
      detail::wait_all(comm, std::span(&requests_[i], 1), context, poll);
      if (direct) continue;
      const Segment c = chunk(step.recv, i);
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
