#pragma once
// Reading what a run writes, and the text form of a WorkerReport:
//   read_metrics_csv    metrics.csv back into rows (the inverse of metrics_csv, recorder.hpp)
//   serialize_report    a WorkerReport as text (how MPI ranks send theirs to rank 0), and back
#include <string>
#include <string_view>
#include <vector>

#include "core/train/recorder.hpp"

namespace syncopate {

// The rows of a metrics.csv text, in file order; an empty train_loss, train_accuracy or
// test_accuracy cell (absent) reads as -1. Throws UserError naming source:line and the column when
// the header or a cell is malformed.
std::vector<EpochMetrics> parse_metrics_csv(std::string_view text, const std::string& source);
// The same, from a file (a run directory's metrics.csv).
std::vector<EpochMetrics> read_metrics_csv(const std::string& path);

// Exact (round-trip) numbers, one record per line: "R" (the report's own fields), one "E" per
// epoch, one "T" per trace event (its name last: it may hold spaces). final_params is not
// carried (rank 0 writes only its own model).
std::string serialize_report(const WorkerReport& report);
// The inverse; throws InternalError on text serialize_report did not write.
WorkerReport deserialize_report(std::string_view text);

}  // namespace syncopate
