// MpiCommunicator: the core's schedules run over MPI point-to-point messages.
#include "backends/mpi/mpi_communicator.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
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
  const long k = std::strtol(text, &end, 10);
  if (*end != '\0' || k < 0)
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
  CommHandle async_comm = dup(c);
  main_ =
      std::make_unique<ScheduleChannel>(std::move(comm), node_of_rank_, &bytes_sent_, &bytes_recv_);
  async_ = std::make_unique<ScheduleChannel>(std::move(async_comm), node_of_rank_, &bytes_sent_,
                                             &bytes_recv_);
  engine_ = std::make_unique<AsyncEngine>(
      detail::thread_multiple(),
      [this](std::span<float> data, const CollectiveOptions& options, const PollPolicy& poll) {
        run_allreduce(*async_, data, options, poll);
      });
}

MpiCommunicator::~MpiCommunicator() {
  if (std::uncaught_exceptions() > 0 || detail::failed()) engine_->cancel();
  engine_.reset();
  free_window();
}

void MpiCommunicator::run_allreduce(ScheduleChannel& channel, std::span<float> data,
                                    const CollectiveOptions& options, const PollPolicy& poll) {
  const Algorithm algorithm =
      resolve_algorithm(options.algorithm, size_, data.size() * sizeof(float), node_of_rank_);
  channel.run(channel.steps(CollectiveKind::kAllreduce, algorithm, data.size(), 0), data,
              options.op, poll);
  finish(options.op, size_, data);
}

WorkPtr MpiCommunicator::allreduce_async(std::span<float> data, const CollectiveOptions& options) {
  return engine_->submit(data, options);
}

void MpiCommunicator::allreduce_blocking(std::span<float> data, const CollectiveOptions& options) {
  run_allreduce(*main_, data, options, {});
}

void MpiCommunicator::broadcast(std::span<float> data, int root) {
  SYNC_CHECK(root >= 0 && root < size_, "root " << root << " of " << size_);
  main_->run(main_->steps(CollectiveKind::kBroadcast, Algorithm::kBinomialTree, data.size(), root),
             data, ReduceOp::kSum);
}

void MpiCommunicator::reduce(std::span<float> data, int root, ReduceOp op) {
  SYNC_CHECK(root >= 0 && root < size_, "root " << root << " of " << size_);
  main_->run(main_->steps(CollectiveKind::kReduce, Algorithm::kBinomialTree, data.size(), root),
             data, op);
  if (rank_ == root) finish(op, size_, data);
}

void MpiCommunicator::allgather(std::span<const float> mine, std::span<float> all) {
  const BlockRange block = block_of(all.size(), size_, rank_);
  SYNC_CHECK(mine.size() == block.count,
             "allgather: mine has " << mine.size() << " floats, block " << block.count);
  if (!mine.empty() && mine.data() != all.data() + block.offset)
    std::memmove(all.data() + block.offset, mine.data(), mine.size_bytes());
  main_->run(main_->steps(CollectiveKind::kAllgather, Algorithm::kRing, all.size(), 0), all,
             ReduceOp::kSum);
}

void MpiCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op) {
  const BlockRange block = block_of(in.size(), size_, rank_);
  SYNC_CHECK(out.size() == block.count,
             "reduce_scatter: out has " << out.size() << " floats, block " << block.count);
  work_.assign(in.begin(), in.end());  // keeps its capacity: no allocation in steady state
  main_->run(main_->steps(CollectiveKind::kReduceScatter, Algorithm::kRing, in.size(), 0), work_,
             op);
  const std::span<float> reduced(work_.data() + block.offset, block.count);
  finish(op, size_, reduced);
  std::copy(reduced.begin(), reduced.end(), out.begin());
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  SYNC_MPI(MPI_Ibarrier(main_->comm(), &request));
  detail::wait_all(main_->comm(), std::span(&request, 1), {"barrier"});
}

void MpiCommunicator::send(std::span<const float> data, int peer) {
  SYNC_CHECK(peer >= 0 && peer < size_, "peer " << peer << " of " << size_);
  MPI_Request request = MPI_REQUEST_NULL;
  SYNC_MPI(MPI_Isend(data.data(), to_count(data.size()), MPI_FLOAT, peer, detail::kPointToPointTag,
                     main_->comm(), &request));
  detail::wait_all(main_->comm(), std::span(&request, 1), {"send", -1, peer});
  if (peer != rank_) add_bytes(data.size_bytes(), 0);
}

void MpiCommunicator::recv(std::span<float> data, int peer) {
  SYNC_CHECK(peer >= 0 && peer < size_, "peer " << peer << " of " << size_);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Status status;
  SYNC_MPI(MPI_Irecv(data.data(), to_count(data.size()), MPI_FLOAT, peer, detail::kPointToPointTag,
                     main_->comm(), &request));
  // A longer message fails with MPI_ERR_TRUNCATE; a shorter one is caught here.
  detail::wait_all(main_->comm(), std::span(&request, 1), {"recv", -1, peer}, {}, &status);
  int received = 0;
  SYNC_MPI(MPI_Get_count(&status, MPI_FLOAT, &received));
  SYNC_CHECK(
      static_cast<size_t>(received) == data.size(),
      "recv from " << peer << ": message has " << received << " floats, buffer " << data.size());
  if (peer != rank_) add_bytes(0, data.size_bytes());
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split_mpi(int color, int key) {
  SYNC_CHECK(color >= 0, "split: color " << color << " must be >= 0");
  MPI_Comm out = MPI_COMM_NULL;
  const Deadline deadline("split (MPI_Comm_split)");
  SYNC_MPI(MPI_Comm_split(main_->comm(), color, key, &out));
  return std::make_unique<MpiCommunicator>(Key{}, CommHandle(out));
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
