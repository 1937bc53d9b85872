#pragma once
// `syncopate collectives`: allreduce, broadcast and allgather over a range of sizes, timed with
// the communicator that training uses, on the simulator (predicted) or under mpirun (measured).
// The same timing loop runs on both backends, so the two CSV files compare row for row.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/comm/comm.hpp"
#include "core/comm/compression.hpp"

namespace syncopate::app {

struct CollectivesOptions {
  std::string scenario_path;  // empty: the embedded default scenario
  std::vector<std::string> sets;
  std::optional<std::string> backend;  // sim or mpi; default: the scenario's
  std::optional<int> workers;          // sim only: under mpirun the rank count decides
  std::string sizes = "4KiB:64MiB";    // MIN:MAX, every size from MIN up by factors of 4
  std::string ops = "allreduce,broadcast,allgather";
  std::string wire = "fp32";  // allreduce and allgather: fp32, fp16 or bf16 on the wire
  int repeats = 10;
  std::string out;  // CSV file
};

enum class CollectiveKind { kAllreduce, kBroadcast, kAllgather };

constexpr std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return "allreduce";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kAllgather:
      return "allgather";
  }
  return "?";
}

// What is timed: `bytes` is the collective's result per rank (allreduce and broadcast: the
// buffer; allgather: the gathered buffer, each rank contributing its block of it).
struct CollectivePoint {
  CollectiveKind op = CollectiveKind::kAllreduce;
  size_t bytes = 0;
  WireFormat wire = WireFormat::kFp32;  // what travels (a broadcast: fp32 only)
};

// One point's seconds per call, the slowest rank's, one entry per repeat.
struct CollectiveTiming {
  CollectivePoint point;
  std::string algorithm;  // the allreduce algorithm that ran; "" for the others
  std::vector<double> seconds;
};

// Every member calls it with the same points; each one is run once to warm up, then timed
// `repeats` times between barriers (a repeat of a small collective runs it several times and
// divides). Backend-neutral: exec.now() is simulated seconds on the simulator, wall seconds on
// real backends.
std::vector<CollectiveTiming> time_collectives(Communicator& comm, Executor& exec,
                                               const std::vector<CollectivePoint>& points,
                                               int repeats);

// "4KiB:64MiB" (or a single size), "allreduce,broadcast" and "fp32": the grid, or a UsageError
// (a 16-bit wire format with a broadcast, which has none).
std::vector<CollectivePoint> collective_points(const std::string& sizes, const std::string& ops,
                                               const std::string& wire = "fp32");

int run_collectives(const CollectivesOptions& options, int* argc, char*** argv);

}  // namespace syncopate::app
