#pragma once
// Shared state of the MPI test executable (one process per rank, see main.cpp).
#include <cstdint>
#include <vector>

#include "backends/mpi/deadline.hpp"
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_executor.hpp"
#include "backends/mpi/runtime.hpp"
#include "backends/mpi/startup_check.hpp"
#include "core/base/rng.hpp"

namespace syncopate::mpi::testing {

// The world communicator, created once by main() for all tests.
MpiCommunicator& world();

// Rank `rank`'s input for a collective: n floats, uniform in [-1, 1) with full mantissas, so
// that a different order of additions gives a different rounding. Any rank can compute any
// rank's input.
inline std::vector<float> input_of(int rank, size_t n, uint32_t salt) {
  Rng rng(RngKey{.seed = 2024,
                 .worker = static_cast<uint32_t>(rank),
                 .epoch = salt,
                 .purpose = RngPurpose::kSynthetic});
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

}  // namespace syncopate::mpi::testing
