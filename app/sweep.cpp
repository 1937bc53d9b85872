// `syncopate sweep`: grid expansion, the sweep directory, running the points, sweep.csv.
#include "app/sweep.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "app/commands.hpp"
#include "app/process.hpp"
#include "core/base/check.hpp"
#include "core/scenario/scenario.hpp"

namespace syncopate::app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal.store(sig); }

std::string read_text(const std::string& path) {
  if (fs::is_directory(path)) throw UsageError(path + ": is a directory, not a scenario file");
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot open scenario file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A file name part: letters, digits, '.', '-' and '_' kept, anything else becomes '_'.
std::string sanitize(const std::string& text) {
  std::string out;
  for (const char c : text)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out.substr(0, 40);
}

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.flush()) throw UserError(tmp.string() + ": cannot write");
  }
  fs::rename(tmp, path);
}

// What makes two sweeps the same: the scenario text, the common overrides and the grid.
json manifest(const SweepOptions& o, const std::string& text,
              const std::vector<SweepPoint>& points) {
  json m;
  m["format"] = "syncopate-sweep-1";
  m["scenario"] = o.scenario_path.empty() ? "<embedded default scenario>" : o.scenario_path;
  m["scenario_text"] = text;
  m["sets"] = o.sets;
  for (const SweepAxis& a : o.axes)
    m["axes"].push_back({{"key", a.key}, {"column", a.column}, {"values", a.values}});
  for (const SweepPoint& p : points)
    m["points"].push_back({{"name", p.name}, {"sets", p.sets}, {"values", p.values}});
  return m;
}

// Refuses a directory that holds another sweep, so that re-running resumes only the same one.
void check_same_sweep(const fs::path& dir, const json& mine) {
  const fs::path path = dir / "sweep.json";
  if (!fs::exists(path)) return;
  json theirs;
  try {
    theirs = json::parse(std::ifstream(path));
  } catch (const json::exception& e) {
    throw UsageError(path.string() + ": not a sweep manifest (" + e.what() + ")");
  }
  for (const char* key : {"scenario_text", "sets", "axes"})
    if (theirs.value(key, json()) != mine[key])
      throw UsageError(dir.string() + " holds another sweep (its " + key +
                       " differ); use another --out, or remove it");
}

// Parses every point's scenario before anything runs: a bad value fails the whole sweep at once.
std::vector<Scenario> resolve_points(const SweepOptions& o, const std::string& text,
                                     const std::vector<SweepPoint>& points) {
  const std::string source =
      o.scenario_path.empty() ? "<embedded default scenario>" : o.scenario_path;
  std::vector<Scenario> scenarios;
  for (const SweepPoint& p : points) {
    std::vector<std::string> sets = o.sets;
    sets.insert(sets.end(), p.sets.begin(), p.sets.end());
    try {
      scenarios.push_back(parse_scenario(text, source, sets));
    } catch (const UserError& e) {
      throw UsageError("sweep point " + p.name + ": " + e.what());
    }
  }
  return scenarios;
}

std::vector<std::string> point_command(const SweepOptions& o, const SweepPoint& p,
                                       const Scenario& s, const fs::path& run_dir, bool slurm) {
  std::vector<std::string> cmd;
  if (s.backend == BackendKind::kMpi) {
    if (slurm) {
      cmd = {"srun", "--ntasks=" + std::to_string(s.workers)};
    } else {
      cmd = {"mpirun", "-np", std::to_string(s.workers), "--oversubscribe"};
      if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
    }
  }
  cmd.insert(cmd.end(), {o.self_exe, "run"});
  if (!o.scenario_path.empty()) cmd.push_back(fs::absolute(o.scenario_path).string());
  for (const auto& set : o.sets) cmd.insert(cmd.end(), {"--set", set});
  for (const auto& set : p.sets) cmd.insert(cmd.end(), {"--set", set});
  cmd.insert(cmd.end(), {"--out", fs::absolute(run_dir).string()});
  return cmd;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool finished(const fs::path& run_dir) { return fs::exists(run_dir / "summary.json"); }

// Runs the unfinished points, `jobs` at a time. Returns the names of the points that failed.
std::vector<std::string> run_points(const SweepOptions& o, const std::vector<SweepPoint>& points,
                                    const std::vector<Scenario>& scenarios, const fs::path& dir) {
  std::vector<size_t> pending;
  for (size_t i = 0; i < points.size(); ++i)
    if (!finished(dir / "runs" / points[i].name)) pending.push_back(i);
  const size_t total = points.size(), done_before = total - pending.size();
  if (!o.quiet && done_before > 0)
    std::printf("sweep: %zu of %zu points already finished, skipped\n", done_before, total);
  const int jobs = o.jobs > 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::map<pid_t, size_t> running;
  std::vector<std::string> failed;
  size_t next = 0, done = done_before;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  while ((next < pending.size() || !running.empty()) && g_signal.load() == 0) {
    while (next < pending.size() && static_cast<int>(running.size()) < jobs) {
      const size_t i = pending[next++];
      const fs::path run_dir = dir / "runs" / points[i].name;
      fs::remove_all(run_dir.string() + ".partial");  // a killed attempt's leftovers
      running[spawn(point_command(o, points[i], scenarios[i], run_dir, false),
                    run_dir.string() + ".log")] = i;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) continue;  // EINTR: a signal; the loop condition sees it
    const size_t i = running.at(pid);
    running.erase(pid);
    ++done;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) failed.push_back(points[i].name);
    if (!o.quiet)
      std::printf("sweep: [%zu/%zu] %s %s\n", done, total, points[i].name.c_str(),
                  ok ? "done" : "FAILED (see its .log)");
    std::fflush(stdout);
  }
  for (const auto& [pid, i] : running) kill(pid, SIGTERM);
  for (const auto& [pid, i] : running) waitpid(pid, nullptr, 0);
  return failed;
}

void write_slurm(const SweepOptions& o, const std::vector<SweepPoint>& points,
                 const std::vector<Scenario>& scenarios, const fs::path& dir) {
  std::ostringstream cases, indices;
  int tasks = 1;
  for (size_t i = 0; i < points.size(); ++i) {
    const fs::path run_dir = dir / "runs" / points[i].name;
    if (finished(run_dir)) continue;
    if (scenarios[i].backend == BackendKind::kMpi) tasks = std::max(tasks, scenarios[i].workers);
    indices << (indices.str().empty() ? "" : ",") << i;
    cases << "  " << i << ")";
    for (const auto& word : point_command(o, points[i], scenarios[i], run_dir, true))
      cases << " " << shell_quote(word);
    cases << " > " << shell_quote(fs::absolute(run_dir).string() + ".log") << " 2>&1 ;;\n";
  }
  std::ostringstream script;
  script << "#!/bin/bash\n"
         << "# Written by `syncopate sweep --emit slurm`: one array task per unfinished point.\n"
         << "# Submit with sbatch; then `syncopate sweep --collect " << dir.string()
         << "` builds sweep.csv.\n"
         << "# --ntasks is the largest MPI point's rank count; adjust partition, time and GPUs.\n"
         << "#SBATCH --job-name=syncopate-sweep\n#SBATCH --array=" << indices.str() << "\n"
         << "#SBATCH --ntasks=" << tasks << "\n#SBATCH --output=" << fs::absolute(dir).string()
         << "/slurm-%A_%a.out\n"
         << "set -euo pipefail\ncase \"$SLURM_ARRAY_TASK_ID\" in\n"
         << cases.str() << "  *) echo \"no point $SLURM_ARRAY_TASK_ID\"; exit 1 ;;\nesac\n";
  write_atomically(dir / "sweep.sbatch", script.str());
  fs::permissions(dir / "sweep.sbatch", fs::perms::owner_exec, fs::perm_options::add);
  if (!o.quiet)
    std::printf("sweep: wrote %s (%s)\n", (dir / "sweep.sbatch").c_str(),
                indices.str().empty() ? "every point already finished" : "sbatch it");
}

// A summary.json value as a CSV cell: numbers and strings as they are, null as empty.
std::string cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// The summary figures of a run, flattened: top-level scalars, time_to_accuracy.T,
// backend_stats.K.
std::vector<std::pair<std::string, json>> figures(const nlohmann::ordered_json& summary) {
  std::vector<std::pair<std::string, json>> out;
  for (const auto& [key, value] : summary.items()) {
    if (key == "scenario" || key == "name" || key == "workers" || key == "strategy") continue;
    if (value.is_object()) {
      for (const auto& [k, v] : value.items())
        if (!v.is_structured()) out.emplace_back(key + "." + k, v);
    } else if (!value.is_array()) {
      out.emplace_back(key, value);
    }
  }
  return out;
}

// A finished point's summary.json; UsageError naming the file when it is not a JSON object (a
// run directory edited or damaged by hand: the point must be run again).
nlohmann::ordered_json read_summary(const fs::path& path) {
  nlohmann::ordered_json summary;
  try {
    summary = nlohmann::ordered_json::parse(std::ifstream(path));
  } catch (const json::exception& e) {
    throw UsageError(path.string() + ": not a run summary (" + e.what() +
                     "); remove its run directory to run the point again");
  }
  if (!summary.is_object())
    throw UsageError(path.string() +
                     ": not a run summary (not a JSON object); remove its run directory to run "
                     "the point again");
  return summary;
}

void write_csv(const fs::path& dir, const json& m) {
  std::vector<std::string> columns;
  for (const auto& a : m["axes"]) columns.push_back(a["column"]);
  std::vector<std::string> extra;  // figure columns, in order of first appearance
  std::vector<std::map<std::string, std::string>> rows;
  for (const auto& p : m["points"]) {
    std::map<std::string, std::string> row;
    const std::string name = p["name"];
    for (size_t k = 0; k < columns.size(); ++k) row[columns[k]] = p["values"][k];
    row["run_dir"] = "runs/" + name;
    const fs::path summary_path = dir / "runs" / name / "summary.json";
    row["status"] = fs::exists(summary_path) ? "done" : "missing";
    if (fs::exists(summary_path)) {
      for (const auto& [key, value] : figures(read_summary(summary_path))) {
        if (std::find(extra.begin(), extra.end(), key) == extra.end()) extra.push_back(key);
        row[key] = cell(value);
      }
    }
    rows.push_back(std::move(row));
  }
  columns.insert(columns.end(), {"run_dir", "status"});
  columns.insert(columns.end(), extra.begin(), extra.end());
  std::ostringstream csv;
  for (size_t k = 0; k < columns.size(); ++k) csv << (k ? "," : "") << columns[k];
  csv << "\n";
  for (const auto& row : rows) {
    for (size_t k = 0; k < columns.size(); ++k) {
      const auto it = row.find(columns[k]);
      std::string v = it == row.end() ? "" : it->second;
      if (v.find_first_of(",\"\n") != std::string::npos) {
        std::string quoted = "\"";
        for (const char c : v) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
        v = quoted + "\"";
      }
      csv << (k ? "," : "") << v;
    }
    csv << "\n";
  }
  write_atomically(dir / "sweep.csv", csv.str());
}

int collect(const SweepOptions& o) {
  const fs::path dir = o.collect;
  const fs::path path = dir / "sweep.json";
  if (!fs::exists(path))
    throw UsageError(dir.string() + " holds no sweep (no sweep.json): give the --out of a sweep");
  json m;
  try {
    m = json::parse(std::ifstream(path));
  } catch (const json::exception& e) {
    throw UsageError(path.string() + ": not a sweep manifest (" + e.what() + ")");
  }
  write_csv(dir, m);
  size_t missing = 0;
  for (const auto& p : m["points"])
    if (!finished(dir / "runs" / p["name"].get<std::string>())) ++missing;
  if (!o.quiet)
    std::printf("sweep: %s written; %zu of %zu points finished\n", (dir / "sweep.csv").c_str(),
                m["points"].size() - missing, m["points"].size());
  return missing == 0 ? 0 : 1;
}

}  // namespace

std::vector<std::string> split_values(const std::string& text, const std::string& what) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  bool quoted = false;
  for (const char c : text) {
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '[' || c == '{')) ++depth;
    if (!quoted && (c == ']' || c == '}')) --depth;
    if (c == ',' && depth == 0 && !quoted) {
      out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  out.push_back(item);
  for (const auto& v : out)
    if (v.empty()) throw UsageError(what + ": empty value in the list \"" + text + "\"");
  return out;
}

std::vector<SweepPoint> expand_grid(const std::vector<SweepAxis>& axes) {
  if (axes.empty())
    throw UsageError("sweep: empty grid; give --workers, --strategy or --set key=v1,v2");
  std::vector<SweepPoint> points(1);
  for (const SweepAxis& axis : axes) {
    if (axis.values.empty()) throw UsageError("sweep: " + axis.key + ": no values");
    std::vector<SweepPoint> next;
    for (const SweepPoint& p : points) {
      for (const std::string& v : axis.values) {
        SweepPoint q = p;
        q.sets.push_back(axis.key + "=" + v);
        q.values.push_back(v);
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }
  for (size_t i = 0; i < points.size(); ++i) {
    std::ostringstream name;
    name << std::setw(4) << std::setfill('0') << i;
    for (size_t k = 0; k < axes.size(); ++k)
      name << "_"
           << sanitize(axes[k].column == "workers" ? "w" + points[i].values[k]
                                                   : points[i].values[k]);
    points[i].name = name.str();
  }
  return points;
}

int run_sweep(const SweepOptions& o) {
  if (!o.collect.empty()) return collect(o);
  if (o.out.empty()) throw UsageError("sweep: --out DIR is required");
  const std::string text =
      o.scenario_path.empty() ? default_scenario_text() : read_text(o.scenario_path);
  const std::vector<SweepPoint> points = expand_grid(o.axes);
  const std::vector<Scenario> scenarios = resolve_points(o, text, points);
  const fs::path dir = o.out;
  const json m = manifest(o, text, points);
  check_same_sweep(dir, m);
  fs::create_directories(dir / "runs");
  write_atomically(dir / "sweep.json", m.dump(2) + "\n");
  if (o.emit_slurm) {
    write_slurm(o, points, scenarios, dir);
    return 0;
  }
  const std::vector<std::string> failed = run_points(o, points, scenarios, dir);
  write_csv(dir, m);
  std::vector<std::string> missing;
  for (const SweepPoint& p : points)
    if (!finished(dir / "runs" / p.name)) missing.push_back(p.name);
  if (!o.quiet || !missing.empty()) {
    std::printf("sweep: %s: %zu of %zu points finished\n", (dir / "sweep.csv").c_str(),
                points.size() - missing.size(), points.size());
    for (const auto& name : missing) std::printf("  missing: %s\n", name.c_str());
    if (!missing.empty())
      std::printf("sweep: run the same command again to run the missing points\n");
  }
  if (g_signal.load() != 0) return 128 + g_signal.load();
  return missing.empty() ? 0 : 1;
}

}  // namespace syncopate::app
