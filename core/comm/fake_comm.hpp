#pragma once
// FakeCommunicator: a Communicator decorator that injects faults, so that the error paths of the
// Trainer and the strategies are testable without SimGrid or MPI (as c10d's FakeProcessGroup).
// It forwards every call to the communicator it wraps (a LocalCommunicator by default) and, as
// planned: fails the n-th call of a kind with PeerFailure, or delays it by some seconds on the
// executor's clock (Executor::advance; see ManualClockExecutor), throwing PeerTimeout when the
// delay exceeds the call's timeout.
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/comm/comm.hpp"

namespace syncopate {

enum class CallKind {
  kAllreduce,  // issue of allreduce_async (and so of allreduce)
  kWait,       // Work::wait() of an allreduce_async
  kBroadcast,
  kReduce,
  kAllgather,
  kReduceScatter,
  kBarrier,
  kSend,
  kRecv,
  kSplit,
  kCreateSharedModel,
  kMerge,  // SharedModel::merge of a model this communicator created
};
inline constexpr size_t kNumCallKinds = 12;
std::string_view to_string(CallKind kind);

// One planned fault: the nth call (1-based) of `kind` fails, or every call from the nth on is
// delayed by delay_s (when delay_s > 0: a delay, not a failure).
struct Fault {
  CallKind kind = CallKind::kAllreduce;
  int64_t nth = 1;
  double delay_s = 0;
};

class FakeCommunicator final : public Communicator {
 public:
  // Wraps `inner` (which must outlive this); delays advance `exec`'s clock.
  FakeCommunicator(Communicator& inner, Executor& exec, std::vector<Fault> faults);
  // Wraps a LocalCommunicator of its own.
  FakeCommunicator(Executor& exec, std::vector<Fault> faults);
  ~FakeCommunicator() override;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int node() const override { return inner_.node(); }
  WorkPtr allreduce_async(std::span<float> data, const CollectiveOptions& options) override;
  void broadcast(std::span<float> data, int root) override;
  void reduce(std::span<float> data, int root, ReduceOp op) override;
  void allgather(std::span<const float> mine, std::span<float> all,
                 const GatherOptions& options) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                      const GatherOptions& options) override;
  void barrier() override;
  void send(std::span<const float> data, int peer) override;
  void recv(std::span<float> data, int peer) override;
  // The group is not faulty (its calls are the wrapped group's).
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::unique_ptr<SharedModel> create_shared_model(std::span<const float> initial,
                                                   GlobalModelPlacement placement) override;
  CommCounters counters() const override { return inner_.counters(); }
  void set_default_timeout(double seconds) override { inner_.set_default_timeout(seconds); }
  double default_timeout() const override { return inner_.default_timeout(); }

  // Calls of `kind` so far (faulty ones included).
  int64_t calls(CallKind kind) const { return calls_[static_cast<size_t>(kind)]; }

  // Counts a call of `kind` and applies the faults planned for it: advances the clock by the
  // delays (up to timeout_s when that is > 0, then PeerTimeout), throws PeerFailure for a
  // planned failure. Used by this object's Works and shared models.
  void on_call(CallKind kind, double timeout_s);

 private:
  std::unique_ptr<Communicator> owned_;
  Communicator& inner_;
  Executor& exec_;
  std::vector<Fault> faults_;
  std::array<int64_t, kNumCallKinds> calls_{};
};

// An executor whose clock moves only by advance() and by a fixed time per compute() call, so
// that delays and timeouts are exact and tests take no wall time.
class ManualClockExecutor final : public Executor {
 public:
  explicit ManualClockExecutor(double seconds_per_compute = 0) : step_(seconds_per_compute) {}
  double now() const override { return now_; }
  void compute(const Cost&, FunctionRef<void()> math) override {
    math();
    now_ += step_;
  }
  void advance(double seconds) override { now_ += seconds; }

 private:
  double step_;
  double now_ = 0;
};

}  // namespace syncopate
