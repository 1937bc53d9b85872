// Where an NCCL communicator's ranks run (see the header).
#include "backends/cuda/nccl_placement.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <sstream>

#include "core/base/check.hpp"

namespace syncopate::cuda {

uint64_t host_id(std::string_view host_name) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (const char c : host_name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

uint64_t this_host_id() {
  char name[HOST_NAME_MAX + 1] = {};
  SYNC_CHECK(gethostname(name, sizeof name - 1) == 0, "gethostname failed");
  return host_id(name);
}

std::array<float, 4> pack_host(uint64_t id) {
  std::array<float, 4> quarters{};
  for (size_t i = 0; i < quarters.size(); ++i)
    quarters[i] = static_cast<float>((id >> (16 * i)) & 0xffffu);
  return quarters;
}

uint64_t unpack_host(std::span<const float, 4> quarters) {
  uint64_t id = 0;
  for (size_t i = 0; i < quarters.size(); ++i) id |= static_cast<uint64_t>(quarters[i]) << (16 * i);
  return id;
}

int index_on_host(std::span<const uint64_t> host_of_rank, int rank) {
  SYNC_CHECK(rank >= 0 && static_cast<size_t>(rank) < host_of_rank.size(),
             "rank " << rank << " of " << host_of_rank.size());
  const uint64_t mine = host_of_rank[static_cast<size_t>(rank)];
  return static_cast<int>(std::count(host_of_rank.begin(), host_of_rank.begin() + rank, mine));
}

std::string placement_problem(std::span<const int> node_of_rank,
                              std::span<const uint64_t> host_of_rank,
                              std::span<const PciLocation> gpus) {
  SYNC_CHECK(node_of_rank.size() == gpus.size() && host_of_rank.size() == gpus.size(),
             "placement of " << gpus.size() << " ranks");
  std::ostringstream problem;
  for (size_t a = 0; a < gpus.size(); ++a) {
    const int node = node_of_rank[a];
    if (gpus[a].domain < 0) {
      const auto on_node = std::count(node_of_rank.begin(), node_of_rank.end(), node);
      problem << "rank " << a << " (node " << node << ", which runs " << on_node
              << " ranks) sees no CUDA device";
      return problem.str();
    }
    for (size_t b = a + 1; b < gpus.size(); ++b) {
      if (host_of_rank[b] != host_of_rank[a] || gpus[b] != gpus[a]) continue;
      problem << "ranks " << a << " and " << b;
      if (node_of_rank[b] == node)
        problem << " on node " << node;
      else  // pretend nodes (SYNCOPATE_MPI_RANKS_PER_NODE) on one machine
        problem << " (nodes " << node << " and " << node_of_rank[b] << ", on one machine)";
      problem << " would share the GPU at PCI " << std::hex << gpus[a].domain << ":" << gpus[a].bus
              << ":" << gpus[a].device << " (more ranks on the machine than GPUs they can see)";
      return problem.str();
    }
  }
  return "";
}

}  // namespace syncopate::cuda
