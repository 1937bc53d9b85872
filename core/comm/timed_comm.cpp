// TimedCommunicator: every blocking call, Work::wait() and shared-model merge timed as comm/idle,
// every operation's flight accounted and traced.
#include "core/comm/timed_comm.hpp"

#include <algorithm>
#include <iterator>
#include <string>

namespace syncopate {

class TimedWork final : public Work {
 public:
  // `name`: the operation (a string literal); `start_s`: when it was launched; `bytes`: its
  // payload.
  TimedWork(WorkPtr inner, TimedCommunicator& comm, const char* name, double start_s,
            uint64_t bytes, Algorithm algorithm)
      : inner_(std::move(inner)),
        comm_(comm),
        name_(name),
        unwinding_at_start_(std::uncaught_exceptions()),
        start_s_(start_s),
        bytes_(bytes),
        algorithm_(algorithm) {
    comm_.groups_->pending_starts.insert(start_s_);
  }
  // Not while unwinding: waiting could block on a peer that will never come, and an error of
  // that wait would have nowhere to go. inner_'s destructor then follows its backend's policy.
  ~TimedWork() override {
    if (waited_) return;
    if (std::uncaught_exceptions() > unwinding_at_start_) {
      settle();  // never reported
      return;
    }
    try {
      wait();
    } catch (const std::exception&) {  // kept, rethrown by the communicator's next call
      comm_.defer(std::current_exception());
    }
  }
  // The exposed part is the wait; the operation was in flight from its launch to its
  // completion (as the backend tells it, else the end of the wait).
  void wait() override {
    if (waited_) return;
    waited_ = true;
    const double wait_start = comm_.exec_.now();
    inner_->wait();
    const double wait_end = comm_.exec_.now();
    comm_.times_.comm_s += wait_end - wait_start;
    const Completion done = inner_->completion();
    const double end =
        done.elapsed_s < 0 ? wait_end : std::clamp(start_s_ + done.elapsed_s, start_s_, wait_end);
    const Algorithm algorithm = done.algorithm == Algorithm::kAuto ? algorithm_ : done.algorithm;
    settle();
    comm_.in_flight(name_, start_s_, end, bytes_, algorithm);
    if (comm_.tracer_ != nullptr && wait_end > wait_start)
      comm_.tracer_->span(std::string("wait ") + name_, "comm", wait_start, wait_end);
  }
  Completion completion() const override { return inner_->completion(); }

 private:
  // No longer among the launches still to be reported.
  void settle() {
    auto& pending = comm_.groups_->pending_starts;
    pending.erase(pending.find(start_s_));
  }

  WorkPtr inner_;
  TimedCommunicator& comm_;
  const char* name_;
  int unwinding_at_start_;
  double start_s_;
  uint64_t bytes_;
  Algorithm algorithm_;
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
    comm_.timed("merge", local.size_bytes(), &PhaseTimes::comm_s,
                [&] { inner_->merge(local, rule); });
  }

 private:
  std::unique_ptr<SharedModel> inner_;
  TimedCommunicator& comm_;
};

template <typename F>
void TimedCommunicator::timed(const char* name, uint64_t bytes, double PhaseTimes::*phase, F&& f) {
  const double start = exec_.now();
  f();
  const double end = exec_.now();
  times_.*phase += end - start;
  if (phase == &PhaseTimes::idle_s) {
    if (tracer_ != nullptr) tracer_->span(name, "idle", start, end);
    return;
  }
  in_flight(name, start, end, bytes, Algorithm::kAuto);
  if (tracer_ != nullptr) tracer_->span(name, "comm", start, end);
}

namespace {

// Adds [start, end) to a union of disjoint intervals (start -> end) and returns the length it
// adds to the union.
double add_to_union(std::map<double, double>& intervals, double start, double end) {
  if (!(end > start)) return 0;
  auto it = intervals.upper_bound(start);
  if (it != intervals.begin() && std::prev(it)->second >= start) --it;
  double covered = 0, merged_start = start, merged_end = end;
  while (it != intervals.end() && it->first <= end) {
    covered += std::max(0.0, std::min(it->second, end) - std::max(it->first, start));
    merged_start = std::min(merged_start, it->first);
    merged_end = std::max(merged_end, it->second);
    it = intervals.erase(it);
  }
  intervals.emplace(merged_start, merged_end);
  return (end - start) - covered;
}

}  // namespace

void TimedCommunicator::in_flight(const char* name, double start_s, double end_s, uint64_t bytes,
                                  Algorithm algorithm) {
  times_.comm_total_s += add_to_union(groups_->in_flight, start_s, end_s);
  // Every interval reported from now on starts at or after the earliest pending launch, or now.
  const double bound = groups_->pending_starts.empty()
                           ? exec_.now()
                           : std::min(exec_.now(), *groups_->pending_starts.begin());
  auto& intervals = groups_->in_flight;
  while (!intervals.empty() && intervals.begin()->second <= bound)
    intervals.erase(intervals.begin());
  if (tracer_ != nullptr)
    tracer_->flight(name, start_s, end_s, bytes,
                    algorithm == Algorithm::kAuto ? "" : std::string(to_string(algorithm)));
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
  const double start = exec_.now();
  WorkPtr work = inner_.allreduce_async(data, options);
  times_.comm_s += exec_.now() - start;
  return std::make_unique<TimedWork>(std::move(work), *this, "allreduce", start, data.size_bytes(),
                                     options.algorithm);
}
Algorithm TimedCommunicator::allreduce_waited(std::span<float> data,
                                              const CollectiveOptions& options) {
  rethrow_deferred();
  const double start = exec_.now();
  const Algorithm ran = inner_.allreduce_waited(data, options);
  const double end = exec_.now();
  times_.comm_s += end - start;
  in_flight("allreduce", start, end, data.size_bytes(),
            ran == Algorithm::kAuto ? options.algorithm : ran);
  if (tracer_ != nullptr && end > start) tracer_->span("wait allreduce", "comm", start, end);
  return ran;
}
WorkPtr TimedCommunicator::allgather_async(std::span<const float> mine, std::span<float> all,
                                           const GatherOptions& options) {
  rethrow_deferred();
  const double start = exec_.now();
  WorkPtr work = inner_.allgather_async(mine, all, options);
  times_.comm_s += exec_.now() - start;
  return std::make_unique<TimedWork>(std::move(work), *this, "allgather", start, all.size_bytes(),
                                     options.algorithm);
}
WorkPtr TimedCommunicator::reduce_scatter_async(std::span<const float> in, std::span<float> out,
                                                ReduceOp op, const GatherOptions& options) {
  rethrow_deferred();
  const double start = exec_.now();
  WorkPtr work = inner_.reduce_scatter_async(in, out, op, options);
  times_.comm_s += exec_.now() - start;
  return std::make_unique<TimedWork>(std::move(work), *this, "reduce_scatter", start,
                                     in.size_bytes(), options.algorithm);
}
void TimedCommunicator::broadcast(std::span<float> data, int root) {
  rethrow_deferred();
  timed("broadcast", data.size_bytes(), &PhaseTimes::comm_s, [&] { inner_.broadcast(data, root); });
}
void TimedCommunicator::reduce(std::span<float> data, int root, ReduceOp op) {
  rethrow_deferred();
  timed("reduce", data.size_bytes(), &PhaseTimes::comm_s, [&] { inner_.reduce(data, root, op); });
}
void TimedCommunicator::allgather(std::span<const float> mine, std::span<float> all,
                                  const GatherOptions& options) {
  rethrow_deferred();
  timed("allgather", all.size_bytes(), &PhaseTimes::comm_s,
        [&] { inner_.allgather(mine, all, options); });
}
void TimedCommunicator::reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                                       const GatherOptions& options) {
  rethrow_deferred();
  timed("reduce_scatter", in.size_bytes(), &PhaseTimes::comm_s,
        [&] { inner_.reduce_scatter(in, out, op, options); });
}
void TimedCommunicator::barrier() {
  rethrow_deferred();
  timed("barrier", 0, &PhaseTimes::idle_s, [&] { inner_.barrier(); });
}
void TimedCommunicator::send(std::span<const float> data, int peer) {
  rethrow_deferred();
  timed("send", data.size_bytes(), &PhaseTimes::comm_s, [&] { inner_.send(data, peer); });
}
void TimedCommunicator::recv(std::span<float> data, int peer) {
  rethrow_deferred();
  timed("recv", data.size_bytes(), &PhaseTimes::comm_s, [&] { inner_.recv(data, peer); });
}
std::unique_ptr<Communicator> TimedCommunicator::split(int color, int key) {
  rethrow_deferred();
  std::unique_ptr<Communicator> group;
  timed("split", 0, &PhaseTimes::comm_s, [&] { group = inner_.split(color, key); });
  return std::unique_ptr<Communicator>(new TimedCommunicator(std::move(group), *this));
}

TimedCommunicator::TimedCommunicator(std::unique_ptr<Communicator> group,
                                     const TimedCommunicator& parent)
    : owned_(std::move(group)),
      inner_(*owned_),
      exec_(parent.exec_),
      times_(parent.times_),
      tracer_(parent.tracer_),
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
    std::span<const float> initial, GlobalModelPlacement placement) {
  rethrow_deferred();
  std::unique_ptr<SharedModel> model;
  timed("create_shared_model", initial.size_bytes(), &PhaseTimes::comm_s,
        [&] { model = inner_.create_shared_model(initial, placement); });
  return std::make_unique<TimedSharedModel>(std::move(model), *this);
}

}  // namespace syncopate
