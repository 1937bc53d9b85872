// The start-up check: the same scenario text on every rank, and as many ranks as workers.
#include "backends/mpi/startup_check.hpp"

#include <sstream>
#include <vector>

#include "backends/mpi/deadline.hpp"
#include "backends/mpi/mpi_detail.hpp"

namespace syncopate::mpi {

uint64_t fnv1a64(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

void check_same_everywhere(MpiCommunicator& comm, const std::string& scenario_text,
                           int expected_workers) {
  const Deadline deadline("the start-up check of the scenario (MPI_Allgather)");
  const uint64_t mine = fnv1a64(scenario_text);
  std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
  SYNC_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm.handle()));
  std::ostringstream differing;
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != all[0]) differing << " " << r;
  if (!differing.str().empty()) {
    std::ostringstream message;
    message << "scenario: ranks were given different scenarios (FNV-1a 64 of the text differs "
               "from rank 0's on rank(s)"
            << differing.str() << "); every rank must read the same scenario file";
    throw UserError(message.str());
  }
  if (comm.size() != expected_workers) {
    std::ostringstream message;
    message << "scenario: workers: the scenario asks for " << expected_workers
            << " workers but MPI started " << comm.size() << " ranks; allowed: run with mpirun -np "
            << expected_workers;
    throw UserError(message.str());
  }
}

}  // namespace syncopate::mpi
