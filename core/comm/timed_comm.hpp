#pragma once
// A Communicator decorator that accounts the time a worker spends blocked in communication,
// measured with the Executor's clock, so every backend reports comm/idle the same way:
//   comm: blocked in collectives, point-to-point, shared-model merges, and Work::wait();
//   idle: blocked in barrier();
//   comm_total: some operation of this worker in flight, from its launch to its completion
//     (overlapped with compute or not; the union of those intervals).
// With a Tracer it also records each operation in flight (payload bytes, algorithm) and each
// blocking call or exposed wait as a span.
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "core/base/trace.hpp"
#include "core/comm/comm.hpp"

namespace syncopate {

struct PhaseTimes {
  double compute_s = 0;
  double comm_s = 0;
  double idle_s = 0;
  double comm_total_s = 0;
};

// Works it returns: destroying one that was not waited for waits for it, except while an
// exception unwinds the stack (it then neither blocks nor catches anything; the wrapped Work's
// own destructor decides). An error raised by that wait cannot leave a destructor: it is kept
// and rethrown by the next call on this communicator (or by rethrow_deferred()).
class TimedCommunicator final : public Communicator {
 public:
  // tracer: where operations are traced (none: not traced).
  TimedCommunicator(Communicator& inner, Executor& exec, PhaseTimes& times,
                    Tracer* tracer = nullptr)
      : inner_(inner),
        exec_(exec),
        times_(times),
        tracer_(tracer),
        groups_(std::make_shared<GroupLedger>()) {}
  ~TimedCommunicator() override;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int node() const override { return inner_.node(); }
  WorkPtr allreduce_async(std::span<float> data, const CollectiveOptions& options) override;
  // Accounted and traced as allreduce_async() waited for at once.
  Algorithm allreduce_waited(std::span<float> data, const CollectiveOptions& options) override;
  void broadcast(std::span<float> data, int root) override;
  void reduce(std::span<float> data, int root, ReduceOp op) override;
  void allgather(std::span<const float> mine, std::span<float> all,
                 const GatherOptions& options) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                      const GatherOptions& options) override;
  WorkPtr allgather_async(std::span<const float> mine, std::span<float> all,
                          const GatherOptions& options) override;
  WorkPtr reduce_scatter_async(std::span<const float> in, std::span<float> out, ReduceOp op,
                               const GatherOptions& options) override;
  void barrier() override;
  void send(std::span<const float> data, int peer) override;
  void recv(std::span<float> data, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::unique_ptr<SharedModel> create_shared_model(std::span<const float> initial,
                                                   GlobalModelPlacement placement) override;
  // This worker's traffic on this communicator and on every group split from it (hierarchical's
  // node-local allreduces count as this worker's bytes), including groups already destroyed.
  CommCounters counters() const override;
  void set_default_timeout(double seconds) override { inner_.set_default_timeout(seconds); }
  double default_timeout() const override { return inner_.default_timeout(); }

  // Rethrows (once) an error kept from a Work's destructor; nothing if there is none.
  void rethrow_deferred();

 private:
  friend class TimedWork;
  friend class TimedSharedModel;
  // Runs a blocking operation of `bytes` payload as `name`, accounted to `phase`.
  template <typename F>
  void timed(const char* name, uint64_t bytes, double PhaseTimes::*phase, F&& f);
  // An operation was in flight from start_s to end_s.
  void in_flight(const char* name, double start_s, double end_s, uint64_t bytes,
                 Algorithm algorithm);
  void defer(std::exception_ptr error);

  // The groups split from a communicator (and from those), shared by all of them: the root sums
  // their counters; a group that is destroyed leaves its final counters in `retired`.
  struct GroupLedger {
    std::vector<const Communicator*> live;
    CommCounters retired;
    // comm_total: the union of the in-flight intervals reported so far (disjoint, by start),
    // and the launch times of the Works not yet reported. Works are reported when waited for,
    // which need not be in launch order (a blocking call while earlier Works are in flight,
    // stage 3's reduce-scatters waited after later gathers), so the union is kept whole back to
    // the earliest launch still to come; what ends before it can no longer change.
    std::map<double, double> in_flight;
    std::multiset<double> pending_starts;
  };
  // A group split from `parent` (owns the wrapped group communicator).
  TimedCommunicator(std::unique_ptr<Communicator> group, const TimedCommunicator& parent);

  std::unique_ptr<Communicator> owned_;
  Communicator& inner_;
  Executor& exec_;
  PhaseTimes& times_;
  Tracer* tracer_;
  std::exception_ptr deferred_;
  std::shared_ptr<GroupLedger> groups_;
  bool is_root_ = true;
};

}  // namespace syncopate
