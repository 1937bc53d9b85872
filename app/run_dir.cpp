// Run directories chosen before training: checkpointed runs, resumes and interrupted runs.
#include "app/run_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "app/restart.hpp"
#include "core/base/check.hpp"
#include "core/train/rescale.hpp"

namespace syncopate::app {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPartial = ".partial";

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw UserError(path.string() + ": cannot write");
}

}  // namespace

void open_run_dir(RunTarget& target, const Scenario& scenario) {
  target.dir = unique_run_dir(target.requested);
  target.plan.dir = target.dir + std::string(kPartial);
  fs::create_directories(target.plan.dir);
  write_text(fs::path(target.plan.dir) / "scenario.toml", scenario.resolved_toml);
  write_text(fs::path(target.plan.dir) / "INCOMPLETE",
             "This run has not finished. Its finished epochs are in epochs/; with "
             "checkpoint.every > 0, continue it from its last checkpoint with: syncopate run "
             "--resume " +
                 target.plan.dir + "\n");
}

Scenario open_resumed_run(const std::string& given, RunTarget& target, std::optional<int> workers) {
  std::string dir = given;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.ends_with(kPartial)) dir.resize(dir.size() - kPartial.size());
  const fs::path partial = dir + std::string(kPartial);
  if (!fs::is_directory(partial)) {
    if (fs::exists(fs::path(dir) / "summary.json"))
      throw UserError("--resume " + given + ": " + dir + " is a complete run; nothing to resume");
    throw UserError("--resume " + given + ": no " + partial.string() + " to resume");
  }
  // A job relaunched after a fault before its first checkpoint set starts from the beginning.
  const bool checkpointed = fs::is_directory(partial / "checkpoint");
  if (!checkpointed && !fs::exists(partial / "restarts.json"))
    throw UserError("--resume " + given + ": " + partial.string() +
                    " holds no checkpoint/ (the run stopped before its first checkpoint)");
  if (fs::exists(dir))
    throw UserError("--resume " + given + ": " + dir + " exists; not overwriting it");
  const std::string saved = (partial / "scenario.toml").string();
  Scenario scenario = load_scenario(saved);
  if (workers && *workers != scenario.workers) {
    const int from = scenario.workers;
    scenario = load_scenario(saved, {"workers=" + std::to_string(*workers)});
    check_resizable(scenario, from);
  }
  target.dir = dir;
  target.requested = dir;
  target.plan.dir = partial.string();
  target.plan.every = scenario.checkpoint.every;
  target.plan.every_steps = scenario.checkpoint.every_steps;
  target.plan.resume = checkpointed;
  apply_restarts(target);
  return scenario;
}

std::string write_interrupted(const RunTarget& target, const Scenario& scenario,
                              const std::vector<WorkerReport>& reports) {
  const fs::path partial(target.plan.dir);
  write_text(partial / "metrics.csv", metrics_csv(reports));
  int epochs = 0;  // a resized run's worker 0 holds the rows of workers that are gone
  int64_t step = 0;
  for (const WorkerReport& r : reports) {
    for (const EpochMetrics& e : r.epochs) epochs = std::max(epochs, e.epoch + 1);
    step = std::max(step, r.stopped_at_step);
  }
  std::string where = "interrupted after " + std::to_string(epochs) + " epoch(s)";
  if (step > 0)
    where += " and " + std::to_string(step) + " step(s) of epoch " + std::to_string(epochs);
  // A signal stops at the next step boundary where a mid-epoch checkpoint can be restored.
  if (const std::string why = mid_epoch_checkpoint_refusal(scenario);
      stop_signalled() && !why.empty())
    where += " (at the end of an epoch, not of a step: " + why + ")";
  const std::string message = where + "; continue with: syncopate run --resume " + partial.string();
  write_text(partial / "INCOMPLETE", message + "\n");
  return message;
}

void drop_checkpoints(const RunTarget& target) {
  if (target.plan.dir.empty()) return;
  fs::remove_all(fs::path(target.plan.dir) / "checkpoint");
  fs::remove_all(fs::path(target.plan.dir) / "epochs");
  for (const char* note : {"INCOMPLETE", "restarts.json", "fault.json", "ERROR"})
    fs::remove(fs::path(target.plan.dir) / note);
}

}  // namespace syncopate::app
