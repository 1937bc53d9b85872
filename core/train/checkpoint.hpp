#pragma once
// Checkpoints of a run: one file per worker, RUN/checkpoint/worker-<w>.ckpt, written at epoch
// boundaries (atomically: temporary file, fsync, rename, fsync of the folder) and read back by
// `syncopate run --resume`. A file is
//   "SYNCCKPT" | format version u32 | scenario hash u64 | payload length u64 | payload |
//   CRC-32 u32 of everything before it
// (little-endian). The payload holds what the worker loop needs to continue bit for bit: the
// parameters, the optimizer state and step count, the strategy's state, the executor's clock
// (and, on the simulator, its compute-noise step counter), the phase times and the report so
// far (metrics of every finished epoch, trace events). The data order and dropout masks are
// counter-based (rng.hpp: keyed by epoch and step), so the epoch and step numbers are their
// whole state.
// Format version 2 (this one) hashes the resolved scenario without its top-level worker count,
// so that a run may resume at another count (rescale.hpp), and records the run's resizes;
// version 1 files (hash of the whole scenario, no resizes) are still read.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/comm/timed_comm.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/recorder.hpp"

namespace syncopate {

// What the worker loop writes and reads.
struct CheckpointPlan {
  std::string dir;               // the run directory being written; "" writes no checkpoint
  int every = 0;                 // epochs between checkpoints (checkpoint.every); 0: none
  int every_steps = 0;           // steps between checkpoints inside an epoch; 0: none
  int64_t stop_after_steps = 0;  // > 0: stop at the first mid-epoch checkpoint after so many
  bool resume = false;           // continue from dir's checkpoints
  int stop_after_epochs = 0;     // > 0: stop, as an interrupted run does, after so many epochs
  // Fault injection (tests): worker kill_worker kills its process with SIGKILL after
  // kill_after_epochs epochs (0: never); rank 0 sends its process SIGTERM after
  // term_after_steps steps of the run (0: never), as an operator's stop would.
  int kill_after_epochs = 0, kill_worker = -1;
  int64_t term_after_steps = 0;
  // A relaunched job (the simulator's restart after a fault, app/restart.hpp): every worker's
  // clock starts at this date, after its checkpoint's (0: where the checkpoint left it).
  double start_s = 0;
};

struct WorkerCheckpoint {
  int worker = 0, workers = 0;
  int next_epoch = 0;       // the first epoch still to run
  int64_t next_step = 0;    // its first step still to run (> 0: a mid-epoch checkpoint)
  std::string epoch_state;  // mid-epoch: the epoch's meters so far (the worker loop's format)
  int64_t global_step = 0, optimizer_steps = 0;
  std::vector<double> clock;  // Executor::clock_state()
  PhaseTimes phases;
  std::vector<float> params, optimizer_state;
  std::string strategy_state;   // Strategy::save_state
  std::string report;           // serialize_report of the report so far
  std::vector<Resize> resizes;  // the run's resizes so far, oldest first (version 2)
};

inline constexpr uint32_t kCheckpointVersion = 2;

// SIGINT and SIGTERM (install_stop_signals, from the command line) ask the run to stop. Where
// mid-epoch checkpoints can be restored (mid_epoch_checkpoint_refusal is empty), each worker
// stops at the step boundary latched by the first worker that sees the request
// (latch_stop_step) and writes a checkpoint there; elsewhere each worker finishes its epoch,
// writes a checkpoint and stops at the epoch boundary latched likewise (latch_stop_boundary:
// the next one with several workers, so that workers already past the current boundary meet
// there). A second signal ends the process at once.
void install_stop_signals();
bool stop_signalled();
// The boundary (epochs done) where workers stop: the first caller's `proposed`, latched.
int latch_stop_boundary(int proposed);
// The step boundary (steps done since the start of the run) where workers stop, -1 while no stop
// is signalled. Every worker calls it at each step boundary it reaches, `done` being its steps
// done so far: it records `done`, and the first call after the signal latches the furthest
// boundary that any worker of the process recorded, plus one with several workers (one that no
// worker has passed: a worker that recorded it may have gone on).
int64_t latch_stop_step(int64_t done, int workers);

// FNV-1a of the resolved scenario without its top-level `workers = N` line: a checkpoint of
// another scenario is refused, one of another worker count is not (rescale.hpp decides).
uint64_t scenario_hash(const Scenario& scenario);
std::string checkpoint_path(const std::string& run_dir, int worker);
// Writes `bytes` to `path` through a temporary file, fsync and rename, then syncs the folder
// (UserError naming the file when it cannot).
void write_atomically(const std::filesystem::path& path, const std::string& bytes);
// Rewrites run_dir/scenario.toml (atomically) with the scenario a resized run continues.
void write_run_scenario(const std::string& run_dir, const Scenario& scenario);

// Worker `checkpoint.worker`'s checkpoint under run_dir, keeping the one before it as
// worker-<w>.previous.ckpt: a run killed while its workers write theirs still has a complete set.
void write_worker_checkpoint(const std::string& run_dir, const Scenario& scenario,
                             const WorkerCheckpoint& checkpoint);
// Every worker's checkpoint at the latest epoch that all of them reached: the latest epoch E
// and worker count n for which workers 0..n-1 all hold a checkpoint of n workers before epoch E
// (n may differ from the scenario's after a resize). Throws UserError naming the file when one
// is damaged or foreign, or when there is no such epoch.
std::vector<WorkerCheckpoint> read_resume_set(const std::string& run_dir, const Scenario& scenario);

// Writes atomically; throws UserError when the file cannot be written.
void write_checkpoint(const std::string& path, const Scenario& scenario,
                      const WorkerCheckpoint& checkpoint);
// Throws UserError naming the file when it is missing, truncated, corrupt (CRC), not a
// checkpoint, of a newer format version or of another scenario.
WorkerCheckpoint read_checkpoint(const std::string& path, const Scenario& scenario);

}  // namespace syncopate
