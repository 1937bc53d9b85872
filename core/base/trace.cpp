// Tracer: what a worker's timeline keeps, by the scenario's trace selection.
#include "core/base/trace.hpp"

#include <string_view>

namespace syncopate {

void Tracer::span(std::string_view name, const char* category, double start_s, double end_s) {
  const std::string_view c(category);
  const bool outline = c == "epoch" || c == "sync";
  if (!(outline ? worker_on_ : detail_on_)) return;
  out_.push_back({.name = std::string(name),
                  .category = category,
                  .worker = worker_,
                  .start_s = start_s,
                  .duration_s = end_s - start_s,
                  .kind = TraceEvent::Kind::kSpan,
                  .bytes = 0,
                  .algorithm = {}});
}

void Tracer::flight(std::string name, double start_s, double end_s, uint64_t bytes,
                    std::string algorithm) {
  if (!detail_on_) return;
  out_.push_back({.name = std::move(name),
                  .category = "comm",
                  .worker = worker_,
                  .start_s = start_s,
                  .duration_s = end_s - start_s,
                  .kind = TraceEvent::Kind::kFlight,
                  .bytes = bytes,
                  .algorithm = std::move(algorithm)});
}

}  // namespace syncopate
