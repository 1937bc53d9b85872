#pragma once
// The start-up check: every rank runs the same scenario, at the rank count it asks for.
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/mpi/mpi_communicator.hpp"

namespace syncopate::mpi {

// 64-bit FNV-1a.
uint64_t fnv1a64(std::string_view text);

// Collective. Throws UserError on every rank if the ranks were given different scenario texts,
// or if the communicator's size differs from expected_workers.
void check_same_everywhere(MpiCommunicator& comm, const std::string& scenario_text,
                           int expected_workers);

}  // namespace syncopate::mpi
