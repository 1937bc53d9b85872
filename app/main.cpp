// syncopate: train a scenario on one of the backends and write its run directory.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "app/calibrate.hpp"
#include "app/check.hpp"
#include "app/collectives.hpp"
#include "app/commands.hpp"
#include "app/compare.hpp"
#include "app/model_info.hpp"
#include "app/preflight.hpp"
#include "app/process.hpp"
#include "app/progress.hpp"
#include "app/restart.hpp"
#include "app/sweep.hpp"
#include "core/base/check.hpp"
#include "core/base/data_dir.hpp"
#include "core/nn/model.hpp"
#include "core/tensor/gemm.hpp"

namespace syncopate::app {
namespace {

struct RunOptions {
  std::string scenario_path;
  std::vector<std::string> sets;
  std::string out;
  std::optional<int> workers, epochs;
  std::optional<uint64_t> seed;
  std::optional<std::string> strategy, backend, platform, fidelity;
  bool print_scenario = false;
  bool quiet = false;
  std::string resume;                   // DIR or DIR.partial of a checkpointed run
  std::vector<std::string> test_hooks;  // --test-hook NAME=N (hidden; test_hooks_into)
};

Scenario resolve(const RunOptions& o) {
  // Plain flags are shorthands for --set and win over it (they come last).
  std::vector<std::string> sets = o.sets;
  if (o.workers) sets.push_back("workers=" + std::to_string(*o.workers));
  if (o.epochs) sets.push_back("epochs=" + std::to_string(*o.epochs));
  if (o.seed) sets.push_back("seed=" + std::to_string(*o.seed));
  if (o.strategy) sets.push_back("strategy.name=\"" + *o.strategy + "\"");
  if (o.backend) sets.push_back("backend=\"" + *o.backend + "\"");
  if (o.platform) sets.push_back("sim.platform=\"" + *o.platform + "\"");
  if (o.fidelity) sets.push_back("sim.fidelity=\"" + *o.fidelity + "\"");
  return o.scenario_path.empty()
             ? parse_scenario(default_scenario_text(), "<embedded default scenario>", sets)
             : load_scenario(find_scenario(o.scenario_path), sets);
}

void print_summary(const RunSummary& s, const std::string& dir) {
  std::printf("%s: %d worker(s), %d epoch(s), strategy %s%s%s\n", s.backend.c_str(), s.workers,
              s.epochs, s.strategy.c_str(), s.platform.empty() ? "" : ", platform ",
              s.platform.c_str());
  if (s.final_test_accuracy >= 0) std::printf("final test accuracy  %.4f\n", s.final_test_accuracy);
  const RegressionMetrics& e = s.final_test_errors;
  if (e.mse == e.mse)  // regression: in the targets' units
    std::printf("final test errors    MSE %.6g, MAE %.6g, R2 %.4f, Pearson r %.4f\n", e.mse, e.mae,
                e.r2, e.pearson);
  std::printf("training time        %.6g s (%s)\n", s.total_time_s,
              s.backend == "sim" ? "simulated" : "measured");
  std::printf("compute / comm / idle %.6g / %.6g / %.6g s (summed over workers)\n",
              s.compute_time_s, s.comm_time_s, s.idle_time_s);
  std::printf("bytes sent           %llu\n", static_cast<unsigned long long>(s.bytes_sent));
  std::printf("run directory        %s\n", dir.c_str());
}

RunResult train(const Scenario& scenario, int* argc, char*** argv, const ProgressFn& progress,
                RunTarget& target) {
  switch (scenario.backend) {
    case BackendKind::kLocal:
      return run_local(scenario, progress, target);
    case BackendKind::kSim:
      return run_sim(scenario, progress, target);
    case BackendKind::kMpi:
      return run_mpi(scenario, argc, argv, progress, target);
  }
  throw InternalError("unknown backend");
}

// `--resume DIR`: the scenario of DIR.partial, which takes no other scenario or override than
// --workers (resuming at another worker count, rescale.hpp).
Scenario resumed(const RunOptions& o, RunTarget& target) {
  if (!o.scenario_path.empty() || !o.sets.empty() || !o.out.empty() || o.epochs || o.seed ||
      o.strategy || o.backend || o.platform || o.fidelity)
    throw UsageError("--resume " + o.resume +
                     ": the run continues its own scenario (DIR.partial/scenario.toml); give no "
                     "scenario, --set, --out or scenario flag with it but --workers");
  return open_resumed_run(o.resume, target, o.workers);
}

// The hidden `--test-hook NAME=N` options (not in --help; for the tests of stops and kills):
// stop_after_epochs=N stops a run after N epochs as an interrupted run, stop_after_steps=N at
// its first mid-epoch checkpoint after N steps; kill_after_epochs=N with kill_worker=w kills
// worker w's process with SIGKILL then; term_after_steps=N makes rank 0 send its process
// SIGTERM after N steps of the run. Throws UsageError on another name or a bad number.
void test_hooks_into(const std::vector<std::string>& hooks, CheckpointPlan& plan) {
  for (const std::string& hook : hooks) {
    const auto bad = [&] {
      return UsageError("--test-hook " + hook +
                        ": expected NAME=N with N a whole number from 0 to 2^31-1");
    };
    const size_t eq = hook.find('=');
    if (eq == std::string::npos) throw bad();
    const std::string name = hook.substr(0, eq);
    int64_t value = 0;
    const char* end = hook.data() + hook.size();
    const auto [at, error] = std::from_chars(hook.data() + eq + 1, end, value);
    if (error != std::errc() || at != end || value < 0 || value > INT32_MAX) throw bad();
    if (name == "stop_after_epochs")
      plan.stop_after_epochs = static_cast<int>(value);
    else if (name == "stop_after_steps")
      plan.stop_after_steps = value;
    else if (name == "kill_after_epochs")
      plan.kill_after_epochs = static_cast<int>(value);
    else if (name == "kill_worker")
      plan.kill_worker = static_cast<int>(value);
    else if (name == "term_after_steps")
      plan.term_after_steps = value;
    else
      throw UsageError("--test-hook " + hook + ": no hook " + name +
                       "; allowed: stop_after_epochs, stop_after_steps, kill_after_epochs, "
                       "kill_worker, term_after_steps");
  }
}

int run(RunOptions& o, int* argc, char*** argv) {
  RunTarget target;
  test_hooks_into(o.test_hooks, target.plan);
  const Scenario scenario = o.resume.empty() ? resolve(o) : resumed(o, target);
  if (o.print_scenario) {
    const auto model = make_model(scenario.model.spec(), Storage::kShapeOnly);
    std::cout << print_scenario(scenario, model->num_params());
    return 0;
  }
  // The directory is chosen before training so that a failure can leave its notes there.
  if (o.resume.empty()) {
    target.requested = o.out.empty() ? "runs/" + scenario.name : o.out;
    check_run_dir(target.requested, o.out.empty() ? "the run directory" : "--out");
    target.plan.every = scenario.checkpoint.every;
    target.plan.every_steps = scenario.checkpoint.every_steps;
  }
  check_model_and_data(scenario);
  gemm_kernel();  // a bad SYNCOPATE_GEMM_KERNEL is refused here, before anything is written
  // On MPI rank 0 chooses it, once MPI runs.
  if (target.dir.empty() && scenario.backend != BackendKind::kMpi) open_run_dir(target, scenario);
  install_stop_signals();
  RunResult result;
  try {
    ProgressLine line(ProgressLine::style_for_stdout(o.quiet),
                      scenario.backend == BackendKind::kSim);
    result = train(scenario, argc, argv, line.callback(), target);
  } catch (const FaultAbort& e) {  // a simulated fault ended the job: the run is incomplete
    restart_after_fault(scenario, target, e.record(), o.quiet, (*argv)[0]);  // if it restarts
    const std::string dir = target.dir.empty() ? unique_run_dir(target.requested) : target.dir;
    write_failure(dir, e.what());
    write_fault_record(dir, e.record());
    std::fprintf(stderr, "syncopate: aborted: %s\n", e.what());
    return kExitInterrupted;
  } catch (const std::exception& e) {
    write_failure(target.dir.empty() ? unique_run_dir(target.requested) : target.dir, e.what());
    throw;
  }
  if (!result.writes_output) return result.interrupted ? kExitInterrupted : result.exit_code;
  if (result.interrupted) {
    std::fprintf(stderr, "syncopate: %s\n",
                 write_interrupted(target, scenario, result.reports).c_str());
    return kExitInterrupted;
  }
  result.info.restarts = target.restarts;
  drop_checkpoints(target);
  const std::string dir =
      write_run_dir(target.dir.empty() ? unique_run_dir(target.requested) : target.dir, scenario,
                    result.reports, result.info);
  print_summary(summarize(scenario, result.reports, result.info), dir);
  return 0;
}

// The sweep's grid from its options: --strategy, --workers, then each --set key=v1,v2 in order.
struct SweepCli {
  SweepOptions options;
  std::string strategies, workers;
  std::vector<std::string> grid_sets;
  std::string emit;
};

// `syncopate report`: analysis/report.py (Python, matplotlib) with Debian's interpreter.
int report(const std::string& dir, const std::string& out, const std::string& baseline) {
  const std::string script = data_path("analysis") + "/report.py";
  const char* python = "/usr/bin/python3";
  std::vector<std::string> words = {python, script, dir};
  if (!out.empty()) words.insert(words.end(), {"--out", out});
  if (!baseline.empty()) words.insert(words.end(), {"--baseline", baseline});
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execv(python, argv.data());
  throw UserError(std::string("report: cannot run ") + python + " " + script + ": " +
                  std::strerror(errno) + " (it needs python3-matplotlib)");
}

int sweep(SweepCli& c, const char* argv0) {
  SweepOptions& o = c.options;
  o.self_exe = self_executable(argv0);
  if (!c.emit.empty() && c.emit != "slurm")
    throw UsageError("sweep: --emit " + c.emit + ": unknown; allowed: slurm");
  o.emit_slurm = c.emit == "slurm";
  if (!c.strategies.empty())
    o.axes.push_back({"strategy.name", "strategy", split_values(c.strategies, "--strategy")});
  if (!c.workers.empty())
    o.axes.push_back({"workers", "workers", split_values(c.workers, "--workers")});
  for (const std::string& set : c.grid_sets) {
    const size_t eq = set.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("sweep: --set " + set + ": expected key=v1,v2,...");
    const std::string key = set.substr(0, eq);
    const auto values = split_values(set.substr(eq + 1), "--set " + key);
    if (values.size() == 1)
      o.sets.push_back(set);  // one value: applies to every point
    else
      o.axes.push_back({key, key, values});
  }
  return run_sweep(o);
}

// Every subcommand's options; the subcommands themselves, once declared.
struct Commands {
  RunOptions run;
  SweepCli sweep;
  std::string report_dir, report_out, report_baseline;
  CheckOptions check;
  ModelOptions model;
  std::string tolerance = "1%";
  CompareOptions compare;
  std::string compare_tolerance = "10%";
  CalibrateOptions calibrate;
  CollectivesOptions collectives;
  CLI::App* collectives_cmd = nullptr;
  CLI::App *sweep_cmd = nullptr, *report_cmd = nullptr, *check_cmd = nullptr,
           *compare_cmd = nullptr, *model_cmd = nullptr, *calibrate_cmd = nullptr;
};

void declare_run(CLI::App& cli, RunOptions& o) {
  CLI::App* run = cli.add_subcommand("run", "train a scenario and write its run directory");
  run->add_option("scenario", o.scenario_path,
                  "scenario TOML file or shipped scenario name (default: embedded scenario)");
  run->add_option("--set", o.sets, "override a scenario key: key.path=value (repeatable)");
  run->add_option("--out", o.out, "run directory (default runs/<name>; never overwritten)");
  run->add_option("--workers", o.workers, "number of workers");
  run->add_option("--epochs", o.epochs, "number of epochs");
  run->add_option("--seed", o.seed, "random seed");
  run->add_option("--strategy", o.strategy, names_in(kStrategyNames));
  run->add_option("--backend", o.backend, names_in(kBackendNames));
  run->add_option("--platform", o.platform, "simulated platform (name or file)");
  run->add_option("--fidelity", o.fidelity, "simulation fidelity: " + names_in(kFidelityNames));
  run->add_flag("--print-scenario", o.print_scenario, "print the resolved scenario and exit");
  run->add_flag("--quiet", o.quiet, "no progress line");
  run->add_option("--resume", o.resume,
                  "continue the checkpointed run in DIR.partial (DIR or DIR.partial); with "
                  "--workers at another worker count (epoch_sync, epoch_async, local_sgd)");
  run->add_option("--test-hook", o.test_hooks, "NAME=N: a stop or kill for tests")
      ->allow_extra_args(false)
      ->group("");  // hidden: see test_hooks_into
}

CLI::App* declare_sweep(CLI::App& cli, SweepCli& sw) {
  CLI::App* sweep = cli.add_subcommand(
      "sweep", "run the cross product of scenario settings, one run directory per point");
  sweep->add_option("scenario", sw.options.scenario_path, "scenario TOML file");
  sweep->add_option("--strategy", sw.strategies, "strategies, comma-separated");
  sweep->add_option("--workers", sw.workers, "worker counts, comma-separated");
  sweep->add_option("--set", sw.grid_sets,
                    "key=v1,v2,...: an axis of the grid (one value: set for every point)");
  sweep->add_option("--jobs", sw.options.jobs, "points run at once (default: one per core)");
  sweep->add_option("--out", sw.options.out, "the sweep directory");
  sweep->add_option("--emit", sw.emit, "slurm: write a Slurm job-array script instead of running");
  sweep->add_option("--collect", sw.options.collect, "only build DIR/sweep.csv from its runs");
  sweep->add_flag("--quiet", sw.options.quiet, "no progress lines");
  return sweep;
}

CLI::App* declare_report(CLI::App& cli, Commands& c) {
  CLI::App* report =
      cli.add_subcommand("report", "report.md and PNG plots for a run or sweep directory");
  report->add_option("dir", c.report_dir, "a run directory or a sweep directory")->required();
  report->add_option("--out", c.report_out, "where report.md and the plots go (default: DIR)");
  report->add_option("--baseline", c.report_baseline,
                     "a fault-free run of the same scenario: the time and accuracy lost to faults");
  return report;
}

CLI::App* declare_check(CLI::App& cli, Commands& c) {
  CLI::App* check = cli.add_subcommand(
      "check", "the communication-cost gate: scenarios cost-only on the simulator vs a baseline");
  check->add_option("scenarios", c.check.scenarios, "scenario TOML files")->required();
  check->add_option("--baseline", c.check.baseline, "baseline file (TOML)")->required();
  check->add_option("--tolerance", c.tolerance, "relative growth allowed, e.g. 1% (default)");
  check->add_flag("--update", c.check.update, "write this run's figures into the baseline");
  check->add_option("--set", c.check.sets, "override a key in every scenario: key.path=value");
  return check;
}

CLI::App* declare_compare(CLI::App& cli, Commands& c) {
  CLI::App* compare = cli.add_subcommand(
      "compare", "two runs of one scenario per epoch and phase: A predicted vs B measured");
  compare->add_option("run_a", c.compare.run_a, "run directory A (predicted, e.g. simulated)")
      ->required();
  compare->add_option("run_b", c.compare.run_b, "run directory B (measured: the reference)")
      ->required();
  compare->add_option("--tolerance", c.compare_tolerance,
                      "error allowed, of B's time of the same epoch, e.g. 10% (default)");
  compare->add_option("--out", c.compare.out, "folder for compare.json (default: RUN_B)");
  return compare;
}

// calibrate's --steady-spread: a p90 / p10, so a number from 1 to 1e6 (CLI::Range lets NaN by).
const CLI::Validator kSpreadThreshold(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (end != text.c_str() && *end == '\0' && value >= 1 && value <= 1e6) return "";
      return "Value " + text + " is not a number from 1 to 1e6 (p90 / p10)";
    },
    "NUMBER >= 1");

CLI::App* declare_calibrate(CLI::App& cli, CalibrateOptions& o) {
  CLI::App* calibrate = cli.add_subcommand(
      "calibrate",
      "under mpirun: measure this host's compute and MPI, write a profile and platform");
  calibrate->add_option("scenario", o.scenario_path,
                        "scenario whose model and batch are timed (default: embedded scenario)");
  calibrate->add_option("--set", o.sets, "override a scenario key: key.path=value (repeatable)");
  calibrate->add_option("--out", o.out, "the platform recipe (its profile: DIR/profiles/)")
      ->required();
  calibrate->add_option("--repeats", o.repeats, "samples per figure and rank (default 30)")
      ->check(CLI::Range(3, 100000));
  calibrate
      ->add_option("--steady-spread", o.steady_spread,
                   "warn when a step's timed parts spread wider than this from p10 to p90 "
                   "(default 1.5; 1: whenever they differ)")
      ->check(kSpreadThreshold);
  return calibrate;
}

CLI::App* declare_collectives(CLI::App& cli, CollectivesOptions& o) {
  CLI::App* collectives = cli.add_subcommand(
      "collectives",
      "time allreduce, broadcast and allgather over sizes: simulated, or measured under mpirun");
  collectives->add_option("scenario", o.scenario_path,
                          "scenario naming the platform and fidelity (default: embedded)");
  collectives->add_option("--set", o.sets, "override a scenario key: key.path=value (repeatable)");
  collectives->add_option("--backend", o.backend, "sim (predicted) or mpi (measured)");
  collectives->add_option("--workers", o.workers, "simulated ranks (mpi: mpirun -np decides)");
  collectives->add_option("--sizes", o.sizes, "MIN:MAX, by factors of 4 (default 4KiB:64MiB)");
  collectives->add_option("--ops", o.ops,
                          "comma-separated (default allreduce,broadcast,allgather)");
  collectives->add_option("--wire", o.wire,
                          "fp32, fp16 or bf16: what allreduce and allgather send (default fp32)");
  collectives->add_option("--repeats", o.repeats, "timed repeats per point (default 10)")
      ->check(CLI::Range(1, 100000));
  collectives->add_option("--out", o.out, "the CSV file")->required();
  return collectives;
}

void declare(CLI::App& cli, Commands& c) {
  cli.require_subcommand(1);
  declare_run(cli, c.run);
  c.sweep_cmd = declare_sweep(cli, c.sweep);
  c.report_cmd = declare_report(cli, c);
  c.check_cmd = declare_check(cli, c);
  c.compare_cmd = declare_compare(cli, c);
  c.model_cmd = declare_model(cli, c.model);
  c.calibrate_cmd = declare_calibrate(cli, c.calibrate);
  c.collectives_cmd = declare_collectives(cli, c.collectives);
}

// Runs the parsed subcommand; errors become exit codes: 2 usage, 1 user error, 3 internal.
int dispatch(Commands& c, int* argc, char*** argv) {
  try {
    if (c.sweep_cmd->parsed()) return sweep(c.sweep, (*argv)[0]);
    if (c.report_cmd->parsed()) return report(c.report_dir, c.report_out, c.report_baseline);
    if (c.model_cmd->parsed()) return run_model(c.model);
    if (c.check_cmd->parsed()) {
      c.check.tolerance = parse_tolerance(c.tolerance);
      c.check.self_exe = self_executable((*argv)[0]);
      return run_check(c.check);
    }
    if (c.compare_cmd->parsed()) {
      c.compare.tolerance = parse_tolerance(c.compare_tolerance, "compare");
      return run_compare(c.compare);
    }
    if (c.calibrate_cmd->parsed()) {
      for (int i = 0; i < *argc; ++i)
        c.calibrate.command_line += (i ? " " : "") + std::string((*argv)[i]);
      return run_calibrate(c.calibrate, argc, argv);
    }
    if (c.collectives_cmd->parsed()) return run_collectives(c.collectives, argc, argv);
    return run(c.run, argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "syncopate: error: %s\n", e.what());
    return 2;
  } catch (const UserError& e) {
    std::fprintf(stderr, "syncopate: error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be made or written (read-only, a file in the way, ...).
    std::fprintf(stderr, "syncopate: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "syncopate: error: out of memory: the scenario asks for more than this machine "
                 "has (data.train_samples, the model, workers)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "syncopate: internal error: %s\n", e.what());
    return 3;
  }
}

}  // namespace
}  // namespace syncopate::app

int main(int argc, char** argv) {
  CLI::App cli{"syncopate: data-parallel training strategies on simulated and real clusters"};
  syncopate::app::Commands commands;
  syncopate::app::declare(cli, commands);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;  // --help is a success; any other parse error is usage
  }
  return syncopate::app::dispatch(commands, &argc, &argv);
}
