#pragma once
// The live progress of `syncopate run`: on a terminal one line redrawn in place (epoch and step,
// loss, accuracy, simulated or wall time, ETA); otherwise a plain line at every epoch's end and
// every 10 s; nothing with --quiet.
#include <chrono>
#include <cstdio>

#include "core/train/progress.hpp"

namespace syncopate::app {

class ProgressLine {
 public:
  enum class Style { kTerminal, kPlain, kOff };
  // kTerminal if stdout is a terminal, else kPlain; kOff when quiet.
  static Style style_for_stdout(bool quiet);

  ProgressLine(Style style, bool simulated, std::FILE* out = stdout);
  ~ProgressLine();  // ends a redrawn line with a newline
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void update(const Progress& p);
  // The callback the trainer takes (it refers to this object).
  ProgressFn callback() {
    return [this](const Progress& p) { update(p); };
  }

 private:
  using Clock = std::chrono::steady_clock;
  void print(const Progress& p, double fraction);

  Style style_;
  bool simulated_;
  std::FILE* out_;
  Clock::time_point start_, last_;
  bool drawn_ = false;
};

}  // namespace syncopate::app
