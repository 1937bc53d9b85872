// The MPI test executable: every rank runs every test; ctest starts it at 1, 2 and 4 ranks.
// Rank 0 prints gtest's usual output; other ranks print only their failed assertions. The exit
// code is the same on every rank: nonzero if any test failed on any rank.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "tests/mpi/mpi_test_env.hpp"

namespace syncopate::mpi::testing {
namespace {

std::unique_ptr<MpiCommunicator> g_world;

// On ranks other than 0: report failed assertions with the rank, stay quiet otherwise.
class FailurePrinter final : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

}  // namespace

MpiCommunicator& world() { return *g_world; }

}  // namespace syncopate::mpi::testing

int main(int argc, char** argv) {
  namespace sm = syncopate::mpi;
  sm::Runtime runtime(&argc, &argv);
  // A test that leaves ranks out of step fails within a minute instead of hanging ctest.
  if (std::getenv("SYNCOPATE_MPI_WATCHDOG_S") == nullptr) sm::Runtime::set_watchdog_seconds(60);
  ::testing::InitGoogleTest(&argc, argv);
  if (runtime.world_rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    std::unique_ptr<::testing::TestEventListener> printer(
        listeners.Release(listeners.default_result_printer()));
    listeners.Append(std::make_unique<sm::testing::FailurePrinter>(runtime.world_rank()).release());
  }
  sm::testing::g_world = sm::MpiCommunicator::world();
  const int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sm::testing::g_world.reset();
  if (runtime.world_rank() == 0 && any_failed != local_failed)
    std::fprintf(stderr, "some test failed on another rank (see [rank N] lines above)\n");
  return any_failed;
}
