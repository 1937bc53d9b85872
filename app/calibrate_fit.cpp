// Fitting latency, bandwidth, overheads and piecewise factors to ping-pong timings over sizes.
#include "app/calibrate_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/spread.hpp"
#include "core/base/check.hpp"

namespace syncopate::app {
namespace {

constexpr double kMinFactor = 1e-6, kMaxFactor = 1e6;  // what a platform's tables accept

}  // namespace

TransportFit fit_transport(std::span<const PingPongPoint> points, double send_overhead_s,
                           double recv_overhead_s) {
  SYNC_CHECK(points.size() >= 2, "a transport fit needs two sizes or more, got " << points.size());
  TransportFit fit;
  fit.points.assign(points.begin(), points.end());
  std::vector<PingPongPoint>& p = fit.points;
  for (size_t i = 1; i < p.size(); ++i)
    SYNC_CHECK(p[i].bytes > p[i - 1].bytes, "ping-pong sizes must ascend");
  // Load only ever slows a message down: a median above a larger message's is lowered to it.
  for (size_t i = p.size() - 1; i-- > 0;) p[i].seconds = std::min(p[i].seconds, p[i + 1].seconds);
  // The fixed part: the line through the two smallest sizes at 0 bytes (within half the
  // smallest's time and all of it).
  const double slope = (p[1].seconds - p[0].seconds) / (p[1].bytes - p[0].bytes);
  const double first =
      std::clamp(p[0].seconds - slope * p[0].bytes, 0.5 * p[0].seconds, p[0].seconds);
  const double overhead = send_overhead_s + recv_overhead_s;
  const double scale = overhead > 0.95 * first ? 0.95 * first / overhead : 1.0;
  fit.send_overhead_s = send_overhead_s * scale;
  fit.recv_overhead_s = recv_overhead_s * scale;
  fit.latency_s = first - overhead * scale;
  const double fixed = fit.send_overhead_s + fit.recv_overhead_s + fit.latency_s;
  // A size's effective bandwidth beyond the fixed part (+infinity where it takes no longer).
  const auto effective = [&](const PingPongPoint& q) { return q.bytes / (q.seconds - fixed); };
  fit.bandwidth_Bps = p.back().seconds > fixed ? effective(p.back()) : p.back().bytes / first;
  for (size_t i = 1; i < p.size(); ++i) {
    const double factor = p[i].seconds > fixed ? effective(p[i]) / fit.bandwidth_Bps : kMaxFactor;
    const double from = i == 1 ? 0 : std::round(std::sqrt(p[i - 1].bytes * p[i].bytes));
    fit.bandwidth_factor.push_back({from, std::clamp(factor, kMinFactor, kMaxFactor)});
  }
  return fit;
}

double fitted_seconds(const TransportFit& fit, double bytes) {
  auto at = [&](const std::vector<FactorEntry>& table) {
    double factor = 1;
    for (const FactorEntry& e : table)
      if (e.from_bytes <= bytes) factor = e.factor;
    return factor;
  };
  return fit.send_overhead_s + fit.recv_overhead_s + fit.latency_s * at(fit.latency_factor) +
         bytes / (fit.bandwidth_Bps * at(fit.bandwidth_factor));
}

DuplexFit fit_duplex(std::span<const PingPongPoint> one_way,
                     std::span<const PingPongPoint> exchange) {
  std::vector<double> ratios;
  for (const PingPongPoint& e : exchange)
    for (const PingPongPoint& o : one_way)
      if (o.bytes == e.bytes && o.seconds > 0) ratios.push_back(e.seconds / o.seconds);
  DuplexFit fit;
  fit.sizes = ratios.size();
  if (ratios.empty()) return fit;
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  fit.ratio = n % 2 == 1 ? ratios[n / 2] : 0.5 * (ratios[n / 2 - 1] + ratios[n / 2]);
  fit.shared = fit.ratio >= 1.5;
  return fit;
}

std::vector<FactorEntry> fit_speeds(std::span<const PingPongPoint> points) {
  constexpr double kMaxSpeed = 1e15;  // what a platform's tables accept
  std::vector<FactorEntry> speeds;
  for (size_t i = 0; i < points.size(); ++i) {
    SYNC_CHECK(i == 0 || points[i].bytes > points[i - 1].bytes, "pass sizes must ascend");
    const double from = i == 0 ? 0 : std::round(std::sqrt(points[i - 1].bytes * points[i].bytes));
    const double speed = points[i].seconds > 0
                             ? std::min(points[i].bytes / points[i].seconds, kMaxSpeed)
                             : kMaxSpeed;
    speeds.push_back({from, speed});
  }
  return speeds;
}

double compute_skew(double step_median_s, double sum_of_medians_s) {
  if (!(sum_of_medians_s > 0)) return 1;
  return std::clamp(step_median_s / sum_of_medians_s, 0.5, 2.0);
}

double worker_spread(std::span<const double> rank_step_s) {
  const size_t n = rank_step_s.size();
  if (n < 2 || std::ranges::any_of(rank_step_s, [](double t) { return !(t > 0); })) return 0;
  double mean = 0;
  for (double t : rank_step_s) mean += std::log(t) / static_cast<double>(n);
  double squares = 0;
  for (double t : rank_step_s) squares += (std::log(t) - mean) * (std::log(t) - mean);
  const double sd = std::sqrt(squares / static_cast<double>(n - 1));
  const double nd = static_cast<double>(n);
  const double c4 =
      std::sqrt(2 / (nd - 1)) * std::exp(std::lgamma(nd / 2) - std::lgamma((nd - 1) / 2));
  return std::clamp(sd / c4, 0.0, 0.5);
}

std::string unsteady_step_warning(const std::vector<double>& step_seconds, double steady_spread) {
  if (step_seconds.empty()) return "";
  const Spread s = spread(step_seconds);
  if (!(s.p90 > steady_spread * s.p10)) return "";
  char text[400];
  std::snprintf(text, sizeof text,
                "a step's timed parts took %.3g s at p10 and %.3g s at p90 (%.2fx, over %.2fx): "
                "the machine's speed changed while they were timed, so the profile's median "
                "(%.3g s) may fit neither speed; calibrate again when the machine is steadier",
                s.p10, s.p90, s.p90 / s.p10, steady_spread, s.median);
  return text;
}

}  // namespace syncopate::app
