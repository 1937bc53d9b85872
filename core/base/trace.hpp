#pragma once
// A worker's timeline for trace.json: spans on its training track (epochs, steps, compute,
// exposed waits, synchronisations, idle time) and the communication operations in flight, from
// launch to completion, from which the bytes-in-flight counter is drawn.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace syncopate {

struct TraceEvent {
  enum class Kind { kSpan, kFlight };
  std::string name;
  std::string category;  // spans: "epoch", "step", "compute", "comm", "sync", "idle"
  int worker = 0;
  double start_s = 0, duration_s = 0;
  Kind kind = Kind::kSpan;
  uint64_t bytes = 0;     // flights: bytes this worker sends
  std::string algorithm;  // flights of collectives: the algorithm asked for ("" otherwise)
};

// What is traced (the scenario's trace.workers and trace.steps): workers 0..workers-1, and in
// each epoch its first `steps` steps in detail (compute, collectives, waits). Epoch spans and
// synchronisations are traced for every traced worker.
struct TraceSelection {
  int workers = 16;
  int64_t steps = 3;
};

class Tracer {
 public:
  Tracer(std::vector<TraceEvent>& out, int worker, const TraceSelection& selection)
      : out_(out), worker_(worker), selection_(selection), worker_on_(worker < selection.workers) {
    detail_on_ = worker_on_;
  }

  // Step k of an epoch begins (detail follows the selection) / the epoch's steps are over
  // (detail on again for the epoch-level work of a traced worker).
  void begin_step(size_t k) {
    detail_on_ = worker_on_ && k < static_cast<size_t>(selection_.steps);
  }
  void end_steps() { detail_on_ = worker_on_; }

  bool worker_on() const { return worker_on_; }
  bool detail_on() const { return detail_on_; }

  // A span of the worker's training track: epoch, step and sync spans when the worker is
  // traced, the rest only in detail.
  void span(std::string_view name, const char* category, double start_s, double end_s);
  // An operation in flight from start_s to end_s (in detail only).
  void flight(std::string name, double start_s, double end_s, uint64_t bytes,
              std::string algorithm);

 private:
  std::vector<TraceEvent>& out_;
  int worker_;
  TraceSelection selection_;
  bool worker_on_;
  bool detail_on_;
};

}  // namespace syncopate
