// Checkpoint and resume through the syncopate binary: a run stopped after some epochs and resumed
// with --resume ends with the metrics and the final model of the uninterrupted run, on the
// simulator for every strategy, on the local backend and under mpirun; damaged, foreign and
// future-version checkpoints are refused.
#include "core/train/checkpoint.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"
#include "tests/common/same_metrics.hpp"

namespace checkpoint_test {
namespace {
namespace fs = std::filesystem;

const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";
const std::string kBin = SYNCOPATE_BIN;

fs::path scratch() { return syncopate::scratch_folder("checkpoint"); }

using syncopate::mpirun;

// Each strategy's own settings (a scenario refuses those its strategy does not read). epoch_async
// gets as many blocks per worker on every worker, so that its merges come in rounds (see
// checkpoint.hpp on what a resumed epoch_async run continues from).
std::string knobs_of(const std::string& strategy) {
  if (strategy == "ddp" || strategy == "hierarchical") return " --set strategy.bucket_mb=0.25";
  if (strategy == "epoch_sync") return " --set strategy.every=2 --set data.blocks=6";
  if (strategy == "epoch_async") return " --set data.blocks=8";
  if (strategy == "local_sgd") return " --set strategy.every=3 --set strategy.warmup_epochs=1";
  if (strategy == "diloco")
    return " --set strategy.every=4 --set strategy.fragments=2 --set strategy.outer_momentum=0.9";
  if (strategy == "zero") return " --set strategy.stage=2 --set strategy.bucket_mb=0.25";
  return "";
}

std::string run_args(const std::string& strategy, const std::string& backend, int workers) {
  std::string args = kScenario + " --quiet --backend " + backend + " --strategy " + strategy +
                     " --workers " + std::to_string(workers) +
                     " --epochs 4 --set checkpoint.every=1" + knobs_of(strategy);
  if (backend == "sim") args += " --platform ethernet-cluster";
  return args;
}

std::vector<char> bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every column of every row equal, bit for bit, except the time columns, which agree to
// `time_tolerance` times the row's end time (< 0: not compared, wall-clock).
void expect_same_metrics(const fs::path& a, const fs::path& b, double time_tolerance) {
  const auto x = syncopate::read_metrics_csv((a / "metrics.csv").string());
  const auto y = syncopate::read_metrics_csv((b / "metrics.csv").string());
  syncopate::expect_same_training_rows(x, y);
  if (time_tolerance < 0 || x.size() != y.size()) return;
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    for (const auto field :
         {&syncopate::EpochMetrics::start_s, &syncopate::EpochMetrics::end_s,
          &syncopate::EpochMetrics::compute_s, &syncopate::EpochMetrics::comm_s,
          &syncopate::EpochMetrics::idle_s, &syncopate::EpochMetrics::comm_total_s})
      EXPECT_LE(std::abs(x[i].*field - y[i].*field), time_tolerance * x[i].end_s);
  }
}

// Runs `args` uninterrupted into `name`-full, and stopped after `stop` epochs into `name`-part,
// then resumed (with `launcher` in front, "" or mpirun); both must end alike.
void expect_resume_equivalent(const std::string& name, const std::string& args,
                              const std::string& launcher, int stop, double time_tolerance) {
  const fs::path full = scratch() / (name + "-full"), part = scratch() / (name + "-part");
  fs::remove_all(full);
  fs::remove_all(part);
  fs::remove_all(part.string() + ".partial");
  std::string output;
  ASSERT_EQ(syncopate::run_command(
                launcher + " " + kBin + " run " + args + " --out " + full.string(), &output),
            0)
      << output;
  const std::string hook = " --test-hook stop_after_epochs=" + std::to_string(stop);
  ASSERT_EQ(syncopate::run_command(
                launcher + " " + kBin + " run " + args + hook + " --out " + part.string(), &output),
            4)
      << output;
  EXPECT_NE(output.find("--resume " + part.string() + ".partial"), std::string::npos) << output;
  ASSERT_FALSE(fs::exists(part));
  const auto finished =
      syncopate::read_metrics_csv((part.string() + ".partial/metrics.csv")).back().epoch;
  EXPECT_EQ(finished, stop - 1);
  ASSERT_EQ(
      syncopate::run_command(
          launcher + " " + kBin + " run --quiet --resume " + part.string() + ".partial", &output),
      0)
      << output;
  ASSERT_TRUE(fs::exists(part / "summary.json"));
  EXPECT_FALSE(fs::exists(part / "checkpoint"));
  expect_same_metrics(full, part, time_tolerance);
  EXPECT_EQ(bytes_of(full / "model.bin"), bytes_of(part / "model.bin"));
}

class SimResume : public ::testing::TestWithParam<const char*> {};

// Simulated time agrees to rounding: the resumed simulation reaches the same dates through other
// sums of time steps (SimGrid advances its clock by deltas), so the last bits may differ.
TEST_P(SimResume, EndsAsTheUninterruptedRun) {
  const std::string strategy = GetParam();
  const int workers = strategy == std::string("serial") ? 1 : 4;
  expect_resume_equivalent("sim-" + strategy, run_args(strategy, "sim", workers), "", 2, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Strategies, SimResume,
                         ::testing::Values("serial", "ddp", "epoch_sync", "epoch_async",
                                           "local_sgd", "hierarchical", "diloco", "zero"));

TEST(LocalResume, EndsAsTheUninterruptedRun) {
  expect_resume_equivalent("local", run_args("serial", "local", 1), "", 3, -1);
}

TEST(MpiResume, EndsAsTheUninterruptedRun) {
  for (const std::string strategy : {"ddp", "local_sgd"})
    expect_resume_equivalent("mpi-" + strategy, run_args(strategy, "mpi", 2), mpirun(2), 2, -1);
}

// PowerSGD's error feedback and Q carry from step to step: checkpoints hold them.
TEST(PowerSgdResume, EndsAsTheUninterruptedRunOnSim) {
  const std::string args = run_args("ddp", "sim", 4) + " --set strategy.compression=powersgd";
  expect_resume_equivalent("sim-powersgd", args, "", 2, 1e-12);
}

// A stopped two-worker simulated run's DIR.partial, its checkpoint set and its bytes.
struct StoppedRun {
  fs::path partial, checkpoint;
  std::vector<char> bytes;
};
StoppedRun stopped_run(const std::string& name, const std::string& extra = "") {
  const fs::path out = scratch() / name;
  fs::remove_all(out.string() + ".partial");
  std::string output;
  EXPECT_EQ(syncopate::run_command(kBin + " run --test-hook stop_after_epochs=1 " +
                                       run_args("ddp", "sim", 2) + extra + " --out " + out.string(),
                                   &output),
            4)
      << output;
  StoppedRun r{out.string() + ".partial", out.string() + ".partial/checkpoint/workers.ckpt", {}};
  r.bytes = bytes_of(r.checkpoint);
  return r;
}

void write_bytes(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The resume fails with exit code 1 and a message holding `what`.
void expect_refused(const fs::path& partial, const std::string& what) {
  std::string output;
  EXPECT_EQ(syncopate::run_command(kBin + " run --quiet --resume " + partial.string(), &output), 1)
      << output;
  EXPECT_NE(output.find(what), std::string::npos) << output;
}

TEST(CheckpointRefusal, CorruptTruncatedForeignAndFutureFiles) {
  StoppedRun run = stopped_run("refused");
  ASSERT_GT(run.bytes.size(), 100u);

  std::vector<char> corrupt = run.bytes;
  corrupt[corrupt.size() / 2] ^= 0x10;
  write_bytes(run.checkpoint, corrupt);
  expect_refused(run.partial, "corrupt checkpoint (CRC-32 mismatch)");

  write_bytes(run.checkpoint, std::vector<char>(run.bytes.begin(), run.bytes.end() - 100));
  expect_refused(run.partial, "truncated checkpoint");

  std::vector<char> future = run.bytes;
  future[8] = 2;  // the set's format version, little-endian u32 after the magic
  write_bytes(run.checkpoint, future);
  expect_refused(run.partial, "checkpoint set format version 2 is newer than this program's (1)");
  future = run.bytes;
  // The first record's: after the set's magic and version, the record's length and magic.
  future[8 + 4 + 8 + 8] = 3;
  write_bytes(run.checkpoint, future);
  expect_refused(run.partial,
                 "workers.ckpt (record 0): checkpoint format version 3 is newer than this "
                 "program's (2)");

  write_bytes(run.checkpoint, std::vector<char>{'n', 'o', 'p', 'e'});
  expect_refused(run.partial, "not a syncopate checkpoint");

  const StoppedRun other = stopped_run("foreign", " --seed 12");
  write_bytes(run.checkpoint, other.bytes);
  expect_refused(run.partial, "checkpoint of another scenario");

  // Put back, the run resumes.
  write_bytes(run.checkpoint, run.bytes);
  std::string output;
  EXPECT_EQ(syncopate::run_command(kBin + " run --quiet --resume " + run.partial.string(), &output),
            0)
      << output;
}

TEST(CheckpointRefusal, NothingToResume) {
  const fs::path missing = scratch() / "never-ran";
  expect_refused(missing, "no " + missing.string() + ".partial to resume");
  std::string output;
  EXPECT_EQ(
      syncopate::run_command(kBin + " run " + kScenario + " --resume " + missing.string(), &output),
      2)
      << output;
}

}  // namespace

namespace {

size_t rows_in(const fs::path& csv) { return syncopate::read_metrics_csv(csv.string()).size(); }

// A rank killed under mpirun ends the job soon, naming the rank; the run directory keeps the
// epochs every rank finished and their checkpoints, and the run resumes to the uninterrupted
// run's results.
TEST(MpiKilledRank, KeepsItsFinishedEpochsAndResumes) {
  const std::string args = run_args("ddp", "mpi", 2);
  const fs::path full = scratch() / "killed-full", part = scratch() / "killed";
  for (const fs::path& p : {full, part, fs::path(part.string() + ".partial")}) fs::remove_all(p);
  std::string output;
  ASSERT_EQ(syncopate::run_command(
                mpirun(2) + " " + kBin + " run " + args + " --out " + full.string(), &output),
            0)
      << output;
  const auto start = std::chrono::steady_clock::now();
  const int code = syncopate::run_command(
      mpirun(2) + " " + kBin + " run " + args +
          " --test-hook kill_after_epochs=2 --test-hook kill_worker=1" + " --out " + part.string(),
      &output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(code, 0) << output;
  EXPECT_LT(seconds, 30) << output;
  EXPECT_NE(output.find("rank 1"), std::string::npos) << output;
  const fs::path partial = part.string() + ".partial";
  EXPECT_EQ(rows_in(partial / "epochs" / "worker-1.csv"), 2u);
  EXPECT_GE(rows_in(partial / "epochs" / "worker-0.csv"), 2u);
  EXPECT_NE(syncopate::read_text(partial / "INCOMPLETE").find("--resume " + partial.string()),
            std::string::npos);
  ASSERT_EQ(syncopate::run_command(
                mpirun(2) + " " + kBin + " run --quiet --resume " + partial.string(), &output),
            0)
      << output;
  expect_same_metrics(full, part, -1);
  EXPECT_EQ(bytes_of(full / "model.bin"), bytes_of(part / "model.bin"));
}

// The epochs of `worker` among a file's rows, in the file's order.
std::vector<int> epochs_of(const fs::path& csv, int worker) {
  std::vector<int> epochs;
  for (const syncopate::EpochMetrics& row : syncopate::read_metrics_csv(csv.string()))
    if (row.worker == worker) epochs.push_back(row.epoch);
  return epochs;
}

// A run without checkpoints keeps its finished epochs too; a complete run keeps no leftovers.
TEST(RunDir, FinishedEpochsAreOnDiskWhileItRuns) {
  const fs::path out = scratch() / "epochs-only";
  fs::remove_all(out.string() + ".partial");
  std::string output;
  EXPECT_NE(syncopate::run_command(
                kBin + " run --test-hook kill_after_epochs=1 --test-hook " + "kill_worker=0 " +
                    kScenario + " --quiet --backend sim --epochs 3" + " --out " + out.string(),
                &output),
            0);
  const fs::path partial = out.string() + ".partial";
  EXPECT_EQ(epochs_of(partial / "epochs" / "workers.csv", 0), std::vector<int>{0});  // killed
  EXPECT_FALSE(fs::exists(partial / "checkpoint"));
  fs::remove_all(partial);
  ASSERT_EQ(
      syncopate::run_command(
          kBin + " run " + kScenario + " --quiet --backend sim --out " + out.string(), &output),
      0)
      << output;
  for (const char* leftover : {"epochs", "checkpoint", "INCOMPLETE"})
    EXPECT_FALSE(fs::exists(out / leftover)) << leftover;
  EXPECT_FALSE(fs::exists(partial));
}

// The simulator writes both workers' finished epochs into one file. Killed after epoch 2, one
// past its checkpoint (every 2 epochs), the run has worker 0's epochs 0 to 2 there. Resumed from
// epoch 2 and killed after epoch 3, it has each of worker 0's epochs once: the resumed run emptied
// the file, each worker wrote its checkpoint's rows again, then the epochs it ran. The
// checkpoints, too, are one file.
TEST(RunDir, SimulatedWorkersShareOneEpochFileThatResumeRewrites) {
  const fs::path out = scratch() / "sim-rows";
  const fs::path partial = out.string() + ".partial", rows = partial / "epochs" / "workers.csv";
  fs::remove_all(partial);
  const std::string kill = " --test-hook kill_worker=0 --test-hook kill_after_epochs=";
  std::string output;
  EXPECT_NE(syncopate::run_command(kBin + " run " + kScenario +
                                       " --quiet --backend sim --workers 2 --strategy ddp "
                                       "--epochs 4 --set checkpoint.every=2 --out " +
                                       out.string() + kill + "3",
                                   &output),
            0);
  EXPECT_EQ(epochs_of(rows, 0), (std::vector<int>{0, 1, 2})) << output;
  EXPECT_FALSE(fs::exists(partial / "epochs" / "worker-0.csv"));
  // Their checkpoints, one set, in one file.
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(partial / "checkpoint"))
    files.push_back(entry.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"workers.ckpt"});
  EXPECT_NE(syncopate::run_command(kBin + " run --quiet --resume " + partial.string() + kill + "4",
                                   &output),
            0);
  EXPECT_EQ(epochs_of(rows, 0), (std::vector<int>{0, 1, 2, 3})) << output;
  const std::vector<int> other = epochs_of(rows, 1);
  ASSERT_GE(other.size(), 3u);  // its checkpoint's two, and epoch 2 (worker 0 ended epoch 3)
  for (size_t i = 0; i < other.size(); ++i) EXPECT_EQ(other[i], static_cast<int>(i));
}

}  // namespace

namespace {

// SIGTERM from outside, while the local run trains its second epoch (1,500 steps): the run stops
// at the next step, inside that epoch, with a checkpoint there (no checkpoint.every_steps), says
// how to resume and exits with 4; the resumed run ends as the uninterrupted one.
TEST(StopSignal, SigtermStopsAtTheNextStepAndResumes) {
  const std::string args = kScenario +
                           " --quiet --backend local --workers 1 --strategy serial --epochs 3"
                           " --set data.train_samples=24000";
  const fs::path full = scratch() / "signal-full", part = scratch() / "signal";
  for (const fs::path& p : {full, part, fs::path(part.string() + ".partial")}) fs::remove_all(p);
  std::string output;
  ASSERT_EQ(syncopate::run_command(kBin + " run " + args + " --out " + full.string(), &output), 0)
      << output;
  const fs::path partial = part.string() + ".partial";
  const std::string rows = (partial / "epochs" / "worker-0.csv").string();
  syncopate::run_command("sh -c '" + kBin + " run " + args + " --out " + part.string() +
                             " & p=$!; while [ ! -s " + rows +
                             " ]; do sleep 0.02; done; kill -TERM $p; wait $p; echo exit=$?'",
                         &output);
  ASSERT_NE(output.find("exit=4"), std::string::npos) << output;
  EXPECT_NE(output.find("interrupted after 1 epoch(s) and "), std::string::npos) << output;
  EXPECT_NE(output.find("--resume " + partial.string()), std::string::npos) << output;
  EXPECT_EQ(rows_in(partial / "metrics.csv"), 1u);
  const syncopate::Scenario s = syncopate::load_scenario((partial / "scenario.toml").string());
  const auto set = syncopate::read_resume_set(partial.string(), s);
  EXPECT_EQ(set.at(0).next_epoch, 1);
  EXPECT_GT(set.at(0).next_step, 0) << "a checkpoint inside epoch 1";
  ASSERT_EQ(syncopate::run_command(kBin + " run --quiet --resume " + partial.string(), &output), 0)
      << output;
  expect_same_metrics(full, part, -1);
  EXPECT_EQ(bytes_of(full / "model.bin"), bytes_of(part / "model.bin"));
}

// SIGUSR1 sent to mpirun while the ranks train their second epoch (750 steps): mpirun forwards it
// to each rank at its own moment and lets the job go on (after SIGTERM it would end the ranks
// itself); the ranks stop at one step, each with its checkpoint there, mpirun exits with 4, and
// the resumed run ends as the uninterrupted one.
TEST(StopSignal, SigusrToMpirunStopsEveryRankAtOneStepAndResumes) {
  const std::string args = kScenario +
                           " --quiet --backend mpi --workers 2 --strategy ddp --epochs 3"
                           " --set data.train_samples=24000 --set strategy.bucket_mb=0.25";
  const std::string run = mpirun(2) + " " + kBin + " run " + args;
  const fs::path full = scratch() / "usr1-full", part = scratch() / "usr1";
  const fs::path partial = part.string() + ".partial";
  for (const fs::path& p : {full, part, partial}) fs::remove_all(p);
  std::string output;
  ASSERT_EQ(syncopate::run_command(run + " --out " + full.string(), &output), 0) << output;
  const std::string rows = (partial / "epochs" / "worker-0.csv").string();
  syncopate::run_command("sh -c '" + run + " --out " + part.string() + " & p=$!; while [ ! -s " +
                             rows +
                             " ]; do sleep 0.02; done; kill -USR1 $p; wait $p; echo exit=$?'",
                         &output);
  ASSERT_NE(output.find("exit=4"), std::string::npos) << output;
  EXPECT_NE(output.find("--resume " + partial.string()), std::string::npos) << output;
  const syncopate::Scenario s = syncopate::load_scenario((partial / "scenario.toml").string());
  const auto set = syncopate::read_resume_set(partial.string(), s);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_GE(set[0].next_epoch, 1);
  EXPECT_EQ(set[1].next_epoch, set[0].next_epoch);
  EXPECT_EQ(set[1].next_step, set[0].next_step);
  ASSERT_EQ(syncopate::run_command(
                mpirun(2) + " " + kBin + " run --quiet --resume " + partial.string(), &output),
            0)
      << output;
  expect_same_metrics(full, part, -1);
  EXPECT_EQ(bytes_of(full / "model.bin"), bytes_of(part / "model.bin"));
}

// SIGTERM sent by rank 0 to its own process after `at` steps (--test-hook term_after_steps), with
// no checkpoint.every_steps: the run stops with every worker at one point, `epochs` epochs and
// `step` steps done (step > 0: inside an epoch), and resumed it ends as the uninterrupted run.
// `message` is in what the stopped run prints.
struct SignalStop {
  int at = 0, epochs = 0;
  int64_t step = 0;
  std::string message;
};
void expect_signal_resume_equivalent(const std::string& name, const std::string& args,
                                     const SignalStop& stop, double time_tolerance,
                                     const std::string& launcher = "") {
  const fs::path full = scratch() / (name + "-full"), part = scratch() / (name + "-part");
  const fs::path partial = part.string() + ".partial";
  for (const fs::path& p : {full, part, partial}) fs::remove_all(p);
  std::string output;
  const std::string run = launcher + " " + kBin + " run ";
  ASSERT_EQ(syncopate::run_command(run + args + " --out " + full.string(), &output), 0) << output;
  ASSERT_EQ(syncopate::run_command(run + args + " --test-hook term_after_steps=" +
                                       std::to_string(stop.at) + " --out " + part.string(),
                                   &output),
            4)
      << output;
  EXPECT_NE(output.find(stop.message), std::string::npos) << output;
  EXPECT_NE(output.find("--resume " + partial.string()), std::string::npos) << output;
  const syncopate::Scenario s = syncopate::load_scenario((partial / "scenario.toml").string());
  const auto set = syncopate::read_resume_set(partial.string(), s);
  ASSERT_EQ(set.size(), static_cast<size_t>(s.workers));
  for (const syncopate::WorkerCheckpoint& c : set) {
    EXPECT_EQ(c.next_epoch, stop.epochs) << "worker " << c.worker;
    EXPECT_EQ(c.next_step, stop.step) << "worker " << c.worker;
  }
  ASSERT_EQ(syncopate::run_command(run + "--quiet --resume " + partial.string(), &output), 0)
      << output;
  expect_same_metrics(full, part, time_tolerance);
  EXPECT_EQ(bytes_of(full / "model.bin"), bytes_of(part / "model.bin"));
}

// The test hooks are hidden from --help; a name that is none or a bad number is a usage error.
TEST(TestHook, IsHiddenAndRefusesWhatItDoesNotKnow) {
  std::string output;
  EXPECT_EQ(syncopate::run_command(kBin + " run --help", &output), 0) << output;
  EXPECT_EQ(output.find("test-hook"), std::string::npos) << output;
  EXPECT_EQ(syncopate::run_command(kBin + " run --quiet --test-hook stop_after_epoch=1", &output),
            2);
  EXPECT_NE(output.find("--test-hook stop_after_epoch=1: no hook stop_after_epoch; allowed: "
                        "stop_after_epochs"),
            std::string::npos)
      << output;
  EXPECT_EQ(syncopate::run_command(kBin + " run --quiet --test-hook kill_worker=x", &output), 2);
  EXPECT_NE(output.find("--test-hook kill_worker=x: expected NAME=N"), std::string::npos) << output;
}

// One worker, 38 steps an epoch: it stops at the step it signals after.
TEST(StopSignal, LocalStopsAtTheStepAndResumes) {
  expect_signal_resume_equivalent("term-local", run_args("serial", "local", 1),
                                  {14, 0, 14,
                                   "interrupted after 0 epoch(s) and 14 step(s) of "
                                   "epoch 0; continue with"},
                                  -1);
}

// 4 workers, 10 steps an epoch: rank 0 signals after step 13 of the run; the next step that no
// worker passed is the 14th (epoch 1, step 4). local_sgd's workers run up to 3 steps apart
// between averages, so the latched step is the furthest one's next, still inside epoch 1.
TEST(StopSignal, SimStopsAtTheNextStepAndResumes) {
  expect_signal_resume_equivalent("term-sim-ddp", run_args("ddp", "sim", 4),
                                  {13, 1, 4, "interrupted after 1 epoch(s) and 4 step(s)"}, 1e-12);
  const std::string local_sgd = run_args("local_sgd", "sim", 4);
  const fs::path probe = scratch() / "term-sim-local_sgd-probe";
  fs::remove_all(probe.string() + ".partial");
  std::string output;
  ASSERT_EQ(syncopate::run_command(kBin + " run " + local_sgd +
                                       " --test-hook term_after_steps=13 --out " + probe.string(),
                                   &output),
            4)
      << output;
  const auto set = syncopate::read_resume_set(
      probe.string() + ".partial",
      syncopate::load_scenario(probe.string() + ".partial/scenario.toml"));
  ASSERT_EQ(set.at(0).next_epoch, 1);
  const int64_t step = set.at(0).next_step;
  EXPECT_GE(step, 4);
  EXPECT_LE(step, 7);
  expect_signal_resume_equivalent(
      "term-sim-local_sgd", local_sgd,
      {13, 1, step, "interrupted after 1 epoch(s) and " + std::to_string(step) + " step(s)"},
      1e-12);
}

// The latched step is the last of epoch 0: the stop is at that epoch boundary, with its
// checkpoint.
TEST(StopSignal, SimStopsAtTheEpochsEndWhenThatIsTheNextStep) {
  expect_signal_resume_equivalent("term-sim-end", run_args("ddp", "sim", 4),
                                  {9, 1, 0, "interrupted after 1 epoch(s); continue with"}, 1e-12);
}

// Under mpirun only rank 0 sees the signal (it signals its own process after 13 steps); the ranks
// share one stop latch (backends/mpi/stop_latch.hpp), so rank 1 stops where rank 0 does instead
// of waiting for it in the next collective. ddp at 2 ranks, 19 steps an epoch: rank 1 cannot
// pass step 14 before rank 0 has taken it, so the latched step is the 14th.
TEST(StopSignal, MpiRanksStopAtOneStepWhenOneRankIsSignalled) {
  expect_signal_resume_equivalent("term-mpi-ddp", run_args("ddp", "mpi", 2),
                                  {13, 0, 14, "interrupted after 0 epoch(s) and 14 step(s)"}, -1,
                                  mpirun(2));
}

// The same at an epoch boundary (epoch_sync's block order has no mid-epoch checkpoint): every
// epoch ends with an average, so rank 1 cannot pass the boundary after the one where rank 0 sees
// its signal (inside epoch 0), and both stop after 2 epochs.
TEST(StopSignal, MpiRanksStopAtOneEpochWhenOneRankIsSignalled) {
  const std::string args = kScenario +
                           " --quiet --backend mpi --strategy epoch_sync --workers 2 --epochs 4"
                           " --set data.blocks=6";
  expect_signal_resume_equivalent(
      "term-mpi-epoch_sync", args,
      {13, 2, 0, "interrupted after 2 epoch(s) (at the end of an epoch"}, -1, mpirun(2));
}

// Where a checkpoint inside an epoch cannot be restored (epoch_async; the block order; cost-only
// fast-forward), the signal stops the run at an epoch boundary and the message says why.
TEST(StopSignal, EpochAsyncStopsAtAnEpochBoundaryAndSaysWhy) {
  expect_signal_resume_equivalent(
      "term-sim-async", run_args("epoch_async", "sim", 4),
      {13, 3, 0,
       "(at the end of an epoch, not of a step: epoch_async's global model between merges is in "
       "no worker's checkpoint)"},
      1e-12);
}

}  // namespace

namespace {

// checkpoint.every_steps: a run stopped at a mid-epoch checkpoint (after `stop_steps` steps, inside
// an epoch) and resumed ends as the uninterrupted run.
void expect_mid_epoch_resume_equivalent(const std::string& name, const std::string& args,
                                        const std::string& launcher, int stop_steps,
                                        double time_tolerance) {
  const fs::path full = scratch() / (name + "-full"), part = scratch() / (name + "-part");
  const fs::path partial = part.string() + ".partial";
  for (const fs::path& p : {full, part, partial}) fs::remove_all(p);
  const std::string run =
      launcher + " " + kBin + " run " + args + " --set checkpoint.every_steps=4";
  std::string output;
  ASSERT_EQ(syncopate::run_command(run + " --out " + full.string(), &output), 0) << output;
  ASSERT_EQ(syncopate::run_command(run + " --test-hook stop_after_steps=" +
                                       std::to_string(stop_steps) + " --out " + part.string(),
                                   &output),
            4)
      << output;
  // Stopped inside an epoch: its rows so far are not in the metrics, its checkpoint is.
  const auto finished = syncopate::read_metrics_csv((partial / "metrics.csv").string());
  const auto all = syncopate::read_metrics_csv((full / "metrics.csv").string());
  EXPECT_LT(finished.size(), all.size());
  const syncopate::Scenario s = syncopate::load_scenario((partial / "scenario.toml").string());
  const auto set = syncopate::read_resume_set(partial.string(), s);
  EXPECT_GT(set.at(0).next_step, 0);  // what resumes is the mid-epoch checkpoint
  ASSERT_EQ(syncopate::run_command(
                launcher + " " + kBin + " run --quiet --resume " + partial.string(), &output),
            0)
      << output;
  expect_same_metrics(full, part, time_tolerance);
  EXPECT_EQ(bytes_of(full / "model.bin"), bytes_of(part / "model.bin"));
}

class SimMidEpochResume : public ::testing::TestWithParam<const char*> {};

// 600 samples, batch 16: 10 steps an epoch at 4 workers; stopped at epoch 1's step 4.
TEST_P(SimMidEpochResume, EndsAsTheUninterruptedRun) {
  const std::string strategy = GetParam();
  expect_mid_epoch_resume_equivalent("mid-sim-" + strategy, run_args(strategy, "sim", 4), "", 14,
                                     1e-12);
}

INSTANTIATE_TEST_SUITE_P(Strategies, SimMidEpochResume,
                         ::testing::Values("ddp", "local_sgd", "hierarchical", "diloco", "zero"));

TEST(PowerSgdMidEpochResume, EndsAsTheUninterruptedRunOnSim) {
  const std::string args = run_args("ddp", "sim", 4) + " --set strategy.compression=powersgd";
  expect_mid_epoch_resume_equivalent("mid-sim-powersgd", args, "", 14, 1e-12);
}

// zero in a 16-bit wire format: the gathered model is rounded, so the checkpoint holds the fp32
// master shards too (without them the resumed run steps rounded weights and ends elsewhere).
TEST(ZeroFp16Resume, EndsAsTheUninterruptedRunOnSim) {
  const std::string args = run_args("zero", "sim", 4) + " --set strategy.compression=fp16";
  expect_resume_equivalent("sim-zero-fp16", args, "", 2, 1e-12);
  expect_mid_epoch_resume_equivalent("mid-sim-zero-fp16", args, "", 14, 1e-12);
}

// zero stage 3: inside an epoch the model holds each unit as gathered before the last step (or,
// as here with strategy.give_back_memory, zeros for the units given back), so the checkpoint
// holds the master shard (a resume from the model's blocks lost a step).
TEST(ZeroStage3Resume, EndsAsTheUninterruptedRunOnSim) {
  const std::string args =
      run_args("zero", "sim", 4) + " --set strategy.stage=3 --set strategy.give_back_memory=true";
  expect_resume_equivalent("sim-zero-3", args, "", 2, 1e-12);
  expect_mid_epoch_resume_equivalent("mid-sim-zero-3", args, "", 14, 1e-12);
}

// 38 steps an epoch at one worker: stopped at epoch 0's step 16.
TEST(LocalMidEpochResume, EndsAsTheUninterruptedRun) {
  expect_mid_epoch_resume_equivalent("mid-local", run_args("serial", "local", 1), "", 14, -1);
}

// 19 steps an epoch at 2 ranks: stopped at epoch 0's step 16.
TEST(MpiMidEpochResume, EndsAsTheUninterruptedRun) {
  expect_mid_epoch_resume_equivalent("mid-mpi-ddp", run_args("ddp", "mpi", 2), mpirun(2), 14, -1);
}

// A mid-epoch checkpoint does not resume at another worker count.
TEST(MidEpochResume, RefusesAnotherWorkerCount) {
  const fs::path out = scratch() / "mid-resize";
  fs::remove_all(out.string() + ".partial");
  std::string output;
  ASSERT_EQ(syncopate::run_command(kBin + " run --test-hook stop_after_steps=14 " +
                                       run_args("local_sgd", "sim", 4) +
                                       " --set checkpoint.every_steps=4 --out " + out.string(),
                                   &output),
            4)
      << output;
  EXPECT_EQ(syncopate::run_command(
                kBin + " run --quiet --resume " + out.string() + ".partial --workers 2", &output),
            1);
  EXPECT_NE(output.find("needs a checkpoint at an epoch boundary; the latest one is inside epoch "
                        "1 (after step 4)"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace checkpoint_test
