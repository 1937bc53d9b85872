#pragma once
// Metering an epoch: readings of the worker's clock, phase times and communication counters,
// the training loss tally, and the EpochMetrics row made from them.
#include <cstdint>

#include "core/comm/comm.hpp"
#include "core/comm/timed_comm.hpp"
#include "core/nn/loss.hpp"
#include "core/train/fast_forward.hpp"
#include "core/train/recorder.hpp"

namespace syncopate {

// What the worker's meters show at one moment.
struct MeterReading {
  double time = 0;
  PhaseTimes phases;
  CommCounters counters;
};
MeterReading read_meters(const Executor& exec, const PhaseTimes& phases, const Communicator& comm);
// What the records gained from `earlier` to `later`.
StepDelta operator-(const MeterReading& later, const MeterReading& earlier);

// The training loss and accuracy over an epoch's samples, and its last learning rate.
struct LossTally {
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  double lr = 0;
  // A step of `samples` samples (0: none, its result means nothing) at learning rate lr.
  void add(const LossResult& result, int64_t samples, double step_lr);
};

// One epoch of one worker, from its start reading; skipped steps are added as they are skipped.
class EpochMeter {
 public:
  explicit EpochMeter(const MeterReading& start) : start_(start) {}
  double start() const { return start_.time; }
  const MeterReading& start_reading() const { return start_; }
  void add_skipped(const StepDelta& delta) { skipped_ += delta; }
  // The epoch's row, the epoch having ended at `end` (test_accuracy left unevaluated);
  // classify: the tally counts correct predictions.
  EpochMetrics finish(const MeterReading& end, int worker, int epoch, const LossTally& tally,
                      bool classify) const;

 private:
  MeterReading start_;
  StepDelta skipped_;  // what fast-forwarded steps would have added
};

}  // namespace syncopate
