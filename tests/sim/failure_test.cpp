// Failures: simulated deadlocks are reported with every blocked worker and what it waits on;
// a worker's exception ends the simulation and is rethrown; misuse is a UserError.
#include <gtest/gtest.h>

#include "backends/sim/sim_backend.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

using testing::run_in_child;

testing::ChildResult run_workers(int p, Fidelity fidelity, const WorkerMain& worker_main) {
  return run_in_child([&] {
    const Platform platform = testing::make_test_platform({.gpus = p, .gpus_per_node = 2});
    SimOptions options;
    options.workers = p;
    options.fidelity = fidelity;
    run_on_platform(platform, options, worker_main);
    return std::string("completed");
  });
}

TEST(SimFailureTest, RecvFromSilentPeerIsReportedAsDeadlock) {
  const testing::ChildResult result =
      run_workers(2, Fidelity::kMessage, [](Communicator& comm, Executor&) {
        std::vector<float> data(10);
        if (comm.rank() == 0) comm.recv(data, 1);  // worker 1 never sends
      });
  EXPECT_EQ(result.status, 0);
  EXPECT_NE(result.output.find("SimDeadlock"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("worker 0 (gpu0): recv of 10 floats, peer rank 1"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("worker 1"), std::string::npos) << result.output;  // it finished
}

TEST(SimFailureTest, MissingCollectiveMemberIsReportedAtEveryFidelity) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow, Fidelity::kAnalytic}) {
    const testing::ChildResult result = run_workers(3, fidelity, [](Communicator& comm, Executor&) {
      std::vector<float> data(100, 1.0f);
      comm.allreduce(data, {.algorithm = Algorithm::kRing});
      if (comm.rank() != 2) comm.allreduce(data, {.algorithm = Algorithm::kRing});
    });
    EXPECT_EQ(result.status, 0) << to_string(fidelity);
    EXPECT_NE(result.output.find("SimDeadlock"), std::string::npos) << result.output;
    for (const char* blocked : {"worker 0 (gpu0): allreduce #2 of 100 floats",
                                "worker 1 (gpu1): allreduce #2 of 100 floats"})
      EXPECT_NE(result.output.find(blocked), std::string::npos)
          << to_string(fidelity) << ": " << result.output;
    EXPECT_EQ(result.output.find("worker 2 ("), std::string::npos) << result.output;
    if (fidelity != Fidelity::kMessage) {
      EXPECT_NE(result.output.find("not yet called by worker(s) 2"), std::string::npos)
          << result.output;
    }
  }
}

TEST(SimFailureTest, WorkerExceptionIsRethrownAndOthersAreKilled) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow}) {
    const testing::ChildResult result =
        run_workers(4, fidelity, [](Communicator& comm, Executor& exec) {
          exec.compute({.flops = 1e9}, [] {});
          if (comm.rank() == 1) throw UserError("boom at worker 1");
          std::vector<float> data(1000, 1.0f);
          WorkPtr pending = comm.allreduce_async(data, {});  // never completes: worker 1 is gone
          comm.barrier();
        });
    EXPECT_EQ(result.status, 0) << to_string(fidelity);
    EXPECT_EQ(result.output, "UserError: boom at worker 1") << to_string(fidelity);
  }
}

TEST(SimFailureTest, MismatchedCollectivesAreUserErrors) {
  const testing::ChildResult result =
      run_workers(2, Fidelity::kFlow, [](Communicator& comm, Executor&) {
        std::vector<float> data(comm.rank() == 0 ? 10 : 12);
        comm.allreduce(data);
      });
  EXPECT_EQ(result.status, 0);
  EXPECT_NE(result.output.find("UserError: sim: collective #1"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("same collectives in the same order"), std::string::npos)
      << result.output;
}

TEST(SimFailureTest, MisuseIsUserError) {
  const testing::ChildResult too_many = run_in_child([] {
    const Platform platform = testing::make_test_platform({.gpus = 2});
    SimOptions options;
    options.workers = 3;
    run_on_platform(platform, options, [](Communicator&, Executor&) {});
    return std::string("completed");
  });
  EXPECT_NE(too_many.output.find("UserError: sim: workers: 3 but platform 'test' has 2 GPUs"),
            std::string::npos)
      << too_many.output;

  const testing::ChildResult twice = run_in_child([] {
    const Platform platform = testing::make_test_platform({.gpus = 2});
    SimOptions options;
    options.workers = 2;
    run_on_platform(platform, options, [](Communicator&, Executor&) {});
    run_on_platform(platform, options, [](Communicator&, Executor&) {});
    return std::string("completed");
  });
  EXPECT_NE(twice.output.find("UserError: sim: a simulation already ran in this process"),
            std::string::npos)
      << twice.output;

  const testing::ChildResult bad_peer =
      run_workers(2, Fidelity::kMessage, [](Communicator& comm, Executor&) {
        std::vector<float> data(3);
        if (comm.rank() == 0) comm.send(data, 0);
      });
  EXPECT_NE(bad_peer.output.find("UserError: sim: send: peer 0 from rank 0"), std::string::npos)
      << bad_peer.output;
}

}  // namespace
}  // namespace syncopate::sim

namespace syncopate::sim {
namespace {

TEST(SimBackendTest, FidelityNamesRoundTrip) {
  for (Fidelity f : {Fidelity::kMessage, Fidelity::kFlow, Fidelity::kAnalytic})
    EXPECT_EQ(parse_fidelity(to_string(f)), f);
  EXPECT_EQ(parse_fidelity("flow"), Fidelity::kFlow);
  EXPECT_EQ(parse_fidelity("Flow"), std::nullopt);
  EXPECT_EQ(parse_fidelity(""), std::nullopt);
}

}  // namespace
}  // namespace syncopate::sim
