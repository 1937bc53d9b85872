#pragma once
// What a run records, and the run directory it writes:
//   metrics.csv   one row per worker and epoch
//   summary.json  the resolved scenario, backend, platform, totals, time-to-accuracy
//   trace.json    Chrome trace events (open in Perfetto / chrome://tracing)
//   scenario.toml the resolved scenario
//   model.bin     the final model (worker 0's, or the first survivor's when an elastic run lost
//                 it), raw float32 in the flat-buffer layout (real runs)
//   partitions.csv worker,class,count under a data.partition other than iid (classification)
// The directory is built as DIR.partial and renamed to DIR only when every file is written, so a
// run directory that exists is complete; a failed run leaves DIR.partial with an ERROR file.
// While the run goes, DIR.partial holds scenario.toml, epochs/worker-<w>.csv (every finished
// epoch; the simulator's in one epochs/workers.csv), checkpoint/ (checkpoint.every) and INCOMPLETE
// (how to resume); epochs/, checkpoint/ and INCOMPLETE are gone from a complete run directory.
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/trace.hpp"
#include "core/comm/fault_abort.hpp"
#include "core/nn/loss.hpp"
#include "core/scenario/scenario.hpp"

namespace syncopate {

struct EpochMetrics {
  int worker = 0;
  int epoch = 0;
  double start_s = 0, end_s = 0;  // training part of the epoch (evaluation excluded)
  double compute_s = 0, comm_s = 0, idle_s = 0;
  uint64_t bytes_sent = 0, bytes_recv = 0;
  double comm_total_s = 0;                    // some communication in flight, overlapped or exposed
  double train_loss = 0, train_accuracy = 0;  // -1: absent (cost-only; accuracy of regression)
  double test_accuracy = -1;                  // -1: not evaluated
  double lr = 0;
  RegressionMetrics test_errors;  // regression runs evaluated this epoch; NaN otherwise
};

// A resume at another worker count: from `from` workers to `to`, before epoch `at_epoch`
// (core/train/rescale.hpp).
struct Resize {
  int from = 0, to = 0, at_epoch = 0;
};

struct WorkerReport {
  int worker = 0;
  std::vector<EpochMetrics> epochs;
  std::vector<TraceEvent> trace;
  // Of the final (consensus) model, evaluated by the worker whose model is the run's (run_model).
  double final_test_accuracy = -1;
  double final_test_loss = 0;
  RegressionMetrics final_test_errors;  // regression: of the final model
  uint64_t steps = 0;
  // Measured: the most bytes of the worker's model parameters, and of its gradients, in memory at
  // once during a step (TrainStep::resident_param_bytes and resident_grad_bytes, in each epoch's
  // first); 0 in cost-only runs.
  uint64_t resident_param_bytes = 0;
  uint64_t resident_grad_bytes = 0;
  std::vector<float> final_params;  // the worker's model at the end (empty in cost-only runs)
  // The run's final model is this worker's (it evaluated it, model.bin holds it): rank 0 at the
  // end, worker 0 or, when an elastic run lost it, the lowest-ranked survivor. Not in
  // serialize_report: where no report says so (gathered under MPI), worker 0's is the run's.
  bool run_model = false;
  bool interrupted = false;     // stopped before the last epoch, a checkpoint written
  int64_t stopped_at_step = 0;  // interrupted inside an epoch: its steps done (not serialized)
  std::vector<Resize> resizes;  // the run's resizes (not in serialize_report: checkpoints)
};

// A worker that an elastic run lost (the simulator's epoch_sync and epoch_async after a
// host_failure or a failure of the worker's NIC): its metrics end at at_s.
struct LostWorker {
  int worker = -1;
  double at_s = 0;
  std::string kind;         // the [[sim.faults]] kind
  double lost_seconds = 0;  // its work since its last finished epoch (or the start), thrown away
};

// A job that a fault aborted and that was relaunched from its last checkpoint set after a
// recovery time (the simulator's sim.restart.recovery_s, app/restart.hpp).
struct FaultRestart {
  std::string kind;           // the [[sim.faults]] kind that aborted the job
  int worker = -1;            // the failed worker, or -1 (a link)
  std::string link;           // the failed link(s), or empty
  double at_s = 0;            // the abort's simulated date
  double resumed_from_s = 0;  // the date of the checkpoint set it continued from (0: the start)
  // The work done again: since that checkpoint set, or since the relaunch before when that one
  // came later (a second fault before a new checkpoint set).
  double lost_seconds = 0;
  double recovery_s = 0;                                  // from the abort to the relaunch
  double restart_s() const { return at_s + recovery_s; }  // every clock starts there
};

// {"restarts": [...]}: each restart as summary.json's `restarts` has it (restart_s included).
std::string restarts_json(const std::vector<FaultRestart>& restarts);

// Backend-specific figures for the summary (simulator statistics, MPI details).
struct RunInfo {
  std::string platform;  // "" for real backends
  double wall_seconds = 0;
  std::vector<std::pair<std::string, double>>
      extra;                   // name -> value, written under "backend_stats"
  std::string partitions_csv;  // data.partition's class histogram; "" writes no partitions.csv
  std::vector<LostWorker> lost_workers;  // written as summary.json's lost_workers if any
  std::vector<FaultRestart> restarts;    // written as summary.json's restarts if any
};

struct RunSummary {
  std::string backend, strategy, platform;
  int workers = 0, epochs = 0;
  uint64_t seed = 0;
  double final_test_accuracy = -1;
  RegressionMetrics final_test_errors;
  double total_time_s = 0;       // end of the last worker's last epoch
  double compute_time_s = 0;     // summed over workers
  double comm_time_s = 0;        // exposed: workers blocked in communication
  double comm_total_time_s = 0;  // some communication in flight (see EpochMetrics)
  double idle_time_s = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_recv = 0;
  uint64_t resident_param_bytes = 0;  // the workers' largest (WorkerReport)
  uint64_t resident_grad_bytes = 0;   // the same
  std::vector<std::pair<double, double>>
      time_to_accuracy;         // (accuracy target, seconds); -1 if never
  std::vector<Resize> resizes;  // worker 0's: summary.json's "resized" when not empty
};

RunSummary summarize(const Scenario& scenario, const std::vector<WorkerReport>& reports,
                     const RunInfo& info);

std::string metrics_csv(const std::vector<WorkerReport>& reports);
std::string metrics_csv_header();
std::string metrics_csv_row(const EpochMetrics& row);
// While a run goes: appends a worker's finished epoch to RUN/epochs/worker-<w>.csv (the
// metrics.csv columns; the header first), so that a run that dies keeps it. A process that hosts
// one worker (MPI, local) writes its rows so.
void append_epoch_row(const std::string& run_dir, const EpochMetrics& row);

// The same rows of every worker of a process that hosts them all (the simulator), in one file,
// RUN/epochs/workers.csv, through one stream kept open and flushed after each row. A file per
// worker made 65,536 files at that many simulated GPUs, and creating them was about a quarter of a
// 4,096-GPU run's wall time.
class EpochRows {
 public:
  // `resumed`: the run continues from its checkpoints, and each worker writes their rows again,
  // so the file is emptied first (it may hold rows of epochs run after the checkpoint).
  EpochRows(const std::string& run_dir, bool resumed);
  void append(const EpochMetrics& row);

 private:
  std::mutex mutex_;  // the simulator's workers are actors, which may be threads
  std::string path_;
  std::ofstream out_;  // opened at the first row
};
std::string summary_json(const Scenario& scenario, const RunSummary& summary, const RunInfo& info);
std::string trace_json(const std::vector<WorkerReport>& reports);

// Picks DIR (or DIR-2, DIR-3, ... if DIR exists: never overwrites a previous run).
std::string unique_run_dir(const std::string& dir);

// Writes the three files into `dir` (atomically, see above). Returns the directory written.
std::string write_run_dir(const std::string& dir, const Scenario& scenario,
                          const std::vector<WorkerReport>& reports, const RunInfo& info);
// Leaves DIR.partial/ERROR describing a failure (keeps anything already there).
void write_failure(const std::string& dir, const std::string& message);
// Leaves DIR.partial/fault.json: the fault that aborted the run, when, and the time lost.
void write_fault_record(const std::string& dir, const FaultRecord& record);

}  // namespace syncopate
