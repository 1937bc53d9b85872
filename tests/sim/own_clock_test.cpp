// Analytic cost-only collectives with per-step compute noise run on the workers' own clocks
// (SimWorld::collectives_on_own_clocks): the same dates, up to rounding, as when every member
// sleeps to its date first; deterministic for a noise seed; and almost no SimGrid activity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "backends/sim/sim_backend.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

using testing::encode;
using testing::run_in_child;

constexpr int kWorkers = 8;
constexpr int kSteps = 40;

// A ddp-like step: forward, then backward in three pieces, each followed by its bucket's
// allreduce; the buckets are waited for, then the optimizer ends the step (and its noise).
void ddp_steps(Communicator& comm, Executor& exec, std::vector<double>& dates) {
  std::vector<float> small(1000), medium(50000), large(400000);
  for (int step = 0; step < kSteps; ++step) {
    exec.compute({.flops = 3e9, .kind = OpKind::kGemm}, [] {});
    std::vector<WorkPtr> buckets;
    for (std::vector<float>* bucket : {&large, &medium, &small}) {
      exec.compute({.flops = 2e9, .kind = OpKind::kGemm}, [] {});
      buckets.push_back(comm.allreduce_async(*bucket, {}));
    }
    for (WorkPtr& bucket : buckets) {
      bucket->wait();
      dates.push_back(bucket->completion().elapsed_s);
    }
    exec.compute({.flops = 1e8, .kind = OpKind::kOptimizer}, [] {});
    dates.push_back(exec.now());
  }
  comm.barrier();
  dates.push_back(exec.now());
}

// Every worker's dates and collective durations, then the run's SimGrid activities.
std::string run(uint64_t noise_seed, std::vector<SimFault> faults) {
  const testing::ChildResult result = run_in_child([&] {
    const Platform platform = testing::make_test_platform(
        {.gpus = kWorkers, .gpus_per_node = 2, .inter_bandwidth = 5e9, .gemm_flops = 1e12});
    SimOptions options;
    options.workers = kWorkers;
    options.fidelity = Fidelity::kAnalytic;
    options.cost_only = true;
    options.noise = {.kind = NoiseKind::kLognormal, .sigma = 0.2, .seed = noise_seed};
    options.faults = std::move(faults);
    std::vector<std::vector<double>> dates(kWorkers);
    const SimStats stats = run_on_platform(platform, options, [&](Communicator& c, Executor& e) {
      ddp_steps(c, e, dates[static_cast<size_t>(c.rank())]);
    });
    std::string out;
    for (const std::vector<double>& d : dates) out += encode(d) + "\n";
    return out + "activities " + std::to_string(stats.activities) + "\n";
  });
  EXPECT_EQ(result.status, 0) << result.error;
  return result.output;
}

std::string dates_of(const std::string& output) { return output.substr(0, output.rfind("act")); }

// The largest relative difference between two runs' dates (they must hold as many).
double largest_difference(const std::string& a, const std::string& b) {
  std::istringstream x(dates_of(a)), y(dates_of(b));
  std::string u, v;
  double largest = 0;
  size_t n = 0;
  while (x >> u) {
    EXPECT_TRUE(y >> v);
    const double p = std::strtod(u.c_str(), nullptr), q = std::strtod(v.c_str(), nullptr);
    largest = std::max(largest, std::abs(p - q) / std::max(std::abs(p), 1e-300));
    ++n;
  }
  EXPECT_FALSE(y >> v);
  EXPECT_EQ(n, static_cast<size_t>(kWorkers * (4 * kSteps + 1)));
  return largest;
}
uint64_t activities_of(const std::string& output) {
  return std::stoull(output.substr(output.rfind(' ') + 1));
}

// A host failure far beyond the run's end changes nothing but makes the members sleep to their
// dates (a host failure acts at an engine date).
SimFault failure_after_the_end() {
  SimFault f;
  f.kind = FaultKind::kHostFailure;
  f.worker = 0;
  f.at_s = 1e6;
  f.where = "t.toml:1";
  return f;
}

TEST(OwnClocks, SameDatesAsSleepingEveryMemberToItsDate) {
  const std::string own = run(1, {}), slept = run(1, {failure_after_the_end()});
  EXPECT_LT(largest_difference(own, slept), 1e-11);
  // Sleeping: at least one sleep per worker and step; own clocks: one per worker at its end.
  EXPECT_GE(activities_of(slept), static_cast<uint64_t>(kWorkers * kSteps));
  EXPECT_LE(activities_of(own), static_cast<uint64_t>(kWorkers));
}

TEST(OwnClocks, StragglersKeepOwnClocksAndTheSameDates) {
  SimFault straggler;
  straggler.kind = FaultKind::kStraggler;
  straggler.worker = 3;
  straggler.from_s = 0.05;
  straggler.until_s = 0.2;
  straggler.factor = 0.5;
  straggler.where = "t.toml:2";
  const std::string own = run(1, {straggler});
  const std::string slept = run(1, {straggler, failure_after_the_end()});
  EXPECT_LT(largest_difference(own, slept), 1e-11);
  EXPECT_GT(largest_difference(own, run(1, {})), 1e-3);  // the straggler slows worker 3 down
  EXPECT_LE(activities_of(own), static_cast<uint64_t>(kWorkers));
}

TEST(OwnClocks, NoiseIsDeterministicForItsSeed) {
  const std::string a = run(5, {});
  EXPECT_EQ(a, run(5, {}));
  EXPECT_NE(dates_of(a), dates_of(run(6, {})));
}

}  // namespace
}  // namespace syncopate::sim
