// [[sim.faults]] on the simulator: stragglers and link degradations against closed forms, link
// and host failures aborting the job as NCCL would, at every fidelity that supports them.
#include <gtest/gtest.h>

#include "backends/sim/sim_backend.hpp"
#include "backends/sim/sim_faults.hpp"
#include "core/comm/fault_abort.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

using testing::decode;
using testing::encode;
using testing::run_in_child;

constexpr double kRouteLatency = 2e-6;  // route latency of the test platform (two links)
constexpr double kBandwidth = 1e6;      // bytes/s of every link: 1 MB takes 1 s
constexpr size_t kMegabyte = 250000;    // floats

// p GPUs, one per node: every route crosses nic_i UP and nic_j DOWN.
testing::TestPlatformSpec one_gpu_per_node(int p) {
  return {.gpus = p,
          .gpus_per_node = 1,
          .link_latency = kRouteLatency / 2,
          .intra_bandwidth = kBandwidth,
          .inter_bandwidth = kBandwidth,
          .gemm_flops = 1e12};
}

SimFault interval(FaultKind kind, double from, double until, double factor) {
  SimFault f;
  f.kind = kind;
  f.from_s = from;
  f.until_s = until;
  f.factor = factor;
  f.where = "f.toml:1";
  return f;
}

SimFault host_failure(int worker, double at, const std::string& where) {
  SimFault f;
  f.kind = FaultKind::kHostFailure;
  f.worker = worker;
  f.at_s = at;
  f.where = where;
  return f;
}

// Runs `body` on p workers (cost-only) with `faults`; returns each worker's end time, or the
// error the run ended with.
testing::ChildResult run_faults(int p, Fidelity fidelity, std::vector<SimFault> faults,
                                const WorkerMain& body) {
  return run_in_child([&] {
    const Platform platform = testing::make_test_platform(one_gpu_per_node(p));
    SimOptions options;
    options.workers = p;
    options.fidelity = fidelity;
    options.cost_only = true;
    options.faults = std::move(faults);
    std::vector<double> ends(static_cast<size_t>(p));
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      body(comm, exec);
      ends[static_cast<size_t>(comm.rank())] = exec.now();
    });
    return encode(ends);
  });
}

TEST(SimFaultTime, StretchedSecondsIntegratesTheSpeedFactor) {
  const std::vector<SpeedWindow> half{{1, 3, 0.5}};
  EXPECT_DOUBLE_EQ(stretched_seconds(0, 0.5, half), 0.5);   // ends before the window
  EXPECT_DOUBLE_EQ(stretched_seconds(0, 4, half), 5);       // 1 + 2 s for 1 s of work + 2
  EXPECT_DOUBLE_EQ(stretched_seconds(2, 0.25, half), 0.5);  // inside: twice as long
  EXPECT_DOUBLE_EQ(stretched_seconds(3, 1, half), 1);       // after it: untouched
  const std::vector<SpeedWindow> two{{1, 2, 0.25}, {3, 4, 2}};
  // 1 s full, 0.25 in [1,2), 1 full in [2,3), 2 in [3,4), then 0.75 full: 5 s of work.
  EXPECT_DOUBLE_EQ(stretched_seconds(0, 5, two), 4.75);
  EXPECT_EQ(stretched_seconds(0.1, 0.7, two), 0.7);  // exactly: no window touched
}

TEST(SimFaultTime, StragglerStretchesComputeInsideItsInterval) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow, Fidelity::kAnalytic}) {
    SimFault straggler = interval(FaultKind::kStraggler, 1, 3, 0.5);
    straggler.worker = 1;
    const testing::ChildResult result =
        run_faults(2, fidelity, {straggler}, [](Communicator&, Executor& exec) {
          for (int i = 0; i < 4; ++i) exec.compute({.flops = 1e12}, [] {});  // 4 x 1 s
        });
    const std::vector<double> ends = decode(result.output);
    ASSERT_EQ(ends.size(), 2u) << result.output;
    EXPECT_DOUBLE_EQ(ends[0], 4);
    EXPECT_DOUBLE_EQ(ends[1], 5);  // [1,3) does 1 s of work in 2 s
  }
}

TEST(SimFaultTime, StragglerDelaysTheCollectiveOfEveryWorker) {
  SimFault straggler = interval(FaultKind::kStraggler, 0, 10, 0.25);
  straggler.worker = 0;
  const testing::ChildResult result =
      run_faults(2, Fidelity::kFlow, {straggler}, [](Communicator& comm, Executor& exec) {
        exec.compute({.flops = 1e12}, [] {});  // 1 s, 4 s on worker 0
        std::vector<float> data(kMegabyte);
        comm.allreduce(data, {.algorithm = Algorithm::kRing});  // 2 rounds of 0.5 MB: 1 s
      });
  const std::vector<double> ends = decode(result.output);
  ASSERT_EQ(ends.size(), 2u) << result.output;
  EXPECT_NEAR(ends[0], 5 + 2 * kRouteLatency, 1e-9);
  EXPECT_NEAR(ends[1], 5 + 2 * kRouteLatency, 1e-9);
}

// One MB over nic0 at 1 MB/s, the bandwidth halved over [0.2, 0.6): 0.2 MB before, 0.2 MB in
// it, 0.6 MB after: 1.2 s (plus the latency).
TEST(SimFaultTime, LinkDegradationSlowsTheTransfersCrossingIt) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow}) {
    SimFault slow = interval(FaultKind::kLinkDegradation, 0.2, 0.6, 0.5);
    slow.link = "nic0";
    const testing::ChildResult result =
        run_faults(2, fidelity, {slow}, [](Communicator& comm, Executor&) {
          std::vector<float> data(2 * kMegabyte);  // each ring round: 1 MB each way
          comm.allreduce(data, {.algorithm = Algorithm::kRing});
        });
    const std::vector<double> ends = decode(result.output);
    ASSERT_EQ(ends.size(), 2u) << result.output;
    EXPECT_NEAR(ends[0], 2.2 + 2 * kRouteLatency, 1e-6) << to_string(fidelity);
    EXPECT_NEAR(ends[1], 2.2 + 2 * kRouteLatency, 1e-6) << to_string(fidelity);
  }
}

TEST(SimFaultTime, WorkerNicNamesTheLinkAndOtherRoutesAreUntouched) {
  SimFault slow = interval(FaultKind::kLinkDegradation, 0, 100, 0.1);
  slow.worker = 2;  // nic2: worker 2 takes no part below
  const testing::ChildResult result =
      run_faults(3, Fidelity::kMessage, {slow}, [](Communicator& comm, Executor&) {
        std::vector<float> data(kMegabyte);
        if (comm.rank() == 0) comm.send(data, 1);
        if (comm.rank() == 1) comm.recv(data, 0);
      });
  const std::vector<double> ends = decode(result.output);
  ASSERT_EQ(ends.size(), 3u) << result.output;
  EXPECT_NEAR(ends[1], 1 + kRouteLatency, 1e-6);
}

TEST(SimFaultTime, LinkFaultsAreRefusedAtAnalyticFidelityAndForUnknownLinks) {
  SimFault down = interval(FaultKind::kLinkFailure, 0, 1, 1);
  down.link = "nic9";
  const auto noop = [](Communicator&, Executor&) {};
  EXPECT_NE(run_faults(2, Fidelity::kFlow, {down}, noop)
                .output.find("UserError: f.toml:1.link: no link 'nic9' on platform test"),
            std::string::npos);
  down.link = "nic0";
  EXPECT_NE(run_faults(2, Fidelity::kAnalytic, {down}, noop)
                .output.find("UserError: f.toml:1: link_failure needs sim.fidelity"),
            std::string::npos);
}

// A transfer crossing a link that is off fails with SimGrid's NetworkFailureException: the job
// aborts at that instant (NCCL semantics), naming the link.
TEST(SimFaultAbort, LinkFailureAbortsACollectiveCrossingIt) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow}) {
    SimFault down = interval(FaultKind::kLinkFailure, 0.5, 0.7, 1);
    down.worker = 1;  // nic1
    const testing::ChildResult result =
        run_faults(2, fidelity, {down}, [](Communicator& comm, Executor&) {
          std::vector<float> data(2 * kMegabyte);
          comm.allreduce(data, {.algorithm = Algorithm::kRing});
        });
    EXPECT_NE(result.output.find("exception: sim: worker "), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("a communication failed at t=0.500000 s"), std::string::npos)
        << to_string(fidelity) << ": " << result.output;
    EXPECT_NE(result.output.find("links down: nic1"), std::string::npos) << result.output;
  }
}

TEST(SimFaultAbort, LinkFailureThatNoTransferCrossesCostsNothing) {
  SimFault down = interval(FaultKind::kLinkFailure, 0.5, 1.5, 1);
  down.worker = 0;
  const testing::ChildResult result =
      run_faults(2, Fidelity::kFlow, {down}, [](Communicator& comm, Executor& exec) {
        exec.compute({.flops = 2e12}, [] {});  // 2 s: the link is back when they talk
        std::vector<float> data(2 * kMegabyte);
        comm.allreduce(data, {.algorithm = Algorithm::kRing});
      });
  const std::vector<double> ends = decode(result.output);
  ASSERT_EQ(ends.size(), 2u) << result.output;
  EXPECT_NEAR(ends[0], 4 + 2 * kRouteLatency, 1e-6);
}

// The failed host's actors are killed by SimGrid; every survivor stops at the failure.
TEST(SimFaultAbort, HostFailureAbortsTheJobAtItsDateAtEveryFidelity) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow, Fidelity::kAnalytic}) {
    const SimFault crash = host_failure(2, 2.5, "f.toml:7");
    const testing::ChildResult result =
        run_faults(3, fidelity, {crash}, [](Communicator& comm, Executor& exec) {
          for (int step = 0; step < 10; ++step) {
            exec.compute({.flops = 1e12}, [] {});
            std::vector<float> data(1000);
            comm.allreduce(data, {.algorithm = Algorithm::kRing});
          }
        });
    EXPECT_NE(result.output.find("exception: sim: worker 2's host gpu2 failed at t=2.500000 s "
                                 "(f.toml:7); the job aborts, as NCCL does, losing 2.500000 s"),
              std::string::npos)
        << to_string(fidelity) << ": " << result.output;
  }
}

TEST(SimFaultAbort, FaultAbortCarriesTheRecord) {
  const testing::ChildResult result = run_in_child([] {
    const Platform platform = testing::make_test_platform(one_gpu_per_node(2));
    SimOptions options;
    options.workers = 2;
    options.cost_only = true;
    options.faults = {host_failure(0, 0.75, "f.toml:2")};
    try {
      run_on_platform(platform, options, [](Communicator& comm, Executor& exec) {
        exec.compute({.flops = 5e12}, [] {});
        comm.barrier();
      });
    } catch (const FaultAbort& e) {
      return e.record().kind + " " + std::to_string(e.record().worker) + " " +
             encode({e.record().at_s, e.record().lost_seconds()});
    }
    return std::string("completed");
  });
  EXPECT_EQ(result.output, "host_failure 0 " + encode({0.75, 0.75}));
}

}  // namespace
}  // namespace syncopate::sim
