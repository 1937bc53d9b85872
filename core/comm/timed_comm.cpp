#include "core/comm/timed_comm.hpp"

namespace syncopate {
namespace {

class TimedWork final : public Work {
 public:
  TimedWork(WorkPtr inner, Executor& exec, PhaseTimes& times)
      : inner_(std::move(inner)), exec_(exec), times_(times) {}
  ~TimedWork() override {
    if (!waited_) {
      try {
        wait();
      } catch (...) {
        // A destructor must not throw; the error was the caller's to collect with wait().
      }
    }
  }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    const double start = exec_.now();
    inner_->wait();
    times_.comm_s += exec_.now() - start;
  }

 private:
  WorkPtr inner_;
  Executor& exec_;
  PhaseTimes& times_;
  bool waited_ = false;
};

}  // namespace

template <typename F>
void TimedCommunicator::timed(double PhaseTimes::*phase, F&& f) {
  const double start = exec_.now();
  f();
  times_.*phase += exec_.now() - start;
}

WorkPtr TimedCommunicator::allreduce_async(std::span<float> data,
                                           const CollectiveOptions& options) {
  WorkPtr work;
  timed(&PhaseTimes::comm_s, [&] { work = inner_.allreduce_async(data, options); });
  return std::make_unique<TimedWork>(std::move(work), exec_, times_);
}
void TimedCommunicator::broadcast(std::span<float> data, int root) {
  timed(&PhaseTimes::comm_s, [&] { inner_.broadcast(data, root); });
}
void TimedCommunicator::reduce(std::span<float> data, int root, ReduceOp op) {
  timed(&PhaseTimes::comm_s, [&] { inner_.reduce(data, root, op); });
}
void TimedCommunicator::allgather(std::span<const float> mine, std::span<float> all) {
  timed(&PhaseTimes::comm_s, [&] { inner_.allgather(mine, all); });
}
void TimedCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out,
                                       ReduceOp op) {
  timed(&PhaseTimes::comm_s, [&] { inner_.reduce_scatter(in, out, op); });
}
void TimedCommunicator::barrier() {
  timed(&PhaseTimes::idle_s, [&] { inner_.barrier(); });
}
void TimedCommunicator::send(std::span<const float> data, int peer) {
  timed(&PhaseTimes::comm_s, [&] { inner_.send(data, peer); });
}
void TimedCommunicator::recv(std::span<float> data, int peer) {
  timed(&PhaseTimes::comm_s, [&] { inner_.recv(data, peer); });
}
std::unique_ptr<Communicator> TimedCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> group;
  timed(&PhaseTimes::comm_s, [&] { group = inner_.split(color, key); });
  return std::make_unique<TimedCommunicator>(std::move(group), exec_, times_);
}
void TimedCommunicator::create_global(std::span<const float> initial) {
  timed(&PhaseTimes::comm_s, [&] { inner_.create_global(initial); });
}
void TimedCommunicator::merge_into_global(std::span<float> local, const MergeRule& rule) {
  timed(&PhaseTimes::comm_s, [&] { inner_.merge_into_global(local, rule); });
}

}  // namespace syncopate
