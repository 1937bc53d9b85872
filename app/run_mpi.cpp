// `syncopate run` on the MPI backend: one rank per worker; rank 0 gathers the reports.
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "app/commands.hpp"
#include "backends/mpi/deadline.hpp"
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_executor.hpp"
#include "backends/mpi/runtime.hpp"
#include "backends/mpi/startup_check.hpp"
#include "backends/mpi/stop_latch.hpp"
#include "core/base/check.hpp"
#include "core/comm/mpi_settings.hpp"
#include "core/train/run_files.hpp"
#include "core/train/trainer.hpp"

namespace syncopate::app {
namespace {

// Every rank's report, on rank 0 (empty elsewhere).
std::vector<WorkerReport> gather_reports(mpi::MpiCommunicator& comm, const WorkerReport& mine) {
  const mpi::Deadline deadline("gathering the reports on rank 0 (MPI_Gatherv)");
  const std::string text = serialize_report(mine);
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<size_t>(comm.size())), offsets(lengths.size());
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm.handle());
  int total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string all(comm.rank() == 0 ? static_cast<size_t>(total) : 0, '\0');
  MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
              0, comm.handle());
  std::vector<WorkerReport> reports;
  if (comm.rank() != 0) return reports;
  for (size_t i = 0; i < lengths.size(); ++i)
    reports.push_back(deserialize_report(
        all.substr(static_cast<size_t>(offsets[i]), static_cast<size_t>(lengths[i]))));
  return reports;
}

// This rank's index among the ranks of its node.
int local_rank(const mpi::MpiCommunicator& comm) {
  int local = 0;
  for (int r = 0; r < comm.rank(); ++r)
    if (comm.node_of_rank()[static_cast<size_t>(r)] == comm.node()) ++local;
  return local;
}

// The run itself, inside the MPI runtime. Errors propagate to run_mpi.
// Rank 0 chooses the run directory and tells the others.
void choose_run_dir(mpi::MpiCommunicator& comm, const Scenario& scenario, RunTarget& target) {
  if (!target.dir.empty()) return;
  if (comm.rank() == 0) open_run_dir(target, scenario);
  int length = static_cast<int>(target.dir.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, comm.handle());
  target.dir.resize(static_cast<size_t>(length));
  MPI_Bcast(target.dir.data(), length, MPI_CHAR, 0, comm.handle());
  target.plan.dir = target.dir + ".partial";
}

RunResult run_ranks(const Scenario& scenario, const ProgressFn& progress, RunTarget& target) {
  RunResult result;
  auto comm = mpi::MpiCommunicator::world();
  // Every rank must run the same scenario with as many ranks as it names. The check fails on
  // every rank alike, so each one reports it and the job ends normally.
  try {
    mpi::check_same_everywhere(*comm, scenario.resolved_toml, scenario.workers);
  } catch (const UserError& e) {
    std::fprintf(stderr, "syncopate: error on rank %d: %s\n", comm->rank(), e.what());
    result.writes_output = false;
    result.exit_code = 1;
    return result;
  }
  // The transport (and the GPU) fails alike on every rank: each reports it, the job ends.
  std::unique_ptr<Communicator> nccl;
  try {
    nccl = mpi_device_setup(scenario, *comm, local_rank(*comm), comm->default_timeout());
  } catch (const UserError& e) {
    std::fprintf(stderr, "syncopate: error on rank %d: %s\n", comm->rank(), e.what());
    result.writes_output = false;
    result.exit_code = 1;
    return result;
  }
  choose_run_dir(*comm, scenario, target);
  const double start = MPI_Wtime();
  const AcceleratorFactory accelerator = accelerator_for(scenario);
  const TrainData data = prepare_data(scenario, false);
  mpi::MpiStopLatch stop_latch(*comm);  // every rank stops at one boundary after a signal
  // Time 0 is the start of training on every rank alike: start-up and data loading excluded.
  comm->barrier();
  mpi::MpiExecutor exec;
  CheckpointPlan plan = target.plan;
  plan.stop_latch = &stop_latch;
  const WorkerReport mine =
      train_worker(scenario, data, nccl ? *nccl : *comm, exec, accelerator, progress, plan);
  result.interrupted = mine.interrupted;
  result.reports = gather_reports(*comm, mine);
  if (comm->rank() == 0) {
    result.reports[0].final_params = mine.final_params;
    result.reports[0].resizes = mine.resizes;
    result.reports[0].stopped_at_step = mine.stopped_at_step;
  }
  result.info.wall_seconds = MPI_Wtime() - start;
  result.info.partitions_csv = data.partitions_csv;
  const std::optional<bool> yields = mpi::Runtime::waiting_ranks_yield();
  result.info.extra = {
      {"ranks", static_cast<double>(comm->size())},
      {"nodes", static_cast<double>(comm->num_nodes())},
      {"nccl", nccl ? 1.0 : 0.0},
      // how Open MPI's shared memory moved large messages (see calibrate)
      {std::string(mpi_settings::kSingleCopy),
       mpi::Runtime::shared_memory_single_copy() ? 1.0 : 0.0},
      // how a waiting rank waited: 1 yielded its core, 0 spun, -1 unknown (calibrate's header)
      {std::string(mpi_settings::kYieldWhenIdle), yields ? (*yields ? 1.0 : 0.0) : -1.0}};
  result.writes_output = comm->rank() == 0;
  return result;
}

}  // namespace

// An error ends the whole job through MPI_Abort, with its message printed first: the other ranks
// would otherwise wait forever for the failing one (NaN loss, bad data, a peer that timed out, a
// broken invariant). The one exception: a user error on a single rank leaves the runtime (which
// finalizes MPI) and reaches main's handler, as on any other backend.
RunResult run_mpi(const Scenario& scenario, int* argc, char*** argv, const ProgressFn& progress,
                  RunTarget& target) {
  std::exception_ptr user_error;
  {
    mpi::Runtime runtime(argc, argv);
    const std::string rank = "rank " + std::to_string(runtime.world_rank());
    try {
      return run_ranks(scenario, progress, target);
    } catch (const UserError& e) {
      if (runtime.world_size() > 1)
        mpi::Runtime::abort(1, "syncopate: error on " + rank + ": " + e.what());
      user_error = std::current_exception();
    } catch (const PeerFailure& e) {
      mpi::Runtime::abort(1, "syncopate: error on " + rank + ": communication failed: " + e.what());
    } catch (const std::exception& e) {
      mpi::Runtime::abort(3, "syncopate: internal error on " + rank + ": " + e.what());
    }
  }
  std::rethrow_exception(user_error);
}

}  // namespace syncopate::app
