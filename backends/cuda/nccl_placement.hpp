// Where an NCCL communicator's ranks run: which machine each is on, and which GPU each takes.
// Pure functions of what every rank gathers from every rank, so all reach the same verdict.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace syncopate::cuda {

// A machine's identity: a 64-bit FNV-1a hash of its host name. A rank's node() is not one:
// SYNCOPATE_MPI_RANKS_PER_NODE makes pretend nodes on one machine, whose ranks see the same GPUs.
uint64_t host_id(std::string_view host_name);
// This machine's (gethostname).
uint64_t this_host_id();

// A host id as four 16-bit quarters, each exact in a float, for the control communicator's
// float collectives; and back.
std::array<float, 4> pack_host(uint64_t id);
uint64_t unpack_host(std::span<const float, 4> quarters);

// A rank's index among the ranks of its machine, in rank order: its GPU is that index modulo
// the devices it sees (under srun --gpus-per-task each rank sees one, its own).
int index_on_host(std::span<const uint64_t> host_of_rank, int rank);

// The PCI location of the GPU a rank would use (-1s without one).
struct PciLocation {
  int domain = -1, bus = -1, device = -1;
  bool operator==(const PciLocation&) const = default;
};

// Empty when every rank has a GPU and no two ranks of one machine would take the same one; else
// why not, naming the ranks and their nodes.
std::string placement_problem(std::span<const int> node_of_rank,
                              std::span<const uint64_t> host_of_rank,
                              std::span<const PciLocation> gpus);

}  // namespace syncopate::cuda
