// The in-process backend: a size-1 communicator and its shared model.
#include "core/comm/local_backend.hpp"

#include <algorithm>
#include <string>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

void check_root(int root, const char* operation) {
  if (root != 0)
    throw UserError(std::string("local: ") + operation + ": root " + std::to_string(root) +
                    "; allowed: 0 (a communicator of one rank)");
}

// With one rank the only peer is the caller itself, which the contract forbids.
[[noreturn]] void throw_no_peer(int peer, const char* operation) {
  throw UserError(std::string("local: ") + operation + ": peer " + std::to_string(peer) +
                  " from rank 0; allowed: a rank other than the caller, and a communicator of "
                  "one rank has none");
}

void check_block(size_t block, size_t whole, const char* operation, const char* what) {
  if (block != whole)
    throw UserError(std::string("local: ") + operation + ": rank 0 " + what + " has " +
                    std::to_string(block) + " floats for " + std::to_string(whole) +
                    "; allowed: block_of(n, size(), rank()).count = " + std::to_string(whole));
}

class LocalSharedModel final : public SharedModel {
 public:
  explicit LocalSharedModel(std::span<const float> initial)
      : global_(initial.begin(), initial.end()) {}
  size_t size() const override { return global_.size(); }
  void merge(std::span<float> local, const MergeRule& rule) override {
    check_merge_size(local.size(), global_.size(), "local", 0);
    apply_merge_rule(rule, global_, local);
    std::copy(global_.begin(), global_.end(), local.begin());
  }

 private:
  std::vector<float> global_;
};

}  // namespace

// With one rank every reduction is the identity (avg divides by 1, exactly), and nothing travels:
// no wire format rounds anything.
WorkPtr LocalCommunicator::allreduce_async(std::span<float>, const CollectiveOptions&) {
  return std::make_unique<CompletedWork>();
}
void LocalCommunicator::broadcast(std::span<float>, int root) { check_root(root, "broadcast"); }
void LocalCommunicator::reduce(std::span<float>, int root, ReduceOp) { check_root(root, "reduce"); }
void LocalCommunicator::allgather(std::span<const float> mine, std::span<float> all,
                                  const GatherOptions&) {
  check_block(mine.size(), all.size(), "allgather", "contribution");
  std::copy(mine.begin(), mine.end(), all.begin());
}
void LocalCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp,
                                       const GatherOptions&) {
  check_block(out.size(), in.size(), "reduce_scatter", "output");
  std::copy(in.begin(), in.end(), out.begin());
}
void LocalCommunicator::send(std::span<const float>, int peer) { throw_no_peer(peer, "send"); }
void LocalCommunicator::recv(std::span<float>, int peer) { throw_no_peer(peer, "recv"); }
std::unique_ptr<Communicator> LocalCommunicator::split(int, int) {
  auto group = std::make_unique<LocalCommunicator>();
  group->set_default_timeout(timeout_s_);
  return group;
}
// One worker: both placements keep the model in this process.
std::unique_ptr<SharedModel> LocalCommunicator::create_shared_model(std::span<const float> initial,
                                                                    GlobalModelPlacement) {
  return std::make_unique<LocalSharedModel>(initial);
}

}  // namespace syncopate
