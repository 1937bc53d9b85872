// TimedCommunicator: every blocking call, Work::wait() and shared-model merge timed as comm/idle.
#include "core/comm/timed_comm.hpp"

#include <algorithm>

namespace syncopate {

class TimedWork final : public Work {
 public:
  TimedWork(WorkPtr inner, TimedCommunicator& comm)
      : inner_(std::move(inner)), comm_(comm), unwinding_at_start_(std::uncaught_exceptions()) {}
  // Not while unwinding: waiting could block on a peer that will never come, and an error of
  // that wait would have nowhere to go. inner_'s destructor then follows its backend's policy.
  ~TimedWork() override {
    if (waited_ || std::uncaught_exceptions() > unwinding_at_start_) return;
    try {
      wait();
    } catch (const std::exception&) {  // kept, rethrown by the communicator's next call
      comm_.defer(std::current_exception());
    }
  }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    comm_.timed(&PhaseTimes::comm_s, [&] { inner_->wait(); });
  }

 private:
  WorkPtr inner_;
  TimedCommunicator& comm_;
  int unwinding_at_start_;
  bool waited_ = false;
};

// Merges count as comm time of the communicator that created the model.
class TimedSharedModel final : public SharedModel {
 public:
  TimedSharedModel(std::unique_ptr<SharedModel> inner, TimedCommunicator& comm)
      : inner_(std::move(inner)), comm_(comm) {}
  size_t size() const override { return inner_->size(); }
  void merge(std::span<float> local, const MergeRule& rule) override {
    comm_.rethrow_deferred();
    comm_.timed(&PhaseTimes::comm_s, [&] { inner_->merge(local, rule); });
  }

 private:
  std::unique_ptr<SharedModel> inner_;
  TimedCommunicator& comm_;
};

template <typename F>
void TimedCommunicator::timed(double PhaseTimes::*phase, F&& f) {
  const double start = exec_.now();
  f();
  times_.*phase += exec_.now() - start;
}

void TimedCommunicator::defer(std::exception_ptr error) {
  if (!deferred_) deferred_ = std::move(error);  // the first error is the cause
}

void TimedCommunicator::rethrow_deferred() {
  if (deferred_) std::rethrow_exception(std::exchange(deferred_, nullptr));
}

WorkPtr TimedCommunicator::allreduce_async(std::span<float> data,
                                           const CollectiveOptions& options) {
  rethrow_deferred();
  WorkPtr work;
  timed(&PhaseTimes::comm_s, [&] { work = inner_.allreduce_async(data, options); });
  return std::make_unique<TimedWork>(std::move(work), *this);
}
void TimedCommunicator::broadcast(std::span<float> data, int root) {
  rethrow_deferred();
  timed(&PhaseTimes::comm_s, [&] { inner_.broadcast(data, root); });
}
void TimedCommunicator::reduce(std::span<float> data, int root, ReduceOp op) {
  rethrow_deferred();
  timed(&PhaseTimes::comm_s, [&] { inner_.reduce(data, root, op); });
}
void TimedCommunicator::allgather(std::span<const float> mine, std::span<float> all) {
  rethrow_deferred();
  timed(&PhaseTimes::comm_s, [&] { inner_.allgather(mine, all); });
}
void TimedCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out,
                                       ReduceOp op) {
  rethrow_deferred();
  timed(&PhaseTimes::comm_s, [&] { inner_.reduce_scatter(in, out, op); });
}
void TimedCommunicator::barrier() {
  rethrow_deferred();
  timed(&PhaseTimes::idle_s, [&] { inner_.barrier(); });
}
void TimedCommunicator::send(std::span<const float> data, int peer) {
  rethrow_deferred();
  timed(&PhaseTimes::comm_s, [&] { inner_.send(data, peer); });
}
void TimedCommunicator::recv(std::span<float> data, int peer) {
  rethrow_deferred();
  timed(&PhaseTimes::comm_s, [&] { inner_.recv(data, peer); });
}
std::unique_ptr<Communicator> TimedCommunicator::split(int color, int key) {
  rethrow_deferred();
  std::unique_ptr<Communicator> group;
  timed(&PhaseTimes::comm_s, [&] { group = inner_.split(color, key); });
  return std::unique_ptr<Communicator>(new TimedCommunicator(std::move(group), *this));
}

TimedCommunicator::TimedCommunicator(std::unique_ptr<Communicator> group,
                                     const TimedCommunicator& parent)
    : owned_(std::move(group)),
      inner_(*owned_),
      exec_(parent.exec_),
      times_(parent.times_),
      groups_(parent.groups_),
      is_root_(false) {
  groups_->live.push_back(&inner_);
}

TimedCommunicator::~TimedCommunicator() {
  if (is_root_) return;
  auto& live = groups_->live;
  live.erase(std::remove(live.begin(), live.end(), &inner_), live.end());
  const CommCounters mine = inner_.counters();
  groups_->retired.bytes_sent += mine.bytes_sent;
  groups_->retired.bytes_recv += mine.bytes_recv;
}

CommCounters TimedCommunicator::counters() const {
  CommCounters total = inner_.counters();
  if (!is_root_) return total;
  for (const Communicator* group : groups_->live) {
    const CommCounters c = group->counters();
    total.bytes_sent += c.bytes_sent;
    total.bytes_recv += c.bytes_recv;
  }
  total.bytes_sent += groups_->retired.bytes_sent;
  total.bytes_recv += groups_->retired.bytes_recv;
  return total;
}
std::unique_ptr<SharedModel> TimedCommunicator::create_shared_model(
    std::span<const float> initial) {
  rethrow_deferred();
  std::unique_ptr<SharedModel> model;
  timed(&PhaseTimes::comm_s, [&] { model = inner_.create_shared_model(initial); });
  return std::make_unique<TimedSharedModel>(std::move(model), *this);
}

}  // namespace syncopate
