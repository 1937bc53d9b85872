// ProgressLine: the live line on a terminal, plain periodic lines elsewhere.
#include "app/progress.hpp"

#include <unistd.h>

namespace syncopate::app {

ProgressLine::Style ProgressLine::style_for_stdout(bool quiet) {
  if (quiet) return Style::kOff;
  return isatty(STDOUT_FILENO) != 0 ? Style::kTerminal : Style::kPlain;
}

ProgressLine::ProgressLine(Style style, bool simulated, std::FILE* out)
    : style_(style), simulated_(simulated), out_(out), start_(Clock::now()), last_(start_) {}

ProgressLine::~ProgressLine() {
  if (drawn_ && style_ == Style::kTerminal) std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressLine::update(const Progress& p) {
  if (style_ == Style::kOff || p.steps == 0) return;
  const Clock::time_point now = Clock::now();
  const bool epoch_end = p.step >= p.steps;
  const double since_last = std::chrono::duration<double>(now - last_).count();
  // Redraw 10 times a second on a terminal; a plain line at epoch ends and every 10 s.
  if (style_ == Style::kTerminal ? since_last < 0.1 && !epoch_end : !epoch_end && since_last < 10)
    return;
  last_ = now;
  const double fraction = (p.epoch + static_cast<double>(p.step) / static_cast<double>(p.steps)) /
                          static_cast<double>(p.epochs);
  print(p, fraction);
}

void ProgressLine::print(const Progress& p, double fraction) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  if (style_ == Style::kTerminal) std::fputs("\r\033[K", out_);
  std::fprintf(out_, "epoch %d/%d  step %zu/%zu", p.epoch + 1, p.epochs, p.step, p.steps);
  if (p.loss >= 0) std::fprintf(out_, "  loss %.4f", p.loss);
  if (p.accuracy >= 0) std::fprintf(out_, "  acc %.4f", p.accuracy);
  std::fprintf(out_, "  %s %.4g s", simulated_ ? "simulated" : "time", p.time_s);
  if (fraction > 0 && fraction < 1)
    std::fprintf(out_, "  ETA %.0f s", elapsed / fraction * (1 - fraction));
  if (style_ == Style::kPlain) std::fputc('\n', out_);
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace syncopate::app
