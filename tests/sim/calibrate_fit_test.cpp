// calibrate's transport fit: from synthetic ping-pong timings made with known overheads, latency,
// bandwidth and a piecewise bandwidth factor it recovers them, the simulator's tables give the
// fitted seconds, and noisy medians still give tables a platform accepts.
#include "app/calibrate_fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "backends/sim/platform/network_factors.hpp"

namespace syncopate::app {
namespace {

// The true model: sizes 8·2^k, k = 0..11, each with its bandwidth factor (the last 1).
constexpr double kSend = 1e-6, kRecv = 2e-6, kLatency = 5e-7, kBandwidth = 4e9;
const std::vector<double> kFactor = {0.5, 0.5, 0.8, 1.2, 2.0, 0.9, 1.5, 0.7, 0.4, 0.6, 1.1, 1.0};

std::vector<PingPongPoint> synthetic() {
  std::vector<PingPongPoint> points;
  double previous = 0;
  for (size_t k = 0; k < kFactor.size(); ++k) {
    const double bytes = 8.0 * std::pow(2.0, static_cast<double>(k));
    points.push_back({bytes, kSend + kRecv + kLatency + bytes / (kBandwidth * kFactor[k])});
    EXPECT_GT(points.back().seconds, previous) << "the synthetic times must ascend";
    previous = points.back().seconds;
  }
  return points;
}

TEST(CalibrateFit, RecoversKnownOverheadsLatencyBandwidthAndFactors) {
  const std::vector<PingPongPoint> points = synthetic();
  const TransportFit fit = fit_transport(points, kSend, kRecv);
  EXPECT_DOUBLE_EQ(fit.send_overhead_s, kSend);
  EXPECT_DOUBLE_EQ(fit.recv_overhead_s, kRecv);
  EXPECT_NEAR(fit.latency_s, kLatency, 1e-9 * kLatency);  // the two smallest share a factor
  EXPECT_NEAR(fit.bandwidth_Bps, kBandwidth, 1e-9 * kBandwidth);
  EXPECT_TRUE(fit.latency_factor.empty());
  ASSERT_EQ(fit.bandwidth_factor.size(), kFactor.size() - 1);
  const std::vector<double> from = {0, 23, 45, 91, 181, 362, 724, 1448, 2896, 5793, 11585};
  for (size_t i = 0; i < fit.bandwidth_factor.size(); ++i) {
    EXPECT_EQ(fit.bandwidth_factor[i].from_bytes, from[i]) << i;
    EXPECT_NEAR(fit.bandwidth_factor[i].factor, kFactor[i + 1], 1e-9) << i;
  }
  for (size_t k = 0; k < points.size(); ++k)
    EXPECT_NEAR(fitted_seconds(fit, points[k].bytes), points[k].seconds, 1e-9 * points[k].seconds)
        << points[k].bytes;
}

TEST(CalibrateFit, TheSimulatorsTablesGiveTheFittedSeconds) {
  const TransportFit fit = fit_transport(synthetic(), kSend, kRecv);
  sim::NetworkFactors factors;
  factors.send_overhead_s = fit.send_overhead_s;
  factors.recv_overhead_s = fit.recv_overhead_s;
  for (const FactorEntry& e : fit.bandwidth_factor)
    factors.bandwidth.push_back({e.from_bytes, e.factor});
  for (double bytes : {8.0, 20.0, 100.0, 5000.0, 16384.0, 1e6})
    EXPECT_NEAR(sim::message_seconds(factors, fit.latency_s, fit.bandwidth_Bps, bytes),
                fitted_seconds(fit, bytes), 1e-15)
        << bytes;
}

TEST(CalibrateFit, NoiseIsTamedIntoAcceptedTables) {
  // A median above a larger message's, a flat pair, overheads above the first size's time: the
  // times become non-decreasing, the factors stay in [1e-6, 1e6], the latency positive.
  const std::vector<PingPongPoint> points = {{8, 3e-6},   {16, 2e-6},  {32, 4e-6}, {64, 4e-6},
                                             {128, 5e-6}, {256, 9e-6}, {512, 2e-5}};
  const TransportFit fit = fit_transport(points, 5e-6, 5e-6);
  EXPECT_GT(fit.latency_s, 0);
  EXPECT_NEAR(fit.send_overhead_s + fit.recv_overhead_s + fit.latency_s, 2e-6, 1e-15);
  EXPECT_EQ(fit.points[0].seconds, 2e-6);  // lowered to the 16 B median: a flat first pair
  ASSERT_EQ(fit.bandwidth_factor.size(), points.size() - 1);
  EXPECT_EQ(fit.bandwidth_factor.front().factor, 1e6);  // 16 B took no longer than 8 B
  for (const FactorEntry& e : fit.bandwidth_factor) {
    EXPECT_GE(e.factor, 1e-6);
    EXPECT_LE(e.factor, 1e6);
  }
  EXPECT_EQ(fit.bandwidth_factor.back().factor, 1);
}

// An exchange that takes about twice the one-way time (both directions through one copy
// engine) makes the link shared; one that takes about as long, split; the median over the sizes
// measured both ways decides, sizes measured one way only are left out.
TEST(CalibrateFit, DuplexFromTheExchangeOverTheOneWayTime) {
  const std::vector<PingPongPoint> one_way = {
      {8, 1e-6}, {32768, 8e-6}, {131072, 20e-6}, {524288, 60e-6}, {2097152, 200e-6}};
  const std::vector<PingPongPoint> twice = {{32768, 17e-6}, {131072, 41e-6}, {524288, 250e-6}};
  const DuplexFit shared = fit_duplex(one_way, twice);
  EXPECT_TRUE(shared.shared);
  EXPECT_EQ(shared.sizes, 3u);
  EXPECT_NEAR(shared.ratio, 17.0 / 8.0, 1e-12);  // of 2.05, 2.125 and 4.17
  const std::vector<PingPongPoint> once = {
      {32768, 9e-6}, {131072, 22e-6}, {524288, 130e-6}, {2097152, 210e-6}};
  const DuplexFit split = fit_duplex(one_way, once);
  EXPECT_FALSE(split.shared);
  EXPECT_EQ(split.sizes, 4u);
  EXPECT_NEAR(split.ratio, 0.5 * (22.0 / 20.0 + 9.0 / 8.0), 1e-12);
  const std::vector<PingPongPoint> elsewhere = {{65536, 30e-6}};
  const DuplexFit none = fit_duplex(one_way, elsewhere);
  EXPECT_FALSE(none.shared);
  EXPECT_EQ(none.sizes, 0u);
}

// A local pass's speeds: each size's bytes over its median, from halfway (geometric mean) to the
// size before; the simulator's local_pass_seconds then gives each measured median back.
TEST(CalibrateFit, LocalPassSpeedsReproduceEachSizesMedian) {
  const std::vector<PingPongPoint> passes = {
      {1024, 80e-9}, {4096, 100e-9}, {1048576, 30e-6}, {4194304, 400e-6}};
  const std::vector<FactorEntry> speeds = fit_speeds(passes);
  ASSERT_EQ(speeds.size(), 4u);
  EXPECT_EQ(speeds[0].from_bytes, 0);
  EXPECT_EQ(speeds[1].from_bytes, 2048);
  EXPECT_EQ(speeds[2].from_bytes, 65536);
  EXPECT_EQ(speeds[3].from_bytes, 2097152);
  std::vector<sim::SizeFactor> table;
  for (const FactorEntry& e : speeds) table.push_back({e.from_bytes, e.factor});
  for (const PingPongPoint& p : passes)
    EXPECT_NEAR(sim::local_pass_seconds(table, p.bytes), p.seconds, 1e-12 * p.seconds) << p.bytes;
  // A pass too quick for the clock gets the largest speed a platform accepts.
  EXPECT_EQ(fit_speeds(std::vector<PingPongPoint>{{1024, 0}})[0].factor, 1e15);
}

TEST(CalibrateFit, ComputeSkewIsTheStepsMedianOverTheSumOfMediansWithinTheProfilesRange) {
  EXPECT_DOUBLE_EQ(compute_skew(0.5, 0.4), 1.25);
  EXPECT_DOUBLE_EQ(compute_skew(0.4, 0.4), 1.0);
  EXPECT_DOUBLE_EQ(compute_skew(10, 1), 2.0);
  EXPECT_DOUBLE_EQ(compute_skew(0.1, 1), 0.5);
  EXPECT_DOUBLE_EQ(compute_skew(0.1, 0), 1.0);
}

// worker_spread: the ranks' paces' log standard deviation over c4(n), unbiased for normal
// draws; 0 for one rank or a pace that is not positive; at most 0.5.
TEST(CalibrateFit, WorkerSpreadIsTheRanksLogSpreadUnbiased) {
  EXPECT_EQ(worker_spread(std::vector<double>{1e-3}), 0);
  EXPECT_EQ(worker_spread(std::vector<double>{1e-3, 1e-3}), 0);
  EXPECT_EQ(worker_spread(std::vector<double>{1e-3, 0}), 0);
  // Two ranks: |ln a - ln b| / sqrt(2) / c4(2), c4(2) = sqrt(2 / pi).
  const double two = std::abs(std::log(1.1)) / std::sqrt(2.0) / std::sqrt(2 / std::numbers::pi);
  EXPECT_NEAR(worker_spread(std::vector<double>{1e-3, 1.1e-3}), two, 1e-12);
  EXPECT_NEAR(worker_spread(std::vector<double>{1.1e-3, 1e-3}), two, 1e-12);
  // Four ranks: c4(4) = sqrt(2 / 3) Gamma(2) / Gamma(3 / 2) = 0.9213.
  const std::vector<double> four = {1e-3, 1.02e-3, 0.98e-3, 1.05e-3};
  double mean = 0, squares = 0;
  for (double t : four) mean += std::log(t) / 4;
  for (double t : four) squares += std::pow(std::log(t) - mean, 2);
  EXPECT_NEAR(worker_spread(four), std::sqrt(squares / 3) / 0.921318, 1e-6);
  EXPECT_EQ(worker_spread(std::vector<double>{1e-3, 1e-1}), 0.5);
}

// 100 step timings: 80 at 1 ms and 20 at `slow` ms, the slow ones at p90 and above.
std::vector<double> steps_with_a_slow_fifth(double slow) {
  std::vector<double> seconds(80, 1e-3);
  seconds.insert(seconds.end(), 20, slow * 1e-3);
  return seconds;
}

TEST(CalibrateFit, AStepSpreadWiderThanTheSteadyOneIsWarnedOf) {
  EXPECT_EQ(unsteady_step_warning({}), "");
  EXPECT_EQ(unsteady_step_warning(steps_with_a_slow_fifth(1.45)), "");
  EXPECT_EQ(unsteady_step_warning(steps_with_a_slow_fifth(kSteadyStepSpread)), "");
  const std::string warning = unsteady_step_warning(steps_with_a_slow_fifth(1.7));
  EXPECT_NE(warning.find("0.001 s at p10 and 0.0017 s at p90 (1.70x, over 1.50x)"),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("median (0.001 s)"), std::string::npos) << warning;
  // A stricter threshold (calibrate --steady-spread) warns of what the default passes.
  EXPECT_NE(unsteady_step_warning(steps_with_a_slow_fifth(1.45), 1.2).find("(1.45x, over 1.20x)"),
            std::string::npos);
  EXPECT_EQ(unsteady_step_warning(steps_with_a_slow_fifth(1.7), 2.0), "");
}

}  // namespace
}  // namespace syncopate::app
