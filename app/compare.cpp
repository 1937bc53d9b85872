// `syncopate compare`: read two run directories, refuse runs of different scenarios, compare their
// phases per epoch and worker and their bytes, print the table and write compare.json.
#include "app/compare.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "app/commands.hpp"
#include "core/base/check.hpp"
#include "core/comm/mpi_settings.hpp"
#include "core/train/run_files.hpp"

namespace syncopate::app {
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr const char* kCompareFormat = "syncopate-compare-1";

struct RunDir {
  std::string path;
  Json summary;
  std::map<std::pair<int, int>, EpochMetrics> rows;  // (worker, epoch) -> its metrics.csv row
};

// A run directory's summary.json and metrics.csv; UsageError (the comparison cannot be made)
// naming the missing or malformed file.
RunDir load_run(const std::string& path) {
  for (const char* name : {"summary.json", "metrics.csv"})
    if (!fs::is_regular_file(fs::path(path) / name))
      throw UsageError("compare: " + path + ": not a run directory (no " + name + ")");
  RunDir run{path, {}, {}};
  const std::string summary = (fs::path(path) / "summary.json").string();
  try {
    run.summary = Json::parse(std::ifstream(summary));
  } catch (const Json::parse_error& e) {
    throw UsageError("compare: " + summary + ": not JSON: " + e.what());
  }
  if (!run.summary.is_object() || !run.summary.contains("scenario") ||
      !run.summary["scenario"].is_object())
    throw UsageError("compare: " + summary + ": scenario: missing (the resolved scenario)");
  const std::string metrics = (fs::path(path) / "metrics.csv").string();
  std::vector<EpochMetrics> rows;
  try {
    rows = read_metrics_csv(metrics);
  } catch (const UsageError&) {
    throw;
  } catch (const UserError& e) {
    throw UsageError(std::string("compare: ") + e.what());
  }
  for (size_t i = 0; i < rows.size(); ++i)
    if (!run.rows.emplace(std::pair(rows[i].worker, rows[i].epoch), rows[i]).second)
      throw UsageError("compare: " + metrics + ":" + std::to_string(i + 2) + ": worker " +
                       std::to_string(rows[i].worker) + " epoch " + std::to_string(rows[i].epoch) +
                       " appears a second time");
  return run;
}

// ---- Same scenario? --------------------------------------------------------------------------

void flatten(const Json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [key, value] : j.items())
      flatten(value, prefix.empty() ? key : prefix + "." + key, out);
    return;
  }
  out[prefix] = j.dump();
}

// Keys that may differ between the two runs of one scenario: where and how it ran, and what
// it traced.
bool may_differ(const std::string& key) {
  static constexpr std::array<std::string_view, 8> kFree = {
      "name", "seed", "backend", "sim", "mpi", "model.device", "data.dir", "trace"};
  return std::any_of(kFree.begin(), kFree.end(), [&](std::string_view free) {
    return key == free || (key.size() > free.size() && key.compare(0, free.size(), free) == 0 &&
                           key[free.size()] == '.');
  });
}

// The differences between the resolved scenarios that a comparison allows ("backend: "sim" vs
// "mpi""); throws UsageError naming every other one.
std::vector<std::string> scenario_differences(const RunDir& a, const RunDir& b) {
  std::map<std::string, std::string> fa, fb;
  flatten(a.summary["scenario"], "", fa);
  flatten(b.summary["scenario"], "", fb);
  std::set<std::string> keys;
  for (const auto& [k, v] : fa) keys.insert(k);
  for (const auto& [k, v] : fb) keys.insert(k);
  std::vector<std::string> allowed;
  std::string refused;
  for (const std::string& key : keys) {
    const auto ia = fa.find(key), ib = fb.find(key);
    const std::string va = ia == fa.end() ? "(absent)" : ia->second;
    const std::string vb = ib == fb.end() ? "(absent)" : ib->second;
    if (va == vb) continue;
    const std::string text = key + ": " + va + " vs " + vb;
    if (may_differ(key))
      allowed.push_back(text);
    else
      refused += "\n  " + text;
  }
  if (!refused.empty())
    throw UsageError(
        "compare: " + a.path + " and " + b.path +
        " are runs of different scenarios (A vs B):" + refused +
        "\n(only name, seed, backend, sim.*, mpi.*, trace.*, model.device and data.dir may "
        "differ)");
  return allowed;
}

// ---- Under the same MPI settings? ---------------------------------------------------------------

// The MPI settings that change a run's communication times (core/comm/mpi_settings.hpp): what a
// measured run ran under (backend_stats.NAME: 1 or 0, -1 where its MPI has no such setting) or
// what a simulated run's platform was calibrated under (backend_stats.calibrated_NAME).
struct Setting {
  bool on = false;
  const char* how = "";  // "ran under" or "calibrated under"
};

std::optional<Setting> setting_of(const RunDir& run, const std::string& name) {
  const Json& stats = run.summary.value("backend_stats", Json());
  if (!stats.is_object()) return std::nullopt;
  for (const auto& [key, how] :
       {std::pair<std::string, const char*>(name, "ran under"),
        {std::string(mpi_settings::kCalibrated) + name, "calibrated under"}}) {
    const Json& value = stats.value(key, Json());
    if (value.is_number() && value.get<double>() >= 0) return Setting{value.get<double>() > 0, how};
  }
  return std::nullopt;
}

// Each setting that both runs name and that differs: "mpi_yield_when_idle: on (A calibrated
// under) vs off (B ran under)". A prediction for one setting says little of a run under another.
std::vector<std::string> setting_mismatches(const RunDir& a, const RunDir& b) {
  std::vector<std::string> out;
  for (const std::string_view setting : mpi_settings::kAll) {
    const std::string name(setting);
    const std::optional<Setting> sa = setting_of(a, name), sb = setting_of(b, name);
    if (!sa || !sb || sa->on == sb->on) continue;
    out.push_back(name + ": " + (sa->on ? "on" : "off") + " (A " + sa->how + ") vs " +
                  (sb->on ? "on" : "off") + " (B " + sb->how + ")");
  }
  return out;
}

// ---- The figures -----------------------------------------------------------------------------

struct Phases {
  double compute_s = 0, comm_s = 0, idle_s = 0, total_s = 0;
};

struct Phase {
  const char* key;
  const char* label;
  double Phases::*field;
};
constexpr std::array<Phase, 4> kPhases = {{{"compute_s", "compute", &Phases::compute_s},
                                           {"comm_s", "exposed comm", &Phases::comm_s},
                                           {"idle_s", "idle", &Phases::idle_s},
                                           {"total_s", "total", &Phases::total_s}}};

Phases phases_of(const EpochMetrics& e) {
  return {e.compute_s, e.comm_s, e.idle_s, e.end_s - e.start_s};
}

void accumulate(Phases& sum, const Phases& p, double weight) {
  for (const Phase& f : kPhases) sum.*f.field += weight * p.*f.field;
}

// One line of the comparison. A phase's error is (A - B) / B's total of the same row: the share
// of the measured time that the prediction misses, so that a phase near zero (idle on a
// balanced run) does not turn noise into a large relative error; for the total it is the
// relative error itself.
struct Row {
  std::optional<int> epoch, worker;  // none: the whole run / the mean over the workers
  Phases a, b;
  bool gated() const { return !worker; }  // the verdict reads the rows over all workers
  double error(const Phase& p) const {
    const double diff = a.*p.field - b.*p.field;
    if (b.total_s > 0) return diff / b.total_s;
    return diff == 0 ? 0 : INFINITY;
  }
};

void require_same_rows(const RunDir& x, const RunDir& y) {
  for (const auto& [key, row] : x.rows)
    if (y.rows.count(key) == 0)
      throw UsageError("compare: " + x.path + "/metrics.csv has worker " +
                       std::to_string(key.first) + " epoch " + std::to_string(key.second) + ", " +
                       y.path + "/metrics.csv does not (runs of different lengths)");
}

// Per epoch: the mean over the workers, then each worker; then the whole run (sums over the
// epochs): the mean over the workers, then each worker.
std::vector<Row> build_rows(const RunDir& a, const RunDir& b) {
  require_same_rows(a, b);
  require_same_rows(b, a);
  std::set<int> workers, epochs;
  for (const auto& [key, row] : a.rows) {
    workers.insert(key.first);
    epochs.insert(key.second);
  }
  std::vector<Row> rows;
  std::map<int, Row> whole;  // worker -> its sums over the epochs
  Row run_mean;
  for (const int epoch : epochs) {
    Row mean{epoch, std::nullopt, {}, {}};
    std::vector<Row> of_workers;
    for (const int w : workers) {
      const auto ia = a.rows.find({w, epoch});
      if (ia == a.rows.end()) continue;
      Row r{epoch, w, phases_of(ia->second), phases_of(b.rows.at({w, epoch}))};
      of_workers.push_back(r);
      whole.try_emplace(w, Row{std::nullopt, w, {}, {}});
      accumulate(whole[w].a, r.a, 1);
      accumulate(whole[w].b, r.b, 1);
    }
    for (const Row& r : of_workers) {
      accumulate(mean.a, r.a, 1.0 / static_cast<double>(of_workers.size()));
      accumulate(mean.b, r.b, 1.0 / static_cast<double>(of_workers.size()));
    }
    rows.push_back(mean);
    rows.insert(rows.end(), of_workers.begin(), of_workers.end());
  }
  for (const auto& [w, r] : whole) {
    accumulate(run_mean.a, r.a, 1.0 / static_cast<double>(whole.size()));
    accumulate(run_mean.b, r.b, 1.0 / static_cast<double>(whole.size()));
  }
  if (!whole.empty()) rows.push_back(run_mean);
  for (const auto& [w, r] : whole) rows.push_back(r);
  return rows;
}

// Every byte count that differs, as text: per worker and epoch, then summary.json's totals.
std::vector<std::string> byte_mismatches(const RunDir& a, const RunDir& b) {
  std::vector<std::string> out;
  for (const auto& [key, ra] : a.rows) {
    const EpochMetrics& rb = b.rows.at(key);
    const std::string where =
        "worker " + std::to_string(key.first) + " epoch " + std::to_string(key.second);
    if (ra.bytes_sent != rb.bytes_sent)
      out.push_back(where + " bytes_sent: " + std::to_string(ra.bytes_sent) + " vs " +
                    std::to_string(rb.bytes_sent));
    if (ra.bytes_recv != rb.bytes_recv)
      out.push_back(where + " bytes_recv: " + std::to_string(ra.bytes_recv) + " vs " +
                    std::to_string(rb.bytes_recv));
  }
  for (const char* key : {"bytes_sent", "bytes_recv"})
    if (a.summary.value(key, Json()) != b.summary.value(key, Json()))
      out.push_back(std::string("summary.json ") + key + ": " +
                    a.summary.value(key, Json()).dump() + " vs " +
                    b.summary.value(key, Json()).dump());
  return out;
}

double number_in(const RunDir& run, const char* key) {
  const Json& v = run.summary.value(key, Json());
  if (!v.is_number())
    throw UsageError("compare: " + run.path + "/summary.json: " + key + ": expected a number");
  return v.get<double>();
}

// ---- Output ----------------------------------------------------------------------------------

std::string row_name(const Row& r) {
  const std::string epoch = r.epoch ? "epoch " + std::to_string(*r.epoch) : "whole run";
  return epoch + (r.worker ? " (worker " + std::to_string(*r.worker) + ")" : " (all workers)");
}

std::string percent(double error) {
  if (!std::isfinite(error)) return "inf";
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", 100 * error);
  return text;
}

std::string describe(const RunDir& run) {
  const std::string backend = run.summary.value("backend", "?");
  const std::string platform = run.summary.value("platform", "");
  return run.path + " (" + backend + (platform.empty() ? "" : ", " + platform) + ", " +
         (backend == "sim" ? "simulated" : "measured") + " s)";
}

void print_rows(const std::vector<Row>& rows, double tolerance) {
  std::printf("%-5s %-6s", "epoch", "worker");
  for (const Phase& p : kPhases) std::printf(" | %-28s", p.label);
  std::printf("\n%-12s", "");
  for (size_t i = 0; i < kPhases.size(); ++i) std::printf(" | %9s %9s %7s ", "A", "B", "err");
  std::printf("\n");
  for (const Row& r : rows) {
    if (r.gated() && &r != &rows.front()) std::printf("\n");
    std::printf("%-5s %-6s", r.epoch ? std::to_string(*r.epoch).c_str() : "run",
                r.worker ? std::to_string(*r.worker).c_str() : "all");
    for (const Phase& p : kPhases) {
      const double e = r.error(p);
      const char* mark = !(std::fabs(e) <= tolerance) ? (r.gated() ? "!" : "*") : " ";
      std::printf(" | %9.4g %9.4g %7s%s", r.a.*p.field, r.b.*p.field, percent(e).c_str(), mark);
    }
    std::printf("\n");
  }
}

Json phases_json(const Phases& p) {
  Json j = Json::object();
  for (const Phase& f : kPhases) j[f.key] = p.*f.field;
  return j;
}

Json row_json(const Row& r) {
  Json error = Json::object();
  for (const Phase& f : kPhases) {
    const double e = r.error(f);
    error[f.key] = std::isfinite(e) ? Json(e) : Json();
  }
  return {{"epoch", r.epoch ? Json(*r.epoch) : Json()},
          {"worker", r.worker ? Json(*r.worker) : Json()},
          {"gated", r.gated()},
          {"a", phases_json(r.a)},
          {"b", phases_json(r.b)},
          {"error", error}};
}

Json run_json(const RunDir& run) {
  return {{"path", fs::absolute(run.path).lexically_normal().string()},
          {"name", run.summary.value("name", "")},
          {"backend", run.summary.value("backend", "")},
          {"platform", run.summary.value("platform", "")},
          {"strategy", run.summary.value("strategy", "")},
          {"workers", run.summary.value("workers", 0)},
          {"bytes_sent", run.summary.value("bytes_sent", Json())},
          {"bytes_recv", run.summary.value("bytes_recv", Json())}};
}

void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  try {
    fs::create_directories(path.parent_path());
    {
      std::ofstream file(tmp);
      file << text;
      if (!file.flush()) throw UsageError("compare: " + tmp.string() + ": cannot write");
    }
    fs::rename(tmp, path);
  } catch (const fs::filesystem_error& e) {
    throw UsageError(std::string("compare: ") + e.what());
  }
}

// What the comparison found: the gated figures beyond the tolerance and the byte mismatches.
struct Outcome {
  std::vector<Row> rows;
  double time_a = 0, time_b = 0, time_error = 0;  // summary.json's total_time_s
  std::vector<std::string> exceeded, bytes;
  bool passed() const { return exceeded.empty() && bytes.empty(); }
};

Outcome judge(const RunDir& a, const RunDir& b, double tolerance) {
  Outcome o;
  o.rows = build_rows(a, b);
  o.bytes = byte_mismatches(a, b);
  o.time_a = number_in(a, "total_time_s");
  o.time_b = number_in(b, "total_time_s");
  o.time_error = o.time_b > 0 ? (o.time_a - o.time_b) / o.time_b : (o.time_a == 0 ? 0 : INFINITY);
  for (const Row& r : o.rows) {
    if (!r.gated()) continue;
    for (const Phase& p : kPhases)
      if (!(std::fabs(r.error(p)) <= tolerance))
        o.exceeded.push_back(row_name(r) + " " + p.label + ": " + percent(r.error(p)));
  }
  if (!(std::fabs(o.time_error) <= tolerance))
    o.exceeded.push_back("training time: " + percent(o.time_error));
  return o;
}

void print_outcome(const Outcome& o, const RunDir& a, double tolerance) {
  std::printf("\ntraining time (summary.json total_time_s): A %.6g s, B %.6g s, %s\n", o.time_a,
              o.time_b, percent(o.time_error).c_str());
  if (o.bytes.empty()) {
    std::printf("bytes: equal (%s sent, %s received in all)\n",
                a.summary.value("bytes_sent", Json()).dump().c_str(),
                a.summary.value("bytes_recv", Json()).dump().c_str());
  } else {
    std::printf("bytes: MISMATCH in %zu figure(s) (A vs B):\n", o.bytes.size());
    for (size_t i = 0; i < o.bytes.size() && i < 10; ++i) std::printf("  %s\n", o.bytes[i].c_str());
    if (o.bytes.size() > 10) std::printf("  ... and %zu more\n", o.bytes.size() - 10);
  }
  std::printf("\ncompare: tolerance %.6g%%: ", 100 * tolerance);
  if (o.passed()) {
    std::printf("every figure within it, bytes equal\n");
    return;
  }
  if (!o.exceeded.empty()) std::printf("%zu figure(s) beyond it:", o.exceeded.size());
  for (size_t i = 0; i < o.exceeded.size() && i < 8; ++i)
    std::printf("%s %s", i ? ";" : "", o.exceeded[i].c_str());
  if (o.exceeded.size() > 8) std::printf("; ... (%zu more)", o.exceeded.size() - 8);
  if (!o.bytes.empty()) std::printf("%sthe bytes differ", o.exceeded.empty() ? "" : "; ");
  std::printf("\n");
}

Json compare_json(const Outcome& o, const RunDir& a, const RunDir& b,
                  const std::vector<std::string>& allowed, const std::vector<std::string>& settings,
                  double tolerance) {
  Json rows = Json::array();
  for (const Row& r : o.rows) rows.push_back(row_json(r));
  const Json time_error = std::isfinite(o.time_error) ? Json(o.time_error) : Json();
  return {{"format", kCompareFormat},
          {"a", run_json(a)},
          {"b", run_json(b)},
          {"tolerance", tolerance},
          {"allowed_differences", allowed},
          {"mpi_setting_mismatches", settings},
          {"rows", rows},
          {"training_time", {{"a", o.time_a}, {"b", o.time_b}, {"error", time_error}}},
          {"bytes", {{"equal", o.bytes.empty()}, {"mismatches", o.bytes}}},
          {"exceeded", o.exceeded},
          {"passed", o.passed()}};
}

}  // namespace

int run_compare(const CompareOptions& options) {
  const RunDir a = load_run(options.run_a), b = load_run(options.run_b);
  const std::vector<std::string> allowed = scenario_differences(a, b);
  const Outcome outcome = judge(a, b, options.tolerance);
  std::printf("A (predicted) %s\nB (measured)  %s\n", describe(a).c_str(), describe(b).c_str());
  for (const std::string& d : allowed) std::printf("  differs: %s\n", d.c_str());
  const std::vector<std::string> settings = setting_mismatches(a, b);
  for (const std::string& s : settings) {
    std::printf("  WARNING: MPI setting differs: %s\n", s.c_str());
    std::fprintf(stderr,
                 "syncopate: compare: warning: %s and %s ran under different MPI settings (%s): "
                 "the prediction is for the other one\n",
                 a.path.c_str(), b.path.c_str(), s.c_str());
  }
  std::printf(
      "err: (A - B) / B's total of the same row; ! beyond the tolerance, * beyond it on one "
      "worker (reported, not failed)\n\n");
  print_rows(outcome.rows, options.tolerance);
  print_outcome(outcome, a, options.tolerance);
  const fs::path out = fs::path(options.out.empty() ? options.run_b : options.out) / "compare.json";
  write_file(out, compare_json(outcome, a, b, allowed, settings, options.tolerance).dump(2) + "\n");
  std::printf("compare.json written to %s\n", out.string().c_str());
  return outcome.passed() ? 0 : 1;
}

}  // namespace syncopate::app
