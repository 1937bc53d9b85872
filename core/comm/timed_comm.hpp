#pragma once
// A Communicator decorator that accounts the time a worker spends blocked in communication,
// measured with the Executor's clock, so every backend reports comm/idle the same way:
//   comm: blocked in collectives, point-to-point, global-model merges, and Work::wait();
//   idle: blocked in barrier().
#include <memory>

#include "core/comm/comm.hpp"

namespace syncopate {

struct PhaseTimes {
  double compute_s = 0;
  double comm_s = 0;
  double idle_s = 0;
};

class TimedCommunicator final : public Communicator {
 public:
  TimedCommunicator(Communicator& inner, Executor& exec, PhaseTimes& times)
      : inner_(inner), exec_(exec), times_(times) {}
  // Owns the wrapped communicator (for split groups).
  TimedCommunicator(std::unique_ptr<Communicator> inner, Executor& exec, PhaseTimes& times)
      : owned_(std::move(inner)), inner_(*owned_), exec_(exec), times_(times) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int node() const override { return inner_.node(); }
  WorkPtr allreduce_async(std::span<float> data, const CollectiveOptions& options) override;
  void broadcast(std::span<float> data, int root) override;
  void reduce(std::span<float> data, int root, ReduceOp op) override;
  void allgather(std::span<const float> mine, std::span<float> all) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op) override;
  void barrier() override;
  void send(std::span<const float> data, int peer) override;
  void recv(std::span<float> data, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  void create_global(std::span<const float> initial) override;
  void merge_into_global(std::span<float> local, const MergeRule& rule) override;
  CommCounters counters() const override { return inner_.counters(); }

 private:
  template <typename F>
  void timed(double PhaseTimes::*phase, F&& f);

  std::unique_ptr<Communicator> owned_;
  Communicator& inner_;
  Executor& exec_;
  PhaseTimes& times_;
};

}  // namespace syncopate
