#pragma once
// Checkpoints of a run, written at epoch boundaries (atomically: temporary file, fsync, rename,
// fsync of the folder) and read back by `syncopate run --resume`: one file per worker,
// RUN/checkpoint/worker-<w>.ckpt, where each worker is a process (MPI, local); one file per
// checkpoint set, RUN/checkpoint/workers.ckpt, where one process hosts every worker (the
// simulator: SharedCheckpoints). A worker's checkpoint is
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
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/comm/timed_comm.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/recorder.hpp"

namespace syncopate {

class StopLatch;
class SharedCheckpoints;

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
  // Where a signalled stop happens; nullptr: process_stop_latch().
  StopLatch* stop_latch = nullptr;
  // Where the finished epochs' rows go when one process hosts every worker (the simulator);
  // nullptr: each worker appends to its own file (append_epoch_row).
  EpochRows* shared_rows = nullptr;
  // Where the checkpoints go when one process hosts every worker; nullptr: each worker writes
  // its own file (write_worker_checkpoint).
  SharedCheckpoints* shared_checkpoints = nullptr;
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

// SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 (install_stop_signals, from the command line) ask the run
// to stop: mpirun forwards the two user signals to every rank and lets the job go on (Open MPI's
// ess_base_forward_signals), where it ends the ranks itself after forwarding SIGINT or SIGTERM;
// Slurm's --signal sends SIGUSR1 by default. Where
// mid-epoch checkpoints can be restored (mid_epoch_checkpoint_refusal is empty), every worker
// stops at one step boundary and writes a checkpoint there; elsewhere at one epoch boundary, after
// finishing its epoch. The boundary is latched by a StopLatch. A second signal ends the process
// at once.
void install_stop_signals();
bool stop_signalled();

// The boundaries a stop may happen at: steps of the run, or epochs, done so far.
enum class StopUnit { kStep, kEpoch };

// Where the workers of a run stop after a signal. Every worker calls latch() at each boundary of
// `unit` where it may stop, `done` being its boundaries passed so far, and `signalled` whether
// its process saw the signal (stop_signalled()). The latch records `done` as reached; the first
// call with `signalled` after that latches the furthest boundary that any worker recorded, plus
// one with several workers (one that no worker has passed: a worker that recorded it may have gone
// on). Recording, reading and latching are one atomic step, so no worker passes the latched
// boundary without seeing it: every worker stops at that one boundary, whichever of them saw the
// signal and when.
class StopLatch {
 public:
  virtual ~StopLatch() = default;
  // The latched boundary of `unit`, -1 while none.
  virtual int64_t latch(StopUnit unit, int64_t done, int workers, bool signalled) = 0;
};

// A latch's record for one unit, and the rule above that updates it.
struct StopRecord {
  int64_t furthest = 0;  // the furthest boundary recorded
  int64_t latched = -1;  // the boundary where every worker stops, -1 while none
  void record(int64_t done, int workers, bool signalled) {
    furthest = std::max(furthest, done);
    if (latched < 0 && signalled) latched = workers > 1 ? furthest + 1 : done;
  }
  bool operator==(const StopRecord&) const = default;
};

// The latch of the workers that share this process (the local backend, the simulator's actors):
// atomics. The MPI backend's ranks share one in a window (backends/mpi/stop_latch.hpp).
StopLatch& process_stop_latch();

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
// (n may differ from the scenario's after a resize). Where a set file is there too (a run moved
// from one backend to another), the later of the two; the set on a tie. Throws UserError naming
// the file when one is damaged or foreign, or when there is no such epoch.
std::vector<WorkerCheckpoint> read_resume_set(const std::string& run_dir, const Scenario& scenario);

// The checkpoint set of the workers of one process: RUN/checkpoint/workers.ckpt is
//   "SYNCCSET" | set format version u32 | per worker, in the order they arrived:
//   length u64 | that worker's checkpoint, framed as a worker's file is
// and holds every worker's checkpoint at one point (worker count, epoch, step). The simulator
// used to write a file per worker: creating and fsyncing 4,096 of them per checkpoint took
// longer than simulating a 4,096-GPU epoch.
inline constexpr uint32_t kCheckpointSetVersion = 1;
std::string checkpoint_set_path(const std::string& run_dir);

// The checkpoints of the workers of one process. Collects them as they arrive, each point's in
// its own temporary file, and renames a point's file to workers.ckpt (after fsync) when its last
// worker's came: the file on disk is always a complete set, and a later one replaces it. Points
// may be open at once (an asynchronous strategy's workers reach their epochs at different
// times). A resumed run reads the set once for all its workers. Thread-safe.
class SharedCheckpoints {
 public:
  // Removes the temporary files that a killed run left in run_dir.
  explicit SharedCheckpoints(std::string run_dir);
  // Removes the files of sets that did not complete (a lost worker's).
  ~SharedCheckpoints();
  SharedCheckpoints(const SharedCheckpoints&) = delete;
  SharedCheckpoints& operator=(const SharedCheckpoints&) = delete;
  // Throws UserError naming the file when it cannot be written.
  void add(const Scenario& scenario, const WorkerCheckpoint& checkpoint);
  // read_resume_set, read at the first call and dropped after the scenario's workers each had it.
  std::shared_ptr<const std::vector<WorkerCheckpoint>> resume_set(const Scenario& scenario);

 private:
  struct Pending {
    int fd = -1;
    int added = 0;
    std::string path;
  };
  std::string dir_;
  std::mutex mu_;
  std::map<std::tuple<int, int, int64_t>, Pending> pending_;  // by workers, epoch, step
  std::shared_ptr<const std::vector<WorkerCheckpoint>> resume_set_;
  int resume_readers_ = 0;
};

// Writes a whole set at once (atomically), in the set's order.
void write_checkpoint_set(const std::string& run_dir, const Scenario& scenario,
                          const std::vector<WorkerCheckpoint>& set);
// The set in `path`, by worker. Throws UserError naming the file when it is damaged (as
// read_checkpoint says of one worker's), foreign, or not one complete set.
std::vector<WorkerCheckpoint> read_checkpoint_set(const std::string& path,
                                                  const Scenario& scenario);
// Whether run_dir holds checkpoints of all `workers` (a set file, or a file per worker).
bool has_checkpoints(const std::string& run_dir, int workers);

// Writes atomically; throws UserError when the file cannot be written.
void write_checkpoint(const std::string& path, const Scenario& scenario,
                      const WorkerCheckpoint& checkpoint);
// Throws UserError naming the file when it is missing, truncated, corrupt (CRC), not a
// checkpoint, of a newer format version or of another scenario.
WorkerCheckpoint read_checkpoint(const std::string& path, const Scenario& scenario);

}  // namespace syncopate
