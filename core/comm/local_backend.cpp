#include "core/comm/local_backend.hpp"

#include <algorithm>

#include "core/base/check.hpp"

namespace syncopate {
namespace {
void check_rank(int rank, const char* what) {
  SYNC_CHECK(rank == 0, what << " rank " << rank << " on a size-1 communicator");
}
}  // namespace

// With one rank every reduction is the identity (avg divides by 1, exactly).
WorkPtr LocalCommunicator::allreduce_async(std::span<float>, const CollectiveOptions&) {
  return std::make_unique<CompletedWork>();
}
void LocalCommunicator::broadcast(std::span<float>, int root) { check_rank(root, "broadcast"); }
void LocalCommunicator::reduce(std::span<float>, int root, ReduceOp) { check_rank(root, "reduce"); }
void LocalCommunicator::allgather(std::span<const float> mine, std::span<float> all) {
  SYNC_CHECK(mine.size() == all.size(), mine.size() << " vs " << all.size());
  std::copy(mine.begin(), mine.end(), all.begin());
}
void LocalCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp) {
  SYNC_CHECK(in.size() == out.size(), in.size() << " vs " << out.size());
  std::copy(in.begin(), in.end(), out.begin());
}
void LocalCommunicator::send(std::span<const float>, int peer) { check_rank(peer, "send to"); }
void LocalCommunicator::recv(std::span<float>, int peer) { check_rank(peer, "recv from"); }
std::unique_ptr<Communicator> LocalCommunicator::split(int, int) {
  return std::make_unique<LocalCommunicator>();
}
void LocalCommunicator::create_global(std::span<const float> initial) {
  global_.assign(initial.begin(), initial.end());
}
void LocalCommunicator::merge_into_global(std::span<float> local, const MergeRule& rule) {
  SYNC_CHECK(local.size() == global_.size(),
             "merge of " << local.size() << " into " << global_.size());
  apply_merge_rule(rule, global_, local);
  std::copy(global_.begin(), global_.end(), local.begin());
}

}  // namespace syncopate
