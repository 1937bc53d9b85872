// MpiCommunicator: the core's schedules run over MPI point-to-point messages.
#include "backends/mpi/mpi_communicator.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "backends/mpi/async_engine.hpp"
#include "backends/mpi/deadline.hpp"
#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {
namespace {

using detail::to_count;

// Node numbering from each rank's node leader (the lowest rank of comm on its node): nodes are
// numbered in the rank order of their leaders.
std::vector<int> number_nodes(const std::vector<int>& leaders) {
  std::vector<int> sorted = leaders;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<int> node_of_rank(leaders.size());
  for (size_t r = 0; r < leaders.size(); ++r)
    node_of_rank[r] = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), leaders[r]) -
                                       sorted.begin());
  return node_of_rank;
}

// SYNCOPATE_MPI_RANKS_PER_NODE=k pretends that world ranks [0, k) form node 0, [k, 2k) node 1,
// ... (to run hierarchical algorithms and node groups on one machine); 0 or unset: real nodes.
int fake_ranks_per_node() {
  const char* text = std::getenv("SYNCOPATE_MPI_RANKS_PER_NODE");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long k = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || k < 0 || k > std::numeric_limits<int>::max())
    throw UserError(std::string("environment: SYNCOPATE_MPI_RANKS_PER_NODE: '") + text +
                    "' is not a rank count; allowed: integer >= 0 (0: real nodes)");
  return static_cast<int>(k);
}

// node_of_rank[r] for every rank of comm: ranks that share memory form a node.
std::vector<int> gather_node_of_rank(MPI_Comm comm, int rank, int size) {
  const Deadline deadline("the node census of a new communicator");
  std::vector<int> leaders(static_cast<size_t>(size));
  if (const int k = fake_ranks_per_node(); k > 0) {
    int world_rank = 0;
    SYNC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    const int fake_node = world_rank / k;
    std::vector<int> ids(static_cast<size_t>(size));
    SYNC_MPI(MPI_Allgather(&fake_node, 1, MPI_INT, ids.data(), 1, MPI_INT, comm));
    for (size_t r = 0; r < ids.size(); ++r)  // leader: the lowest rank with the same fake node
      leaders[r] = static_cast<int>(std::find(ids.begin(), ids.end(), ids[r]) - ids.begin());
    return number_nodes(leaders);
  }
  MPI_Comm shared_raw = MPI_COMM_NULL;
  SYNC_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared_raw));
  const CommHandle shared(shared_raw);
  int leader = rank;  // node rank 0 is the lowest rank of the node (key = rank)
  SYNC_MPI(MPI_Bcast(&leader, 1, MPI_INT, 0, shared.get()));
  SYNC_MPI(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm));
  return number_nodes(leaders);
}

CommHandle dup(MPI_Comm comm) {
  const Deadline deadline("MPI_Comm_dup");
  MPI_Comm out = MPI_COMM_NULL;
  SYNC_MPI(MPI_Comm_dup(comm, &out));
  return CommHandle(out);
}

}  // namespace

// ---- MpiCommunicator ------------------------------------------------------------------------

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  return std::make_unique<MpiCommunicator>(Key{}, dup(MPI_COMM_WORLD));
}

MpiCommunicator::MpiCommunicator(Key, CommHandle comm) {
  MPI_Comm c = comm.get();
  SYNC_CHECK(c != MPI_COMM_NULL, "null communicator");
  SYNC_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
  SYNC_MPI(MPI_Comm_rank(c, &rank_));
  SYNC_MPI(MPI_Comm_size(c, &size_));
  node_of_rank_ = gather_node_of_rank(c, rank_, size_);
  num_nodes_ = *std::max_element(node_of_rank_.begin(), node_of_rank_.end()) + 1;
  layout_ = gather_layout(node_of_rank_);
  CommHandle async_comm = dup(c);
  main_ =
      std::make_unique<ScheduleChannel>(std::move(comm), node_of_rank_, &bytes_sent_, &bytes_recv_);
  async_ = std::make_unique<ScheduleChannel>(std::move(async_comm), node_of_rank_, &bytes_sent_,
                                             &bytes_recv_);
  engine_ = std::make_unique<AsyncEngine>(detail::thread_multiple());
}

MpiCommunicator::~MpiCommunicator() {
  if (std::uncaught_exceptions() > 0 || detail::failed()) engine_->cancel();
  engine_.reset();
}

Algorithm MpiCommunicator::run_allreduce(ScheduleChannel& channel, std::span<float> data,
                                         const CollectiveOptions& options, PollPolicy poll) {
  poll.timeout_s = timeout_of(options);
  prepare(options.op, size_, data, options.wire);
  const Algorithm ran = channel.run(CollectiveKind::kAllreduce, options.algorithm, data, 0,
                                    options.op, poll, options.wire);
  finish(options.op, size_, data, options.wire);
  return ran;
}

WorkPtr MpiCommunicator::start(std::function<Algorithm(const PollPolicy& poll)> task,
                               size_t bytes) {
  const double start_s = MPI_Wtime();
  const auto completed = [start_s](Algorithm ran) {
    return std::make_unique<CompletedWork>(
        Work::Completion{.elapsed_s = MPI_Wtime() - start_s, .algorithm = ran});
  };
  if (size_ == 1) return completed(engine_->run_now(task));
  if (bytes <= kRunAtOnceBytes)
    if (const std::optional<Algorithm> ran = engine_->run_if_idle(task)) return completed(*ran);
  return engine_->submit(std::move(task));
}

WorkPtr MpiCommunicator::allreduce_async(std::span<float> data, const CollectiveOptions& options) {
  return start([this, data, options](
                   const PollPolicy& poll) { return run_allreduce(*async_, data, options, poll); },
               data.size_bytes());
}

Algorithm MpiCommunicator::allreduce_waited(std::span<float> data,
                                            const CollectiveOptions& options) {
  return engine_->run_now([this, data, options](const PollPolicy& poll) {
    return run_allreduce(*async_, data, options, poll);
  });
}

// The contribution is copied into `all` now; the schedule runs on the asynchronous channel.
WorkPtr MpiCommunicator::allgather_async(std::span<const float> mine, std::span<float> all,
                                         const GatherOptions& options) {
  check_block(mine.size(), all.size(), "allgather", "contribution");
  const GatherLayout layout = layout_.for_algorithm(options.algorithm);
  place_contribution(mine, all, layout, options.wire);
  return start(
      [this, all, layout, options](PollPolicy poll) {
        poll.timeout_s = default_timeout();
        const Algorithm ran = async_->run(CollectiveKind::kAllgather, options.algorithm, all, 0,
                                          ReduceOp::kSum, poll, options.wire);
        std::vector<float> scratch;
        layout.back_to_caller(all, scratch);
        return ran;
      },
      all.size_bytes());
}

// The input is copied now (the task owns the copy); `out` receives the block when it ran.
WorkPtr MpiCommunicator::reduce_scatter_async(std::span<const float> in, std::span<float> out,
                                              ReduceOp op, const GatherOptions& options) {
  check_block(out.size(), in.size(), "reduce_scatter", "output");
  const GatherLayout layout = layout_.for_algorithm(options.algorithm);
  auto work = std::make_shared<std::vector<float>>();
  layout.into_schedule(in, *work);
  prepare(op, size_, *work, options.wire);
  return start(
      [this, work, out, op, layout, options](PollPolicy poll) {
        poll.timeout_s = default_timeout();
        const Algorithm ran = async_->run(CollectiveKind::kReduceScatter, options.algorithm, *work,
                                          0, op, poll, options.wire);
        finish_block(*work, layout, out, op, options.wire);
        return ran;
      },
      in.size_bytes());
}

void MpiCommunicator::place_contribution(std::span<const float> mine, std::span<float> all,
                                         const GatherLayout& layout, WireFormat wire) const {
  const Segment block = layout.block(all.size(), rank_);
  if (!mine.empty() && mine.data() != all.data() + block.offset)
    std::memmove(all.data() + block.offset, mine.data(), mine.size_bytes());
  prepare(ReduceOp::kSum, size_, all.subspan(block.offset, block.count), wire);
}

void MpiCommunicator::finish_block(std::span<float> work, const GatherLayout& layout,
                                   std::span<float> out, ReduceOp op, WireFormat wire) const {
  const Segment block = layout.block(work.size(), rank_);
  const std::span<float> reduced = work.subspan(block.offset, block.count);
  finish(op, size_, reduced, wire);
  std::copy(reduced.begin(), reduced.end(), out.begin());
}

void MpiCommunicator::allreduce_blocking(std::span<float> data, const CollectiveOptions& options) {
  run_allreduce(*main_, data, options, {});
}

PollPolicy MpiCommunicator::poll() const { return {.timeout_s = default_timeout()}; }

void MpiCommunicator::check_rank(int rank, const char* operation, const char* what,
                                 bool self_allowed) const {
  if (rank >= 0 && rank < size_ && (self_allowed || rank != rank_)) return;
  throw UserError("mpi: " + std::string(operation) + ": " + what + " " + std::to_string(rank) +
                  " from rank " + std::to_string(rank_) + "; allowed: 0.." +
                  std::to_string(size_ - 1) + (self_allowed ? "" : " other than the caller"));
}

void MpiCommunicator::check_block(size_t got, size_t n, const char* operation,
                                  const char* what) const {
  const size_t want = block_of(n, size_, rank_).count;
  if (got != want)
    throw UserError("mpi: " + std::string(operation) + ": rank " + std::to_string(rank_) + " " +
                    what + " has " + std::to_string(got) + " floats of " + std::to_string(n) +
                    "; allowed: block_of(n, size(), rank()).count = " + std::to_string(want));
}

void MpiCommunicator::broadcast(std::span<float> data, int root) {
  check_rank(root, "broadcast", "root", true);
  main_->run(CollectiveKind::kBroadcast, Algorithm::kBinomialTree, data, root, ReduceOp::kSum,
             poll());
}

void MpiCommunicator::reduce(std::span<float> data, int root, ReduceOp op) {
  check_rank(root, "reduce", "root", true);
  main_->run(CollectiveKind::kReduce, Algorithm::kBinomialTree, data, root, op, poll());
  if (rank_ == root) finish(op, size_, data);
}

void MpiCommunicator::allgather(std::span<const float> mine, std::span<float> all,
                                const GatherOptions& options) {
  check_block(mine.size(), all.size(), "allgather", "contribution");
  const GatherLayout layout = layout_.for_algorithm(options.algorithm);
  place_contribution(mine, all, layout, options.wire);
  main_->run(CollectiveKind::kAllgather, options.algorithm, all, 0, ReduceOp::kSum, poll(),
             options.wire);
  layout.back_to_caller(all, gathered_);
}

void MpiCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                                     const GatherOptions& options) {
  check_block(out.size(), in.size(), "reduce_scatter", "output");
  const GatherLayout layout = layout_.for_algorithm(options.algorithm);
  layout.into_schedule(in, work_);  // keeps its capacity: no allocation in steady state
  prepare(op, size_, work_, options.wire);
  main_->run(CollectiveKind::kReduceScatter, options.algorithm, work_, 0, op, poll(), options.wire);
  finish_block(work_, layout, out, op, options.wire);
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  SYNC_MPI(MPI_Ibarrier(main_->comm(), &request));
  detail::wait_all(main_->comm(), std::span(&request, 1), {"barrier"}, poll());
}

void MpiCommunicator::send(std::span<const float> data, int peer) {
  check_rank(peer, "send", "peer", false);
  MPI_Request request = MPI_REQUEST_NULL;
  SYNC_MPI(MPI_Isend(data.data(), to_count(data.size()), MPI_FLOAT, peer, detail::kPointToPointTag,
                     main_->comm(), &request));
  detail::wait_all(main_->comm(), std::span(&request, 1), {"send", -1, peer}, poll());
  add_bytes(data.size_bytes(), 0);
}

void MpiCommunicator::recv(std::span<float> data, int peer) {
  check_rank(peer, "recv", "peer", false);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Status status;
  SYNC_MPI(MPI_Irecv(data.data(), to_count(data.size()), MPI_FLOAT, peer, detail::kPointToPointTag,
                     main_->comm(), &request));
  // A longer message is a UserError of wait_all (truncated); a shorter one is caught here.
  detail::wait_all(main_->comm(), std::span(&request, 1), {"recv", -1, peer}, poll(), &status);
  int received = 0;
  SYNC_MPI(MPI_Get_count(&status, MPI_FLOAT, &received));
  if (static_cast<size_t>(received) != data.size())
    throw UserError("mpi: recv: rank " + std::to_string(rank_) + " expected " +
                    std::to_string(data.size()) + " floats from rank " + std::to_string(peer) +
                    " which sent " + std::to_string(received) +
                    "; allowed: send and recv of the same size");
  add_bytes(0, data.size_bytes());
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split_mpi(int color, int key) {
  if (color < 0)
    throw UserError("mpi: split: color " + std::to_string(color) + " on rank " +
                    std::to_string(rank_) + "; allowed: >= 0");
  MPI_Comm out = MPI_COMM_NULL;
  {
    const Deadline deadline("split (MPI_Comm_split)", default_timeout());
    SYNC_MPI(MPI_Comm_split(main_->comm(), color, key, &out));
  }
  auto group = std::make_unique<MpiCommunicator>(Key{}, CommHandle(out));
  group->timeout_s_ = timeout_s_;
  return group;
}

double MpiCommunicator::default_timeout() const {
  return timeout_s_ == kDefaultTimeout ? Runtime::watchdog_seconds() : timeout_s_;
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  return split_mpi(color, key);
}

CommCounters MpiCommunicator::counters() const { return {bytes_sent_.load(), bytes_recv_.load()}; }

void MpiCommunicator::add_bytes(uint64_t sent, uint64_t received) {
  bytes_sent_ += sent;
  bytes_recv_ += received;
}

void native_allreduce(MpiCommunicator& comm, std::span<float> data, ReduceOp op) {
  SYNC_MPI(MPI_Allreduce(MPI_IN_PLACE, data.data(), detail::to_count(data.size()), MPI_FLOAT,
                         op == ReduceOp::kMax ? MPI_MAX : MPI_SUM, comm.handle()));
  finish(op, comm.size(), data);
}

}  // namespace syncopate::mpi
