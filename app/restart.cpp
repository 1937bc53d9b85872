// The simulator's restart after a fault: restarts.json, and the relaunch of this program.
#include "app/restart.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/process.hpp"
#include "core/base/check.hpp"
#include "core/train/checkpoint.hpp"

namespace syncopate::app {
namespace {

namespace fs = std::filesystem;
using OrderedJson = nlohmann::ordered_json;

fs::path restarts_path(const std::string& partial) { return fs::path(partial) / "restarts.json"; }

// A host or link failure: the faults that abort a job.
bool is_failure(const SimFault& f) {
  return f.kind == FaultKind::kHostFailure || f.kind == FaultKind::kLinkFailure;
}

double date_of(const SimFault& f) { return f.kind == FaultKind::kHostFailure ? f.at_s : f.from_s; }

}  // namespace

std::optional<double> checkpoint_set_date(const std::string& partial, const Scenario& scenario) {
  if (!has_checkpoints(partial, scenario.workers)) return std::nullopt;
  double date = 0;
  for (const WorkerCheckpoint& c : read_resume_set(partial, scenario))
    date = std::max(date, c.clock.at(0));
  return date;
}

std::vector<FaultRestart> read_restarts(const std::string& partial) {
  const fs::path path = restarts_path(partial);
  std::vector<FaultRestart> restarts;
  if (!fs::exists(path)) return restarts;
  std::ifstream in(path);
  try {
    const OrderedJson j = OrderedJson::parse(in);
    for (const OrderedJson& r : j.at("restarts"))
      restarts.push_back({.kind = r.at("kind").get<std::string>(),
                          .worker = r.value("worker", -1),
                          .link = r.value("link", std::string()),
                          .at_s = r.at("at_s").get<double>(),
                          .resumed_from_s = r.at("resumed_from_s").get<double>(),
                          .lost_seconds = r.at("lost_seconds").get<double>(),
                          .recovery_s = r.at("recovery_s").get<double>()});
  } catch (const OrderedJson::exception& e) {
    throw UserError(path.string() + ": not a restart record (" + e.what() + ")");
  }
  return restarts;
}

void write_restarts(const std::string& partial, const std::vector<FaultRestart>& restarts) {
  write_atomically(restarts_path(partial), restarts_json(restarts) + "\n");
}

std::vector<SimFault> faults_to_come(const std::vector<SimFault>& faults, double after_s) {
  std::vector<SimFault> to_come;
  for (const SimFault& f : faults)
    if (!is_failure(f) || date_of(f) > after_s) to_come.push_back(f);
  return to_come;
}

void restart_after_fault(const Scenario& scenario, const RunTarget& target,
                         const FaultRecord& fault, bool quiet, const char* argv0) {
  if (scenario.sim.restart_recovery_s < 0 || target.plan.dir.empty()) return;
  std::vector<FaultRestart> restarts = read_restarts(target.plan.dir);
  SYNC_CHECK(restarts.empty() || fault.at_s > restarts.back().restart_s(),
             "a fault at t=" << fault.at_s << " s before the relaunch at t="
                             << restarts.back().restart_s() << " s");
  const std::optional<double> from = checkpoint_set_date(target.plan.dir, scenario);
  const double worked_from =
      std::max(from.value_or(0), restarts.empty() ? 0 : restarts.back().restart_s());
  restarts.push_back({.kind = fault.kind,
                      .worker = fault.worker,
                      .link = fault.link,
                      .at_s = fault.at_s,
                      .resumed_from_s = from.value_or(0),
                      .lost_seconds = fault.at_s - worked_from,
                      .recovery_s = scenario.sim.restart_recovery_s});
  const FaultRestart& restart = restarts.back();
  if (!from) {  // from the start: nothing of this attempt is kept
    fs::remove_all(fs::path(target.plan.dir) / "checkpoint");
    fs::remove_all(fs::path(target.plan.dir) / "epochs");
  }
  write_restarts(target.plan.dir, restarts);
  std::ostringstream note;
  note << "syncopate: fault: " << fault.kind << " at t=" << fault.at_s
       << " s; restarting at t=" << restart.restart_s()
       << " s (sim.restart.recovery_s = " << restart.recovery_s << ") from "
       << (from ? "the checkpoint set of t=" + std::to_string(*from) + " s" : "the start")
       << ", losing " << restart.lost_seconds << " s of work (restart " << restarts.size() << ")\n";
  std::fputs(note.str().c_str(), stderr);
  std::vector<std::string> words = {self_executable(argv0), "run", "--resume", target.plan.dir};
  if (quiet) words.emplace_back("--quiet");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execv(argv[0], argv.data());
  throw UserError("cannot relaunch " + words[0] + " after the fault: " + std::strerror(errno));
}

void apply_restarts(RunTarget& target) {
  target.restarts = read_restarts(target.plan.dir);
  if (!target.restarts.empty()) {
    target.plan.start_s = target.restarts.back().restart_s();
    target.replayed_after_s = target.restarts.back().restart_s();
  }
  // `--resume` of a job that a fault aborted (fault.json, no sim.restart): the failures up to
  // that one have come; it continues from its checkpoint's clock.
  const fs::path fault = fs::path(target.plan.dir) / "fault.json";
  if (!fs::exists(fault)) return;
  std::ifstream in(fault);
  try {
    const double at_s = OrderedJson::parse(in).at("at_s").get<double>();
    target.replayed_after_s = std::max(target.replayed_after_s, at_s);
  } catch (const OrderedJson::exception& e) {
    throw UserError(fault.string() + ": not a fault record (" + e.what() + ")");
  }
}

}  // namespace syncopate::app
