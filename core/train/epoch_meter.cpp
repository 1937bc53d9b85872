// Meter readings, the loss tally and the EpochMetrics row of an epoch.
#include "core/train/epoch_meter.hpp"

namespace syncopate {

MeterReading read_meters(const Executor& exec, const PhaseTimes& phases, const Communicator& comm) {
  return {exec.now(), phases, comm.counters()};
}

StepDelta operator-(const MeterReading& later, const MeterReading& earlier) {
  return {later.time - earlier.time,
          later.phases.compute_s - earlier.phases.compute_s,
          later.phases.comm_s - earlier.phases.comm_s,
          later.phases.idle_s - earlier.phases.idle_s,
          later.counters.bytes_sent - earlier.counters.bytes_sent,
          later.counters.bytes_recv - earlier.counters.bytes_recv,
          later.phases.comm_total_s - earlier.phases.comm_total_s};
}

void LossTally::add(const LossResult& result, int64_t samples, double step_lr) {
  lr = step_lr;
  if (samples == 0) return;
  loss_sum += result.loss * static_cast<double>(samples);
  correct += result.correct;
  seen += samples;
}

EpochMetrics EpochMeter::finish(const MeterReading& end, int worker, int epoch,
                                const LossTally& tally, bool classify) const {
  EpochMetrics m;
  m.worker = worker;
  m.epoch = epoch;
  m.start_s = start_.time;
  m.end_s = end.time;
  m.compute_s = end.phases.compute_s - start_.phases.compute_s + skipped_.compute;
  m.comm_s = end.phases.comm_s - start_.phases.comm_s + skipped_.comm;
  m.idle_s = end.phases.idle_s - start_.phases.idle_s + skipped_.idle;
  // Whatever is neither compute nor communication (host-side work, data loading) is idle.
  // (A residue below 1e-9 of the epoch is rounding in the subtraction, not time.)
  const double duration = end.time - start_.time;
  const double rest = duration - m.compute_s - m.comm_s - m.idle_s;
  if (rest > 1e-9 * duration) m.idle_s += rest;
  m.bytes_sent = end.counters.bytes_sent - start_.counters.bytes_sent + skipped_.sent;
  m.bytes_recv = end.counters.bytes_recv - start_.counters.bytes_recv + skipped_.recv;
  m.comm_total_s = end.phases.comm_total_s - start_.phases.comm_total_s + skipped_.comm_total;
  const bool seen = tally.seen > 0;
  m.train_loss = seen ? tally.loss_sum / static_cast<double>(tally.seen) : 0.0;
  m.train_accuracy = seen && classify
                         ? static_cast<double>(tally.correct) / static_cast<double>(tally.seen)
                         : -1.0;
  m.lr = tally.lr;
  return m;
}

}  // namespace syncopate
