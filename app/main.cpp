// syncopate: train a scenario on one of the backends and write its run directory.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "app/commands.hpp"
#include "core/base/check.hpp"
#include "core/base/data_dir.hpp"

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
  std::printf("training time        %.6g s (%s)\n", s.total_time_s,
              s.backend == "sim" ? "simulated" : "measured");
  std::printf("compute / comm / idle %.6g / %.6g / %.6g s (summed over workers)\n",
              s.compute_time_s, s.comm_time_s, s.idle_time_s);
  std::printf("bytes sent           %llu\n", static_cast<unsigned long long>(s.bytes_sent));
  std::printf("run directory        %s\n", dir.c_str());
}

int run(RunOptions& o, int* argc, char*** argv) {
  const Scenario scenario = resolve(o);
  if (o.print_scenario) {
    std::cout << scenario.resolved_toml << "\n";
    return 0;
  }
  // The directory is chosen before training so that a failure can leave its notes there.
  const std::string requested = o.out.empty() ? "runs/" + scenario.name : o.out;
  RunResult result;
  try {
    switch (scenario.backend) {
      case BackendKind::kLocal:
        result = run_local(scenario);
        break;
      case BackendKind::kSim:
        result = run_sim(scenario);
        break;
      case BackendKind::kMpi:
        result = run_mpi(scenario, argc, argv);
        break;
    }
  } catch (const std::exception& e) {
    write_failure(unique_run_dir(requested), e.what());
    throw;
  }
  if (!result.writes_output) return result.exit_code;
  const std::string dir =
      write_run_dir(unique_run_dir(requested), scenario, result.reports, result.info);
  print_summary(summarize(scenario, result.reports, result.info), dir);
  return 0;
}

}  // namespace
}  // namespace syncopate::app

int main(int argc, char** argv) {
  using namespace syncopate;
  CLI::App cli{"syncopate: data-parallel training strategies on simulated and real clusters"};
  cli.require_subcommand(1);
  app::RunOptions o;
  CLI::App* run = cli.add_subcommand("run", "train a scenario and write its run directory");
  run->add_option("scenario", o.scenario_path,
                  "scenario TOML file or shipped scenario name (default: embedded scenario)");
  run->add_option("--set", o.sets, "override a scenario key: key.path=value (repeatable)");
  run->add_option("--out", o.out, "run directory (default runs/<name>; never overwritten)");
  run->add_option("--workers", o.workers, "number of workers");
  run->add_option("--epochs", o.epochs, "number of epochs");
  run->add_option("--seed", o.seed, "random seed");
  run->add_option("--strategy", o.strategy,
                  "serial | ddp | epoch_sync | epoch_async | local_sgd | hierarchical");
  run->add_option("--backend", o.backend, "local | sim | mpi");
  run->add_option("--platform", o.platform, "simulated platform (name or file)");
  run->add_option("--fidelity", o.fidelity, "simulation fidelity: message | flow | analytic");
  run->add_flag("--print-scenario", o.print_scenario, "print the resolved scenario and exit");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }
  try {
    return app::run(o, &argc, &argv);
  } catch (const UserError& e) {
    std::fprintf(stderr, "syncopate: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "syncopate: internal error: %s\n", e.what());
    return 3;
  }
}
