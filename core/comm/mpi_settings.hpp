#pragma once
// The MPI settings that change a run's communication times, by the names that every record of
// them uses: a run on MPI records what it ran under (summary.json backend_stats.<name>, 1 or 0),
// `syncopate calibrate` what it measured under (the platform's [calibrated_under] table), a
// simulated run its platform's (backend_stats.calibrated_<name>), and `syncopate compare` checks
// a prediction's against a measured run's.
#include <array>
#include <string_view>

namespace syncopate::mpi_settings {

// Open MPI's shared-memory transport moves a large message by a single copy (CMA) rather than
// through shared-memory fragments (btl_vader_single_copy_mechanism).
inline constexpr std::string_view kSingleCopy = "shared_memory_single_copy";
// A rank waiting for a message yields its core (mpi_yield_when_idle) rather than spinning.
inline constexpr std::string_view kYieldWhenIdle = "mpi_yield_when_idle";
inline constexpr std::array<std::string_view, 2> kAll = {kSingleCopy, kYieldWhenIdle};
// A simulated run's record of its platform's setting: kCalibrated + the name.
inline constexpr std::string_view kCalibrated = "calibrated_";

}  // namespace syncopate::mpi_settings
