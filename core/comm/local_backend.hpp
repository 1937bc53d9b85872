#pragma once
// The in-process backend: one worker, a size-1 communicator and a wall-clock executor. It is what
// `syncopate run` uses with backend = "local", and the reference "serial SGD" of the tests.
#include <chrono>
#include <vector>

#include "core/comm/comm.hpp"

namespace syncopate {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int node() const override { return 0; }
  WorkPtr allreduce_async(std::span<float> data, const CollectiveOptions& options) override;
  void broadcast(std::span<float>, int root) override;
  void reduce(std::span<float> data, int root, ReduceOp op) override;
  void allgather(std::span<const float> mine, std::span<float> all,
                 const GatherOptions& options) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out, ReduceOp op,
                      const GatherOptions& options) override;
  void barrier() override {}
  void send(std::span<const float> data, int peer) override;
  void recv(std::span<float> data, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::unique_ptr<SharedModel> create_shared_model(std::span<const float> initial,
                                                   GlobalModelPlacement placement) override;
  CommCounters counters() const override { return {}; }
  // Nothing here waits for a peer; stored for split groups.
  void set_default_timeout(double seconds) override { timeout_s_ = seconds; }
  double default_timeout() const override { return timeout_s_; }

 private:
  double timeout_s_ = kNoTimeout;
};

class WallClockExecutor final : public Executor {
 public:
  WallClockExecutor() : start_(std::chrono::steady_clock::now()) {}
  double now() const override {
    return offset_ +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void compute(const Cost&, FunctionRef<void()> math) override { math(); }
  void restore_clock(std::span<const double> state) override {
    if (!state.empty()) offset_ = state[0] - (now() - offset_);
  }

 private:
  std::chrono::steady_clock::time_point start_;
  double offset_ = 0;  // seconds before a resume (restore_clock)
};

}  // namespace syncopate
