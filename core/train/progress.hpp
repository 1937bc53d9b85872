#pragma once
// What the worker loop reports after each step, for a live progress display (worker 0 only).
#include <cstddef>
#include <functional>

namespace syncopate {

struct Progress {
  int epoch = 0, epochs = 1;   // epoch counts from 0
  size_t step = 0, steps = 0;  // steps done in this epoch, of `steps`
  double loss = -1;            // mean training loss of the epoch so far; -1: absent
  double accuracy = -1;        // training accuracy of the epoch so far; -1: absent
  double time_s = 0;           // the executor's clock: simulated or wall seconds
};
using ProgressFn = std::function<void(const Progress&)>;

}  // namespace syncopate
