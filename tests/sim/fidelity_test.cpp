// The coarse fidelities against message fidelity on a two-level platform (4 GPUs per node, fast
// intra-node links, one NIC per GPU), and determinism: the same run twice gives the same times
// and bits, and the three fidelities give the same bits (they run the same schedules).
#include <gtest/gtest.h>

#include <cstring>

#include "backends/sim/sim_backend.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

using testing::decode;
using testing::encode;
using testing::run_in_child;

testing::TestPlatformSpec two_level(int p) {
  return {.gpus = p,
          .gpus_per_node = 4,
          .link_latency = 2e-6,
          .intra_bandwidth = 100e9,
          .inter_bandwidth = 12.5e9};
}

double allreduce_seconds(Fidelity fidelity, Algorithm algorithm, int p, size_t count) {
  const testing::ChildResult result = run_in_child([&] {
    const Platform platform = testing::make_test_platform(two_level(p));
    SimOptions options;
    options.workers = p;
    options.fidelity = fidelity;
    options.cost_only = true;
    std::vector<float> scratch(count);
    double end = 0;
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      comm.allreduce(scratch, {.algorithm = algorithm});
      end = std::max(end, exec.now());
    });
    return encode({end});
  });
  EXPECT_EQ(result.status, 0) << result.output;
  const std::vector<double> v = decode(result.output);
  return v.empty() ? -1 : v[0];
}

TEST(FidelityTest, FlowAndAnalyticAgreeWithMessageOnAllreduce) {
  for (int p : {12, 16})
    for (Algorithm algorithm :
         {Algorithm::kRing, Algorithm::kRabenseifner, Algorithm::kRecursiveDoubling,
          Algorithm::kBinomialTree, Algorithm::kHierarchical, Algorithm::kMaster}) {
      const size_t count = 1000003;
      const double message = allreduce_seconds(Fidelity::kMessage, algorithm, p, count);
      ASSERT_GT(message, 0);
      EXPECT_NEAR(allreduce_seconds(Fidelity::kFlow, algorithm, p, count), message, 0.02 * message)
          << "flow " << to_string(algorithm) << " p=" << p;
      EXPECT_NEAR(allreduce_seconds(Fidelity::kAnalytic, algorithm, p, count), message,
                  0.02 * message)
          << "analytic " << to_string(algorithm) << " p=" << p;
    }
}

// The same through run_simulation on the mn5-acc recipe (8 nodes of 4 GPUs on the fat tree).
TEST(FidelityTest, AgreementOnMareNostrum5Recipe) {
  const int p = 32;
  for (Algorithm algorithm :
       {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRabenseifner, Algorithm::kBinomialTree}) {
    std::vector<double> seconds;
    for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow, Fidelity::kAnalytic}) {
      const testing::ChildResult result = run_in_child([&] {
        SimOptions options;
        options.platform = "mn5-acc";
        options.platform_overrides = {{"nodes", "8"}};
        options.workers = p;
        options.fidelity = fidelity;
        options.cost_only = true;
        std::vector<float> scratch(6'553'600);  // a 25 MiB bucket
        double end = 0;
        run_simulation(options, [&](Communicator& comm, Executor& exec) {
          comm.allreduce(scratch, {.algorithm = algorithm});
          end = std::max(end, exec.now());
        });
        return encode({end});
      });
      ASSERT_EQ(result.status, 0) << result.error;
      seconds.push_back(decode(result.output).at(0));
    }
    EXPECT_GT(seconds[0], 6'553'600 * 4 / 25e9 / 4) << to_string(algorithm);  // >= n/4 on a NIC
    EXPECT_NEAR(seconds[1], seconds[0], 0.02 * seconds[0]) << "flow " << to_string(algorithm);
    EXPECT_NEAR(seconds[2], seconds[0], 0.02 * seconds[0]) << "analytic " << to_string(algorithm);
  }
}

// A DDP-like loop: backward fills 4 buckets, each allreduced asynchronously as soon as it is
// full, all waited before the optimizer; one worker is a straggler. Returns the end time and,
// in emulation, a checksum of the final buffers' bits (plus each rank's own data bits).
std::string ddp_run(Fidelity fidelity, bool emulate) {
  const int p = 8;
  const Platform platform = testing::make_test_platform(two_level(p));
  SimOptions options;
  options.workers = p;
  options.fidelity = fidelity;
  options.cost_only = !emulate;
  options.slowdown = {{5, 1.4}};
  const size_t bucket = emulate ? 10007 : 2'000'000;
  std::vector<double> out(static_cast<size_t>(p) + 1);
  run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
    std::vector<std::vector<float>> buckets(4, std::vector<float>(bucket));
    for (int step = 0; step < 3; ++step) {
      exec.compute({.flops = 2e8, .kind = OpKind::kConv}, [] {});
      std::vector<WorkPtr> works;
      for (size_t b = 0; b < buckets.size(); ++b) {
        exec.compute({.flops = 1e8, .kind = OpKind::kGemm}, [&] {
          for (size_t i = 0; i < bucket; ++i)
            buckets[b][i] = static_cast<float>(comm.rank() + 1) / static_cast<float>(i + 3 + b) +
                            static_cast<float>(step) * 0.1f;
        });
        works.push_back(comm.allreduce_async(buckets[b], {.op = ReduceOp::kAvg}));
      }
      for (auto& work : works) work->wait();
      exec.compute({.flops = 1e7, .kind = OpKind::kOptimizer}, [] {});
    }
    uint64_t hash = 1469598103934665603ull;  // FNV-1a of the bits of every bucket
    for (const auto& b : buckets)
      for (float x : b) {
        uint32_t bits = 0;
        std::memcpy(&bits, &x, sizeof bits);
        hash = (hash ^ bits) * 1099511628211ull;
      }
    out[static_cast<size_t>(comm.rank())] = static_cast<double>(hash % (1ull << 52));
    out[static_cast<size_t>(p)] = std::max(out[static_cast<size_t>(p)], exec.now());
  });
  return encode(out);
}

TEST(FidelityTest, DdpLoopWithStragglerAgreesAcrossFidelities) {
  std::vector<double> ends;
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow, Fidelity::kAnalytic}) {
    const testing::ChildResult result = run_in_child([&] { return ddp_run(fidelity, false); });
    ASSERT_EQ(result.status, 0) << result.output;
    ends.push_back(decode(result.output).back());
  }
  EXPECT_GT(ends[0], 3 * 5e-4);  // at least the compute of 3 steps
  EXPECT_NEAR(ends[1], ends[0], 0.02 * ends[0]) << "flow";
  EXPECT_NEAR(ends[2], ends[0], 0.02 * ends[0]) << "analytic";
}

TEST(FidelityTest, DeterministicAndSameBitsAtEveryFidelity) {
  std::vector<std::vector<double>> runs;
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kMessage, Fidelity::kFlow,
                            Fidelity::kFlow, Fidelity::kAnalytic}) {
    const testing::ChildResult result = run_in_child([&] { return ddp_run(fidelity, true); });
    ASSERT_EQ(result.status, 0) << result.output;
    runs.push_back(decode(result.output));
    ASSERT_EQ(runs.back().size(), 9u);
  }
  EXPECT_EQ(runs[0], runs[1]) << "message twice";  // times and bits
  EXPECT_EQ(runs[2], runs[3]) << "flow twice";
  for (size_t r = 0; r < 8; ++r) {
    EXPECT_EQ(runs[0][r], runs[0][0]) << "rank " << r << " bits differ from rank 0";
    EXPECT_EQ(runs[2][r], runs[0][r]) << "flow bits, rank " << r;
    EXPECT_EQ(runs[4][r], runs[0][r]) << "analytic bits, rank " << r;
  }
}

}  // namespace
}  // namespace syncopate::sim
