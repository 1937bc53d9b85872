// Simulated times against closed forms: allreduce algorithms (Thakur, Rabenseifner & Gropp 2005,
// alpha-beta, no reduction cost) on a single-node star of split-duplex links, compute costs,
// overlap of asynchronous allreduces with compute, stragglers, all_agree/advance and the
// exclusive merges of the global model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/sim/sim_backend.hpp"
#include "backends/sim/sim_world.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

using testing::decode;
using testing::encode;
using testing::run_in_child;

constexpr double kAlpha = testing::ClosedForm::kAlpha;  // 2e-6 s
constexpr double kBeta = testing::ClosedForm::kBeta;    // 1 / (10 GB/s)

// Seconds one allreduce of `count` floats takes on every rank (max over ranks), simulated.
double simulate_allreduce(Fidelity fidelity, Algorithm algorithm, int p, size_t count) {
  const testing::ChildResult result = run_in_child([&] {
    const Platform platform = testing::make_test_platform(testing::closed_form_node(p));
    std::vector<double> seconds(static_cast<size_t>(p));
    SimOptions options;
    options.workers = p;
    options.fidelity = fidelity;
    options.cost_only = true;
    std::vector<float> scratch(count);  // shared: cost-only never touches it
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      const double start = exec.now();
      comm.allreduce(scratch, {.algorithm = algorithm});
      seconds[static_cast<size_t>(comm.rank())] = exec.now() - start;
    });
    return encode({*std::max_element(seconds.begin(), seconds.end())});
  });
  EXPECT_EQ(result.status, 0) << result.output;
  const std::vector<double> values = decode(result.output);
  return values.empty() ? -1 : values[0];
}

struct ClosedFormCase {
  Algorithm algorithm;
  int p;
  size_t count;
};

class ClosedFormTest : public ::testing::TestWithParam<Fidelity> {};

TEST_P(ClosedFormTest, AllreduceMatchesAlphaBetaModel) {
  const std::vector<ClosedFormCase> cases{{Algorithm::kRing, 8, 8 * 1000},
                                          {Algorithm::kRing, 5, 5 * 2000},
                                          {Algorithm::kRabenseifner, 8, 8 * 1000},
                                          {Algorithm::kRecursiveDoubling, 8, 8 * 1000},
                                          {Algorithm::kBinomialTree, 8, 8 * 1000}};
  for (const ClosedFormCase& c : cases) {
    const double n = static_cast<double>(c.count) * sizeof(float);
    const double p = c.p, lg = std::log2(p);
    double expected = 0;
    switch (c.algorithm) {
      case Algorithm::kRing:
        expected = 2 * (p - 1) * kAlpha + 2 * (p - 1) / p * n * kBeta;
        break;
      case Algorithm::kRabenseifner:
        expected = 2 * lg * kAlpha + 2 * (p - 1) / p * n * kBeta;
        break;
      case Algorithm::kRecursiveDoubling:
        expected = lg * (kAlpha + n * kBeta);
        break;
      case Algorithm::kBinomialTree:
        expected = 2 * lg * (kAlpha + n * kBeta);
        break;
      default:
        FAIL();
    }
    const double simulated = simulate_allreduce(GetParam(), c.algorithm, c.p, c.count);
    EXPECT_NEAR(simulated, expected, 1e-6 * expected)
        << to_string(c.algorithm) << " p=" << c.p << " n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Fidelities, ClosedFormTest, testing::every_fidelity(),
                         testing::FidelityName());

// Compute: max(flops / speed, bytes / bandwidth) times the straggler slowdown; a step's begin
// adds the step overhead (slowed down alike); math runs in emulation only.
TEST(SimExecutorTest, ComputeTimeFollowsProfileAndSlowdown) {
  const testing::ChildResult result = run_in_child([] {
    testing::TestPlatformSpec spec = testing::closed_form_node(2);
    spec.gemm_flops = 2e12;
    spec.memory_bandwidth = 1e12;
    spec.step_overhead = 1e-4;
    const Platform platform = testing::make_test_platform(spec);
    SimOptions options;
    options.workers = 2;
    options.slowdown = {{1, 3.0}};
    std::vector<double> out(7);
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      if (comm.rank() != 1) return;
      int runs = 0;
      exec.compute({.flops = 4e9, .bytes = 1e6, .kind = OpKind::kGemm}, [&] { ++runs; });
      out[0] = exec.now();  // flop-bound: 2 ms x 3
      exec.compute({.flops = 1e6, .bytes = 4e9, .kind = OpKind::kConv}, [&] { ++runs; });
      out[1] = exec.now();  // + memory-bound: 4 ms x 3
      exec.compute({.flops = 2e9, .bytes = 0, .kind = OpKind::kOptimizer}, [&] { ++runs; });
      out[2] = exec.now();  // + 1 ms x 3, the optimizer's flops alone
      exec.begin_step();
      out[6] = exec.now();  // + 0.1 ms overhead x 3
      exec.compute({}, [&] { ++runs; });
      out[3] = exec.now();  // + nothing
      out[4] = runs;
      exec.advance(2.5);
      out[5] = exec.now();
    });
    return encode(out);
  });
  ASSERT_EQ(result.status, 0) << result.output;
  const std::vector<double> v = decode(result.output);
  ASSERT_EQ(v.size(), 7u);
  EXPECT_NEAR(v[0], 6e-3, 1e-12);
  EXPECT_NEAR(v[1], 6e-3 + 12e-3, 1e-12);
  EXPECT_NEAR(v[2], 18e-3 + 3e-3, 1e-12);
  EXPECT_NEAR(v[6], 21e-3 + 0.3e-3, 1e-12);
  EXPECT_NEAR(v[3], v[6], 1e-15);
  EXPECT_EQ(v[4], 4);
  EXPECT_NEAR(v[5], v[3] + 2.5, 1e-12);
}

// The profile's compute_skew multiplies every compute pass (a step's median over its passes'
// medians, from calibrate), not the step overhead.
TEST(SimExecutorTest, ComputeSkewScalesComputeButNotTheStepOverhead) {
  const testing::ChildResult result = run_in_child([] {
    testing::TestPlatformSpec spec = testing::closed_form_node(1);
    spec.gemm_flops = 2e12;
    spec.step_overhead = 1e-4;
    Platform platform = testing::make_test_platform(spec);
    platform.profile.compute_skew = 1.25;
    SimOptions options;
    options.workers = 1;
    std::vector<double> out(2);
    run_on_platform(platform, options, [&](Communicator&, Executor& exec) {
      exec.compute({.flops = 4e9, .bytes = 0, .kind = OpKind::kGemm}, [] {});
      out[0] = exec.now();  // 2 ms x 1.25
      exec.begin_step();
      out[1] = exec.now();  // + 0.1 ms
    });
    return encode(out);
  });
  ASSERT_EQ(result.status, 0) << result.output;
  const std::vector<double> v = decode(result.output);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NEAR(v[0], 2.5e-3, 1e-12);
  EXPECT_NEAR(v[1], 2.5e-3 + 1e-4, 1e-12);
}

// A CPU platform whose workers time-share their node's cores (Platform::cores_per_node): two
// workers on a node of one core compute at half speed each, a worker alone on its node at full
// speed, and a straggler's factor multiplies its node's. Without cores_per_node nothing changes.
TEST(SimExecutorTest, WorkersBeyondANodesCoresTimeShareThem) {
  const auto compute_times = [](int cores_per_node) {
    const testing::ChildResult result = run_in_child([&] {
      testing::TestPlatformSpec spec = testing::closed_form_node(4);
      spec.gpus_per_node = 2;  // nodes {0, 1} and {2, 3}
      spec.gemm_flops = 2e12;
      Platform platform = testing::make_test_platform(spec);
      platform.cores_per_node = cores_per_node;
      SimOptions options;
      options.workers = 3;  // two on node 0, one on node 1
      options.slowdown = {{2, 3.0}};
      std::vector<double> out(3);
      run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
        exec.compute({.flops = 4e9, .bytes = 0, .kind = OpKind::kGemm}, [] {});  // 2 ms
        out[static_cast<size_t>(comm.rank())] = exec.now();
      });
      return encode(out);
    });
    EXPECT_EQ(result.status, 0) << result.output;
    return decode(result.output);
  };
  const std::vector<double> shared = compute_times(1);
  ASSERT_EQ(shared.size(), 3u);
  EXPECT_NEAR(shared[0], 4e-3, 1e-12);
  EXPECT_NEAR(shared[1], 4e-3, 1e-12);
  EXPECT_NEAR(shared[2], 6e-3, 1e-12);  // alone on its node; a straggler (x3)
  const std::vector<double> enough = compute_times(2);
  ASSERT_EQ(enough.size(), 3u);
  EXPECT_NEAR(enough[0], 2e-3, 1e-12);
  EXPECT_NEAR(enough[2], 6e-3, 1e-12);
  EXPECT_EQ(compute_times(0), enough);
}

// Unequal workers (HostProfile::worker_spread): W workers get the time factors exp(spread x z),
// z Blom's normal scores ((i - 3/8) / (W + 1/4) quantiles), in an order the seed draws. One
// worker or no spread: all 1.
TEST(WorkerSpeedFactors, AreTheNormalScoresOfTheWorkersDealtByTheSeed) {
  EXPECT_EQ(worker_speed_factors(1, 0.1, 1), std::vector<double>{1.0});
  EXPECT_EQ(worker_speed_factors(4, 0.0, 1), std::vector<double>(4, 1.0));
  std::vector<double> two = worker_speed_factors(2, 0.1, 1);
  std::ranges::sort(two);
  // Phi^-1(0.625 / 2.25) = -0.5895: the expected maximum of two normal draws is 0.5642.
  EXPECT_NEAR(std::log(two[0]), -0.1 * 0.58946, 1e-5);
  EXPECT_NEAR(std::log(two[1]), 0.1 * 0.58946, 1e-5);
  const std::vector<double> eight = worker_speed_factors(8, 0.05, 1);
  double log_sum = 0;
  for (double f : eight) log_sum += std::log(f);
  EXPECT_NEAR(log_sum, 0, 1e-12);  // symmetric scores
  std::vector<double> sorted = eight;
  std::ranges::sort(sorted);
  // Phi^-1((8 - 3/8) / 8.25) = 1.4342: the expected maximum of eight normal draws is 1.4236.
  EXPECT_NEAR(std::log(sorted.back()), 0.05 * 1.43420, 1e-5);
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_LT(sorted[i - 1], sorted[i]);
  EXPECT_EQ(worker_speed_factors(8, 0.05, 1), eight);  // deterministic
  EXPECT_NE(worker_speed_factors(8, 0.05, 2), eight);  // another seed deals them otherwise
  std::vector<double> other = worker_speed_factors(8, 0.05, 2);
  std::ranges::sort(other);
  EXPECT_EQ(other, sorted);
}

// The factors multiply each worker's compute: on a profile with worker_spread, two workers that
// compute the same work end it at times whose ratio is exp(2 x spread x 0.5895).
TEST(SimExecutorTest, AProfilesWorkerSpreadMakesWorkersUnequal) {
  const testing::ChildResult result = run_in_child([] {
    testing::TestPlatformSpec spec = testing::closed_form_node(2);
    spec.gemm_flops = 2e12;
    Platform platform = testing::make_test_platform(spec);
    platform.profile.worker_spread = 0.1;
    SimOptions options;
    options.workers = 2;
    std::vector<double> out(2);
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      exec.compute({.flops = 4e9, .bytes = 0, .kind = OpKind::kGemm}, [] {});  // 2 ms
      out[static_cast<size_t>(comm.rank())] = exec.now();
    });
    return encode(out);
  });
  ASSERT_EQ(result.status, 0) << result.output;
  const std::vector<double> v = decode(result.output);
  ASSERT_EQ(v.size(), 2u);
  const std::vector<double> factors = worker_speed_factors(2, 0.1, SimOptions{}.noise.seed);
  EXPECT_NEAR(v[0], 2e-3 * factors[0], 1e-12);
  EXPECT_NEAR(v[1], 2e-3 * factors[1], 1e-12);
  EXPECT_NEAR(std::max(v[0], v[1]) / std::min(v[0], v[1]), std::exp(0.2 * 0.58946), 1e-5);
}

// An asynchronous allreduce overlaps compute: it ends at max(compute, comm); a second one
// issued right after the first starts when the first ends (one stream per communicator); a
// straggler delays everyone's collective.
class OverlapTest : public ::testing::TestWithParam<Fidelity> {};

TEST_P(OverlapTest, AsyncAllreduceOverlapsComputeAndSerialises) {
  const int p = 4;
  const size_t count = 4 * 250000;  // 4 MB
  const double n = static_cast<double>(count) * sizeof(float);
  const double ring = 2 * (p - 1) * kAlpha + 2.0 * (p - 1) / p * n * kBeta;  // 0.612 ms
  const testing::ChildResult result = run_in_child([&] {
    const Platform platform = testing::make_test_platform(testing::closed_form_node(p));
    SimOptions options;
    options.workers = p;
    options.fidelity = GetParam();
    options.cost_only = true;
    options.slowdown = {{2, 2.0}};
    std::vector<float> scratch(count);
    std::vector<double> out(5 * static_cast<size_t>(p));
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      double* o = &out[5 * static_cast<size_t>(comm.rank())];
      const CollectiveOptions ring_options{.algorithm = Algorithm::kRing};
      // 1. Comm longer than compute (0.2 ms; the straggler 0.4 ms).
      WorkPtr work = comm.allreduce_async(scratch, ring_options);
      exec.compute({.flops = 2e8, .kind = OpKind::kGemm}, [] {});
      work->wait();
      o[0] = exec.now();
      // 2. Compute longer than comm (2 ms; the straggler 4 ms).
      double t = exec.now();
      work = comm.allreduce_async(scratch, ring_options);
      exec.compute({.flops = 2e9, .kind = OpKind::kGemm}, [] {});
      work->wait();
      o[1] = exec.now() - t;
      // 3. Two in flight back to back, everyone issuing at the same time.
      comm.barrier();
      t = exec.now();
      WorkPtr a = comm.allreduce_async(scratch, ring_options);
      WorkPtr b = comm.allreduce_async(scratch, ring_options);
      a->wait();
      o[2] = exec.now() - t;
      b->wait();
      o[3] = exec.now() - t;
      // 4. The straggler arrives 4 ms late.
      comm.barrier();
      t = exec.now();
      if (comm.rank() == 2) exec.compute({.flops = 2e9, .kind = OpKind::kGemm}, [] {});
      comm.allreduce(scratch, ring_options);
      o[4] = exec.now() - t;
    });
    return encode(out);
  });
  ASSERT_EQ(result.status, 0) << result.output;
  const std::vector<double> v = decode(result.output);
  ASSERT_EQ(v.size(), 5u * p);
  const double tol = 1e-6 * ring;
  for (int r = 0; r < p; ++r) {
    const double* o = &v[5 * static_cast<size_t>(r)];
    EXPECT_NEAR(o[0], ring, tol) << "rank " << r;
    EXPECT_NEAR(o[1], r == 2 ? 4e-3 : 2e-3, tol) << "rank " << r;
    EXPECT_NEAR(o[2], ring, tol) << "rank " << r;
    EXPECT_NEAR(o[3], 2 * ring, 2 * tol) << "rank " << r;
    if (GetParam() == Fidelity::kMessage) {
      // Messages between early ranks may already flow before the straggler arrives.
      EXPECT_GE(o[4], 4e-3) << "rank " << r;
      EXPECT_LE(o[4], 4e-3 + ring + tol) << "rank " << r;
    } else {
      EXPECT_NEAR(o[4], 4e-3 + ring, tol) << "rank " << r;  // starts when the last arrives
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fidelities, OverlapTest, testing::every_fidelity(),
                         testing::FidelityName());

// all_agree takes no simulated time: each worker's clock reads what it read before.
TEST(SimExecutorTest, AllAgreeIsZeroTimeConsensus) {
  const testing::ChildResult result = run_in_child([] {
    const Platform platform = testing::make_test_platform(testing::closed_form_node(3));
    SimOptions options;
    options.workers = 3;
    std::vector<double> out(9);
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      const size_t r = static_cast<size_t>(comm.rank());
      exec.compute({.flops = 1e9 * static_cast<double>(r + 1), .kind = OpKind::kGemm}, [] {});
      const double before = exec.now();
      const bool yes = exec.all_agree(true);
      const bool no = exec.all_agree(r != 1);
      out[3 * r] = exec.now() - before;
      out[3 * r + 1] = yes ? 1 : 0;
      out[3 * r + 2] = no ? 1 : 0;
    });
    return encode(out);
  });
  ASSERT_EQ(result.status, 0) << result.output;
  const std::vector<double> v = decode(result.output);
  ASSERT_EQ(v.size(), 9u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(v[3 * r], 0.0) << "rank " << r;
    EXPECT_EQ(v[3 * r + 1], 1.0) << "rank " << r;
    EXPECT_EQ(v[3 * r + 2], 0.0) << "rank " << r;
  }
}

// Merges run one at a time: three workers merging at t=0 finish at 1, 2 and 3 units, where a
// unit is two transfers to the master and back plus the merge compute.
TEST(SimCommunicatorTest, MergesAreExclusiveInArrivalOrder) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kAnalytic}) {
    const size_t count = 1000000;
    const double bytes = 4.0 * count;
    const double unit = 2 * (kAlpha + bytes * kBeta) + 12.0 * count / 1e12;  // + merge compute
    const testing::ChildResult result = run_in_child([&] {
      const Platform platform = testing::make_test_platform(testing::closed_form_node(3));
      SimOptions options;
      options.workers = 3;
      options.fidelity = fidelity;
      std::vector<double> out(3);
      run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
        std::vector<float> model(count, 1.0f);
        const std::unique_ptr<SharedModel> global =
            comm.create_shared_model(model, GlobalModelPlacement::kMaster);
        const double start = exec.now();
        global->merge(model, {});
        out[static_cast<size_t>(comm.rank())] = exec.now() - start;
      });
      std::sort(out.begin(), out.end());
      return encode(out);
    });
    ASSERT_EQ(result.status, 0) << result.output;
    const std::vector<double> v = decode(result.output);
    ASSERT_EQ(v.size(), 3u);
    for (size_t k = 0; k < 3; ++k)
      EXPECT_NEAR(v[k], static_cast<double>(k + 1) * unit, 1e-6 * unit)
          << to_string(fidelity) << " merge " << k;
  }
}

}  // namespace
}  // namespace syncopate::sim
