// FakeCommunicator: planned failures and delays around any communicator.
#include "core/comm/fake_comm.hpp"

#include <array>
#include <sstream>
#include <utility>

#include "core/comm/local_backend.hpp"

namespace syncopate {
namespace {

constexpr std::array<std::string_view, kNumCallKinds> kCallNames{
    "allreduce", "wait", "broadcast", "reduce", "allgather",           "reduce_scatter",
    "barrier",   "send", "recv",      "split",  "create_shared_model", "merge"};

class FakeWork final : public Work {
 public:
  FakeWork(WorkPtr inner, FakeCommunicator& comm, double timeout_s)
      : inner_(std::move(inner)), comm_(comm), timeout_s_(timeout_s) {}
  void wait() override {
    if (waited_) return;
    waited_ = true;
    comm_.on_call(CallKind::kWait, timeout_s_);
    inner_->wait();
  }

 private:
  WorkPtr inner_;
  FakeCommunicator& comm_;
  double timeout_s_;
  bool waited_ = false;
};

class FakeSharedModel final : public SharedModel {
 public:
  FakeSharedModel(std::unique_ptr<SharedModel> inner, FakeCommunicator& comm)
      : inner_(std::move(inner)), comm_(comm) {}
  size_t size() const override { return inner_->size(); }
  void merge(std::span<float> local, const MergeRule& rule) override {
    comm_.on_call(CallKind::kMerge, comm_.default_timeout());
    inner_->merge(local, rule);
  }

 private:
  std::unique_ptr<SharedModel> inner_;
  FakeCommunicator& comm_;
};

}  // namespace

std::string_view to_string(CallKind kind) { return kCallNames[static_cast<size_t>(kind)]; }

FakeCommunicator::FakeCommunicator(Communicator& inner, Executor& exec, std::vector<Fault> faults)
    : inner_(inner), exec_(exec), faults_(std::move(faults)) {
  for (const Fault& f : faults_)
    SYNC_CHECK(f.nth >= 1 && f.delay_s >= 0, "fault on call " << f.nth << ", delay " << f.delay_s);
}

FakeCommunicator::FakeCommunicator(Executor& exec, std::vector<Fault> faults)
    : owned_(std::make_unique<LocalCommunicator>()),
      inner_(*owned_),
      exec_(exec),
      faults_(std::move(faults)) {}

FakeCommunicator::~FakeCommunicator() = default;

void FakeCommunicator::on_call(CallKind kind, double timeout_s) {
  const int64_t n = ++calls_[static_cast<size_t>(kind)];
  double delay = 0;
  bool fail = false;
  for (const Fault& f : faults_) {
    if (f.kind != kind || n < f.nth) continue;
    if (f.delay_s > 0)
      delay += f.delay_s;
    else if (n == f.nth)
      fail = true;
  }
  std::ostringstream what;
  what << "fake: " << to_string(kind) << " call #" << n << " on rank " << rank();
  if (timeout_s > 0 && delay > timeout_s) {
    exec_.advance(timeout_s);
    what << ": delayed " << delay << " s, more than its timeout of " << timeout_s << " s";
    throw PeerTimeout(what.str());
  }
  if (delay > 0) exec_.advance(delay);
  if (fail) throw PeerFailure(what.str() + ": injected peer failure");
}

WorkPtr FakeCommunicator::allreduce_async(std::span<float> data, const CollectiveOptions& options) {
  on_call(CallKind::kAllreduce, timeout_of(options));
  return std::make_unique<FakeWork>(inner_.allreduce_async(data, options), *this,
                                    timeout_of(options));
}
void FakeCommunicator::broadcast(std::span<float> data, int root) {
  on_call(CallKind::kBroadcast, default_timeout());
  inner_.broadcast(data, root);
}
void FakeCommunicator::reduce(std::span<float> data, int root, ReduceOp op) {
  on_call(CallKind::kReduce, default_timeout());
  inner_.reduce(data, root, op);
}
void FakeCommunicator::allgather(std::span<const float> mine, std::span<float> all,
                                 const GatherOptions& options) {
  on_call(CallKind::kAllgather, default_timeout());
  inner_.allgather(mine, all, options);
}
void FakeCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                                      const GatherOptions& options) {
  on_call(CallKind::kReduceScatter, default_timeout());
  inner_.reduce_scatter(in, out, op, options);
}
void FakeCommunicator::barrier() {
  on_call(CallKind::kBarrier, default_timeout());
  inner_.barrier();
}
void FakeCommunicator::send(std::span<const float> data, int peer) {
  on_call(CallKind::kSend, default_timeout());
  inner_.send(data, peer);
}
void FakeCommunicator::recv(std::span<float> data, int peer) {
  on_call(CallKind::kRecv, default_timeout());
  inner_.recv(data, peer);
}
std::unique_ptr<Communicator> FakeCommunicator::split(int color, int key) {
  on_call(CallKind::kSplit, default_timeout());
  return inner_.split(color, key);
}
std::unique_ptr<SharedModel> FakeCommunicator::create_shared_model(std::span<const float> initial,
                                                                   GlobalModelPlacement placement) {
  on_call(CallKind::kCreateSharedModel, default_timeout());
  return std::make_unique<FakeSharedModel>(inner_.create_shared_model(initial, placement), *this);
}

}  // namespace syncopate
