// The run directory: summaries, metrics.csv, summary.json, trace.json, written atomically.
#include "core/train/recorder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/check.hpp"

namespace syncopate {
namespace fs = std::filesystem;
namespace {

// Shortest round-trip decimal: deterministic text for deterministic numbers.
std::string num(double value) {
  if (!std::isfinite(value)) return value != value ? "nan" : (value > 0 ? "inf" : "-inf");
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  // Prefer a shorter representation when it round-trips.
  for (int precision = 6; precision < 17; ++precision) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", precision, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return buffer;
}

// A figure that may be absent (negative): an empty CSV cell then.
std::string absent_if_negative(double value) { return value < 0 ? "" : num(value); }

std::string json_number(double value) { return std::isfinite(value) ? num(value) : "null"; }

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  out.close();
  if (!out) throw UserError(path.string() + ": cannot write");
}

}  // namespace

RunSummary summarize(const Scenario& scenario, const std::vector<WorkerReport>& reports,
                     const RunInfo& info) {
  RunSummary s;
  s.backend = std::string(to_string(scenario.backend));
  s.strategy = std::string(to_string(scenario.strategy.kind));
  s.platform = info.platform;
  s.workers = scenario.workers;
  s.epochs = scenario.epochs;
  s.seed = scenario.seed;
  for (const auto& report : reports) {
    if (report.worker == 0) s.final_test_accuracy = report.final_test_accuracy;
    for (const auto& e : report.epochs) {
      s.total_time_s = std::max(s.total_time_s, e.end_s);
      s.compute_time_s += e.compute_s;
      s.comm_time_s += e.comm_s;
      s.idle_time_s += e.idle_s;
      s.bytes_sent += e.bytes_sent;
      s.bytes_recv += e.bytes_recv;
    }
  }
  // Time to accuracy: the first epoch end at which worker 0's test accuracy reached the target.
  for (double target : {0.80, 0.85, 0.88, 0.90}) {
    double when = -1;
    for (const auto& report : reports) {
      if (report.worker != 0) continue;
      for (const auto& e : report.epochs) {
        if (e.test_accuracy >= target) {
          when = e.end_s;
          break;
        }
      }
    }
    s.time_to_accuracy.emplace_back(target, when);
  }
  return s;
}

std::string metrics_csv(const std::vector<WorkerReport>& reports) {
  std::ostringstream out;
  out << "worker,epoch,start_s,end_s,compute_s,comm_s,idle_s,bytes_sent,bytes_recv,train_loss,"
         "train_accuracy,test_accuracy,lr\n";
  std::vector<const EpochMetrics*> rows;
  for (const auto& report : reports)
    for (const auto& e : report.epochs) rows.push_back(&e);
  std::stable_sort(rows.begin(), rows.end(), [](const EpochMetrics* a, const EpochMetrics* b) {
    return a->epoch != b->epoch ? a->epoch < b->epoch : a->worker < b->worker;
  });
  for (const EpochMetrics* e : rows) {
    out << e->worker << ',' << e->epoch << ',' << num(e->start_s) << ',' << num(e->end_s) << ','
        << num(e->compute_s) << ',' << num(e->comm_s) << ',' << num(e->idle_s) << ','
        << e->bytes_sent << ',' << e->bytes_recv << ',' << absent_if_negative(e->train_loss) << ','
        << absent_if_negative(e->train_accuracy) << ','
        << (e->test_accuracy >= 0 ? num(e->test_accuracy) : "") << ',' << num(e->lr) << '\n';
  }
  return out.str();
}

std::string summary_json(const Scenario& scenario, const RunSummary& s, const RunInfo& info) {
  std::ostringstream out;
  out << "{\n";
  out << "  \"name\": " << json_string(scenario.name) << ",\n";
  out << "  \"backend\": " << json_string(s.backend) << ",\n";
  out << "  \"strategy\": " << json_string(s.strategy) << ",\n";
  out << "  \"platform\": " << json_string(s.platform) << ",\n";
  out << "  \"workers\": " << s.workers << ",\n";
  out << "  \"epochs\": " << s.epochs << ",\n";
  out << "  \"seed\": " << s.seed << ",\n";
  out << "  \"final_test_accuracy\": "
      << (s.final_test_accuracy >= 0 ? json_number(s.final_test_accuracy) : "null") << ",\n";
  out << "  \"total_time_s\": " << json_number(s.total_time_s) << ",\n";
  out << "  \"compute_time_s\": " << json_number(s.compute_time_s) << ",\n";
  out << "  \"comm_time_s\": " << json_number(s.comm_time_s) << ",\n";
  out << "  \"idle_time_s\": " << json_number(s.idle_time_s) << ",\n";
  out << "  \"bytes_sent\": " << s.bytes_sent << ",\n";
  out << "  \"bytes_recv\": " << s.bytes_recv << ",\n";
  out << "  \"time_to_accuracy\": {";
  for (size_t i = 0; i < s.time_to_accuracy.size(); ++i) {
    const auto& [target, when] = s.time_to_accuracy[i];
    out << (i ? ", " : "") << json_string(num(target)) << ": "
        << (when >= 0 ? json_number(when) : "null");
  }
  out << "},\n";
  out << "  \"backend_stats\": {";
  for (size_t i = 0; i < info.extra.size(); ++i)
    out << (i ? ", " : "") << json_string(info.extra[i].first) << ": "
        << json_number(info.extra[i].second);
  out << "},\n";
  out << "  \"wall_seconds\": " << json_number(info.wall_seconds) << ",\n";
  out << "  \"scenario\": " << (scenario.resolved_json.empty() ? "{}" : scenario.resolved_json)
      << "\n";
  out << "}\n";
  return out.str();
}

std::string trace_json(const std::vector<WorkerReport>& reports) {
  std::ostringstream out;
  out << "{\"traceEvents\": [\n";
  bool first = true;
  for (const auto& report : reports) {
    out << (first ? "" : ",\n")
        << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " << report.worker
        << ", \"args\": {\"name\": \"worker " << report.worker << "\"}}";
    first = false;
    for (const auto& e : report.trace) {
      // Chrome traces are in microseconds.
      out << ",\n{\"name\": " << json_string(e.name) << ", \"cat\": " << json_string(e.category)
          << ", \"ph\": \"X\", \"pid\": 0, \"tid\": " << e.worker
          << ", \"ts\": " << num(e.start_s * 1e6) << ", \"dur\": " << num(e.duration_s * 1e6)
          << "}";
    }
  }
  out << "\n], \"displayTimeUnit\": \"ms\"}\n";
  return out.str();
}

std::string unique_run_dir(const std::string& dir) {
  std::string candidate = dir;
  for (int i = 2; fs::exists(candidate) || fs::exists(candidate + ".partial"); ++i)
    candidate = dir + "-" + std::to_string(i);
  return candidate;
}

std::string write_run_dir(const std::string& dir, const Scenario& scenario,
                          const std::vector<WorkerReport>& reports, const RunInfo& info) {
  const fs::path final_dir(dir), partial(dir + ".partial");
  if (fs::exists(final_dir)) throw UserError(dir + ": run directory exists; not overwriting it");
  fs::create_directories(partial);
  write_file(partial / "metrics.csv", metrics_csv(reports));
  write_file(partial / "trace.json", trace_json(reports));
  write_file(partial / "scenario.toml", scenario.resolved_toml);
  // The final model of worker 0 (after the strategy's consensus): raw little-endian float32.
  for (const auto& report : reports) {
    if (report.worker != 0 || report.final_params.empty()) continue;
    std::ofstream model(partial / "model.bin", std::ios::binary);
    model.write(reinterpret_cast<const char*>(report.final_params.data()),
                static_cast<std::streamsize>(report.final_params.size() * sizeof(float)));
    if (!model) throw UserError((partial / "model.bin").string() + ": cannot write");
  }
  write_file(partial / "summary.json",
             summary_json(scenario, summarize(scenario, reports, info), info));
  fs::rename(partial, final_dir);
  return final_dir.string();
}

void write_failure(const std::string& dir, const std::string& message) {
  std::error_code ignored;
  const fs::path partial(dir + ".partial");
  fs::create_directories(partial, ignored);
  std::ofstream out(partial / "ERROR", std::ios::app);
  out << message << "\n";
}

}  // namespace syncopate
