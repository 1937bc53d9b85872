// The simulator's asynchronous reduce-scatter and allgather against closed forms on a
// single-node star (alpha-beta, ring): hidden behind longer compute, exposed beyond shorter
// compute, and serialised with each other and with allreduce_async in issue order.
#include <gtest/gtest.h>

#include "backends/sim/sim_backend.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

using testing::decode;
using testing::encode;
using testing::run_in_child;

using testing::ClosedForm;  // alpha 2e-6 s, beta 1 / (10 GB/s)

class AsyncScatterGatherTest : public ::testing::TestWithParam<Fidelity> {};

TEST_P(AsyncScatterGatherTest, OverlapsComputeAndSerialisesInIssueOrder) {
  const int p = 4;
  const size_t count = 4 * 250000;  // 4 MB
  const double n = static_cast<double>(count) * sizeof(float);
  const double half = (p - 1) * ClosedForm::kAlpha +
                      (p - 1.0) / p * n * ClosedForm::kBeta;  // one ring pass: 0.306 ms
  const testing::ChildResult result = run_in_child([&] {
    const Platform platform = testing::make_test_platform(testing::closed_form_node(p));
    SimOptions options;
    options.workers = p;
    options.fidelity = GetParam();
    options.cost_only = true;
    std::vector<float> full(count), block(count / p);  // shared: cost-only never touches them
    std::vector<double> out(4 * static_cast<size_t>(p));
    run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
      double* o = &out[4 * static_cast<size_t>(comm.rank())];
      // 1. Compute (2 ms) longer than the reduce-scatter: it hides entirely.
      double t = exec.now();
      WorkPtr work = comm.reduce_scatter_async(full, block, ReduceOp::kSum, WireFormat::kFp32);
      exec.compute({.flops = 2e9, .kind = OpKind::kGemm}, [] {});
      work->wait();
      o[0] = exec.now() - t;
      // 2. Compute (0.1 ms) shorter than the allgather: the allgather's time is what shows.
      t = exec.now();
      work = comm.allgather_async(block, full, WireFormat::kFp32);
      exec.compute({.flops = 1e8, .kind = OpKind::kGemm}, [] {});
      work->wait();
      o[1] = exec.now() - t;
      // 3. A reduce-scatter, an allgather and a ring allreduce issued back to back.
      comm.barrier();
      t = exec.now();
      WorkPtr a = comm.reduce_scatter_async(full, block, ReduceOp::kSum, WireFormat::kFp32);
      WorkPtr b = comm.allgather_async(block, full, WireFormat::kFp32);
      WorkPtr c = comm.allreduce_async(full, {.algorithm = Algorithm::kRing});
      b->wait();
      o[2] = exec.now() - t;
      c->wait();
      a->wait();
      o[3] = exec.now() - t;
    });
    return encode(out);
  });
  ASSERT_EQ(result.status, 0) << result.output;
  const std::vector<double> v = decode(result.output);
  ASSERT_EQ(v.size(), 4u * p);
  const double tol = 1e-6 * half;
  for (int r = 0; r < p; ++r) {
    const double* o = &v[4 * static_cast<size_t>(r)];
    EXPECT_NEAR(o[0], 2e-3, tol) << "rank " << r;
    EXPECT_NEAR(o[1], half, tol) << "rank " << r;
    EXPECT_NEAR(o[2], 2 * half, 2 * tol) << "rank " << r;
    EXPECT_NEAR(o[3], 4 * half, 4 * tol) << "rank " << r;  // + the allreduce: two ring passes
  }
}

INSTANTIATE_TEST_SUITE_P(Fidelities, AsyncScatterGatherTest, testing::every_fidelity(),
                         testing::FidelityName());

}  // namespace
}  // namespace syncopate::sim
