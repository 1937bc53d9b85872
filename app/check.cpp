// `syncopate check`: run scenarios cost-only, compare their communication figures with a baseline.
#include "app/check.hpp"

#include <toml++/toml.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/commands.hpp"
#include "app/process.hpp"
#include "core/base/check.hpp"

namespace syncopate::app {
namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckFormat = "syncopate-check-1";

// The figures compared, all "smaller is better", from a run's summary.json.
struct Metric {
  const char* key;
  const char* label;
  double (*of)(const nlohmann::json& summary);
};

double per_worker_epoch(const nlohmann::json& s, const char* key) {
  const double n = s.at("workers").get<double>() * s.at("epochs").get<double>();
  return s.at(key).get<double>() / n;
}

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> list = {
      {"epoch_time_s", "epoch time (s)",
       [](const nlohmann::json& s) {
         return s.at("total_time_s").get<double>() / s.at("epochs").get<double>();
       }},
      {"comm_exposed_s", "exposed comm per worker-epoch (s)",
       [](const nlohmann::json& s) { return per_worker_epoch(s, "comm_time_s"); }},
      {"comm_total_s", "total comm per worker-epoch (s)",
       [](const nlohmann::json& s) { return per_worker_epoch(s, "comm_total_time_s"); }},
      {"bytes_sent_per_worker", "bytes sent per worker-epoch",
       [](const nlohmann::json& s) { return per_worker_epoch(s, "bytes_sent"); }},
  };
  return list;
}

struct Figures {
  std::vector<std::string> sets;
  std::map<std::string, double> values;  // metric key -> value
};

std::string at_line(const std::string& file, const toml::node& node) {
  return file + ":" + std::to_string(node.source().begin.line);
}

// The baseline: scenario file -> figures. A missing file is an empty baseline.
std::map<std::string, Figures> read_baseline(const std::string& path) {
  std::map<std::string, Figures> out;
  if (!fs::exists(path)) return out;
  if (fs::is_directory(path)) throw UserError(path + ": is a directory, not a baseline file");
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw UserError(path + ":" + std::to_string(e.source().begin.line) +
                    ": not a check baseline: " + std::string(e.description()));
  }
  const auto* format = root.get("format");
  if (format == nullptr || format->value<std::string>() != std::string(kCheckFormat))
    throw UserError(path + ":1: format: not a check baseline (expected format = \"" +
                    std::string(kCheckFormat) + "\")");
  const auto* scenarios = root.get("scenario");
  if (scenarios == nullptr) return out;
  if (!scenarios->is_array_of_tables())
    throw UserError(at_line(path, *scenarios) + ": scenario: expected [[scenario]] tables");
  for (const auto& entry : *scenarios->as_array()) {
    const toml::table& t = *entry.as_table();
    const auto file = t["file"].value<std::string>();
    if (!file) throw UserError(at_line(path, entry) + ": file: missing (the scenario's path)");
    Figures f;
    for (const auto& [key, node] : t) {
      const std::string k(key.str());
      if (k == "file") continue;
      if (k == "sets") {
        if (!node.is_array()) throw UserError(at_line(path, node) + ": sets: expected strings");
        for (const auto& s : *node.as_array()) f.sets.push_back(s.value_or(std::string()));
        continue;
      }
      const bool known = std::any_of(metrics().begin(), metrics().end(),
                                     [&](const Metric& m) { return k == m.key; });
      const auto value = node.value<double>();
      if (!known || !value)
        throw UserError(at_line(path, node) + ": " + k +
                        (known ? ": expected a number" : ": unknown figure"));
      f.values[k] = *value;
    }
    out[*file] = f;
  }
  return out;
}

std::string number(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

void write_baseline(const std::string& path, const std::map<std::string, Figures>& all) {
  std::ostringstream out;
  out << "# syncopate check baseline: communication figures of cost-only simulated runs.\n"
      << "# Regenerate: syncopate check SCENARIO... --baseline " << path << " --update\n"
      << "format = \"" << kCheckFormat << "\"\n";
  for (const auto& [file, f] : all) {
    out << "\n[[scenario]]\nfile = " << toml::value<std::string>(file) << "\nsets = [";
    for (size_t i = 0; i < f.sets.size(); ++i)
      out << (i ? ", " : "") << toml::value<std::string>(f.sets[i]);
    out << "]\n";
    for (const auto& [key, value] : f.values) out << key << " = " << number(value) << "\n";
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp);
    file << out.str();
    if (!file.flush()) throw UserError(tmp + ": cannot write");
  }
  fs::rename(tmp, path);
}

// Runs one scenario cost-only on the simulator and returns its figures.
Figures measure(const CheckOptions& o, const std::string& scenario, const fs::path& scratch) {
  const fs::path out = scratch / std::to_string(std::hash<std::string>{}(scenario));
  std::vector<std::string> cmd = {
      o.self_exe, "run", scenario, "--set", "backend=\"sim\"", "--set", "sim.mode=\"cost_only\""};
  for (const auto& set : o.sets) cmd.insert(cmd.end(), {"--set", set});
  cmd.insert(cmd.end(), {"--out", out.string()});
  const std::string log = out.string() + ".log";
  if (run_to_completion(cmd, log) != 0) {
    std::stringstream text;
    text << std::ifstream(log).rdbuf();
    throw UserError(scenario + ": the cost-only run failed:\n" + text.str());
  }
  const auto summary = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  Figures f;
  f.sets = o.sets;
  for (const Metric& m : metrics()) f.values[m.key] = m.of(summary);
  return f;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : " ") + s;
  return out.empty() ? "(none)" : out;
}

// Prints one scenario's table; returns {regressions, improvements}.
std::pair<int, int> compare(const std::string& scenario, const Figures& base, const Figures& now,
                            double tolerance) {
  int worse = 0, better = 0;
  std::printf("%s\n", scenario.c_str());
  std::printf("  %-36s %18s %18s %9s\n", "figure", "baseline", "now", "change");
  for (const Metric& m : metrics()) {
    const auto it = base.values.find(m.key);
    const double now_v = now.values.at(m.key);
    if (it == base.values.end()) {
      std::printf("  %-36s %18s %18.6g %9s  (not in the baseline)\n", m.label, "-", now_v, "");
      continue;
    }
    const double base_v = it->second;
    const double change = base_v == 0 ? (now_v == 0 ? 0 : INFINITY) : (now_v - base_v) / base_v;
    const char* verdict = "";
    if (change > tolerance) {
      verdict = "  REGRESSION";
      ++worse;
    } else if (change < -tolerance) {
      verdict = "  improved";
      ++better;
    }
    std::printf("  %-36s %18.6g %18.6g %+8.2f%%%s\n", m.label, base_v, now_v, 100 * change,
                verdict);
  }
  return {worse, better};
}

}  // namespace

double parse_tolerance(const std::string& text, const std::string& command) {
  std::string t = text;
  bool percent = false;
  while (!t.empty() && (t.back() == '%' || t.back() == ' ')) {
    percent |= t.back() == '%';
    t.pop_back();
  }
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v))
    throw UsageError(command + ": --tolerance " + text +
                     ": expected a percentage such as 1% or 0.5%");
  return percent ? v / 100 : v;
}

int run_check(const CheckOptions& o) {
  if (o.scenarios.empty()) throw UsageError("check: give at least one scenario");
  if (o.baseline.empty()) throw UsageError("check: --baseline FILE is required");
  std::map<std::string, Figures> baseline = read_baseline(o.baseline);
  if (!o.update && !fs::exists(o.baseline))
    throw UserError(o.baseline + ": no such baseline; create it with --update");
  const fs::path scratch =
      fs::temp_directory_path() / ("syncopate-check-" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  int regressions = 0, improvements = 0, missing = 0;
  try {
    for (const std::string& scenario : o.scenarios) {
      const Figures now = measure(o, scenario, scratch);
      if (o.update) {
        baseline[scenario] = now;
        continue;
      }
      const auto it = baseline.find(scenario);
      if (it == baseline.end()) {
        std::printf("%s: not in %s; add it with --update\n", scenario.c_str(), o.baseline.c_str());
        ++missing;
        continue;
      }
      if (it->second.sets != now.sets)
        std::printf("note: the baseline of %s was recorded with --set %s; this run has %s\n",
                    scenario.c_str(), join(it->second.sets).c_str(), join(now.sets).c_str());
      const auto [worse, better] = compare(scenario, it->second, now, o.tolerance);
      regressions += worse;
      improvements += better;
    }
  } catch (...) {
    fs::remove_all(scratch);
    throw;
  }
  fs::remove_all(scratch);
  if (o.update) {
    write_baseline(o.baseline, baseline);
    std::printf("check: %s updated (%zu scenario(s))\n", o.baseline.c_str(), o.scenarios.size());
    return 0;
  }
  std::printf("\ncheck: tolerance %.6g%%: ", 100 * o.tolerance);
  if (regressions > 0) {
    std::printf("%d figure(s) regressed (marked REGRESSION above)\n", regressions);
    return 1;
  }
  if (missing > 0) {
    std::printf("%d scenario(s) have no baseline\n", missing);
    return 1;
  }
  if (improvements > 0) {
    std::printf("no regression; %d figure(s) improved: accept them with --update\n", improvements);
    return 0;
  }
  std::printf("no figure moved beyond the tolerance\n");
  return 0;
}

}  // namespace syncopate::app
