// The run directory: summaries, metrics.csv, summary.json, trace.json, written atomically.
#include "core/train/recorder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/base/check.hpp"
#include "core/tensor/gemm.hpp"
#include "core/train/memory.hpp"

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
// A figure that may be absent (not a finite number, as regression errors of classification).
std::string absent_if_nan(double value) { return std::isfinite(value) ? num(value) : ""; }

using Json = nlohmann::ordered_json;

// A figure as JSON: null when absent (negative) or not finite; integral values as integers.
Json figure(double value, bool may_be_absent = false) {
  if (!std::isfinite(value) || (may_be_absent && value < 0)) return nullptr;
  if (value == std::floor(value) && std::abs(value) < 9.0e15) return static_cast<int64_t>(value);
  return value;
}

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  out.close();
  if (!out) throw UserError(path.string() + ": cannot write");
}

// The report whose final model is the run's: the one marked run_model, else worker 0's (nullptr
// if neither is there).
const WorkerReport* run_model_report(const std::vector<WorkerReport>& reports) {
  const WorkerReport* found = nullptr;
  for (const WorkerReport& r : reports)
    if (r.run_model || (found == nullptr && r.worker == 0)) found = &r;
  return found;
}

Json restart_entries(const std::vector<FaultRestart>& restarts) {
  Json list = Json::array();
  for (const FaultRestart& r : restarts) {
    Json entry = {{"kind", r.kind}};
    if (r.worker >= 0) entry["worker"] = r.worker;
    if (!r.link.empty()) entry["link"] = r.link;
    entry["at_s"] = r.at_s;
    entry["resumed_from_s"] = r.resumed_from_s;
    entry["lost_seconds"] = r.lost_seconds;
    entry["recovery_s"] = r.recovery_s;
    entry["restart_s"] = r.restart_s();
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace

std::string restarts_json(const std::vector<FaultRestart>& restarts) {
  return Json{{"restarts", restart_entries(restarts)}}.dump(2);
}

RunSummary summarize(const Scenario& scenario, const std::vector<WorkerReport>& reports,
                     const RunInfo& info) {
  RunSummary s;
  s.backend = std::string(to_string(scenario.backend));
  s.strategy = std::string(to_string(scenario.strategy.kind));
  s.platform = info.platform;
  s.workers = scenario.workers;
  s.epochs = scenario.epochs;
  s.seed = scenario.seed;
  if (const WorkerReport* final_model = run_model_report(reports)) {
    s.final_test_accuracy = final_model->final_test_accuracy;
    s.final_test_errors = final_model->final_test_errors;
  }
  for (const auto& report : reports) {
    if (report.worker == 0) s.resizes = report.resizes;
    s.resident_param_bytes = std::max(s.resident_param_bytes, report.resident_param_bytes);
    s.resident_grad_bytes = std::max(s.resident_grad_bytes, report.resident_grad_bytes);
    for (const auto& e : report.epochs) {
      s.total_time_s = std::max(s.total_time_s, e.end_s);
      s.compute_time_s += e.compute_s;
      s.comm_time_s += e.comm_s;
      s.comm_total_time_s += e.comm_total_s;
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
      for (const auto& e : report.epochs) {  // a resized run's worker 0 holds gone workers' rows
        if (e.worker == 0 && e.test_accuracy >= target) {
          when = e.end_s;
          break;
        }
      }
    }
    s.time_to_accuracy.emplace_back(target, when);
  }
  return s;
}

std::string metrics_csv_header() {
  return "worker,epoch,start_s,end_s,compute_s,comm_s,idle_s,bytes_sent,bytes_recv,train_loss,"
         "train_accuracy,test_accuracy,lr,comm_total_s,test_mse,test_mae,test_r2,test_pearson\n";
}

std::string metrics_csv_row(const EpochMetrics& e) {
  std::ostringstream out;
  out << e.worker << ',' << e.epoch << ',' << num(e.start_s) << ',' << num(e.end_s) << ','
      << num(e.compute_s) << ',' << num(e.comm_s) << ',' << num(e.idle_s) << ',' << e.bytes_sent
      << ',' << e.bytes_recv << ',' << absent_if_negative(e.train_loss) << ','
      << absent_if_negative(e.train_accuracy) << ','
      << (e.test_accuracy >= 0 ? num(e.test_accuracy) : "") << ',' << num(e.lr) << ','
      << num(e.comm_total_s) << ',' << absent_if_nan(e.test_errors.mse) << ','
      << absent_if_nan(e.test_errors.mae) << ',' << absent_if_nan(e.test_errors.r2) << ','
      << absent_if_nan(e.test_errors.pearson) << '\n';
  return out.str();
}

std::string metrics_csv(const std::vector<WorkerReport>& reports) {
  std::string out = metrics_csv_header();
  std::vector<const EpochMetrics*> rows;
  for (const auto& report : reports)
    for (const auto& e : report.epochs) rows.push_back(&e);
  std::stable_sort(rows.begin(), rows.end(), [](const EpochMetrics* a, const EpochMetrics* b) {
    return a->epoch != b->epoch ? a->epoch < b->epoch : a->worker < b->worker;
  });
  for (const EpochMetrics* e : rows) out += metrics_csv_row(*e);
  return out;
}

void append_epoch_row(const std::string& run_dir, const EpochMetrics& row) {
  const fs::path folder = fs::path(run_dir) / "epochs";
  fs::create_directories(folder);
  const fs::path path = folder / ("worker-" + std::to_string(row.worker) + ".csv");
  const bool fresh = !fs::exists(path) || fs::file_size(path) == 0;
  std::ofstream out(path, std::ios::app);
  if (fresh) out << metrics_csv_header();
  out << metrics_csv_row(row);
  out.flush();
  if (!out) throw UserError(path.string() + ": cannot write");
}

EpochRows::EpochRows(const std::string& run_dir, bool resumed)
    : path_((fs::path(run_dir) / "epochs" / "workers.csv").string()) {
  if (resumed) fs::remove(path_);
}

void EpochRows::append(const EpochMetrics& row) {
  const std::lock_guard lock(mutex_);
  if (!out_.is_open()) {
    fs::create_directories(fs::path(path_).parent_path());
    const bool fresh = !fs::exists(path_) || fs::file_size(path_) == 0;
    out_.open(path_, std::ios::app);
    if (fresh) out_ << metrics_csv_header();
  }
  out_ << metrics_csv_row(row);
  out_.flush();
  if (!out_) throw UserError(path_ + ": cannot write");
}

std::string summary_json(const Scenario& scenario, const RunSummary& s, const RunInfo& info) {
  Json j;
  j["name"] = scenario.name;
  j["backend"] = s.backend;
  j["strategy"] = s.strategy;
  j["platform"] = s.platform;
  j["workers"] = s.workers;
  j["epochs"] = s.epochs;
  j["seed"] = s.seed;
  j["parameters"] = num_params(scenario.model.spec());
  j["final_test_accuracy"] = figure(s.final_test_accuracy, true);
  j["final_test_mse"] = figure(s.final_test_errors.mse);
  j["final_test_mae"] = figure(s.final_test_errors.mae);
  j["final_test_r2"] = figure(s.final_test_errors.r2);
  j["final_test_pearson"] = figure(s.final_test_errors.pearson);
  j["total_time_s"] = s.total_time_s;
  j["compute_time_s"] = s.compute_time_s;
  j["comm_time_s"] = s.comm_time_s;
  j["comm_total_time_s"] = s.comm_total_time_s;
  j["idle_time_s"] = s.idle_time_s;
  j["bytes_sent"] = s.bytes_sent;
  j["bytes_recv"] = s.bytes_recv;
  const GpuMemory memory = memory_per_gpu(scenario);  // memory.hpp: the parts' accounting
  j["memory_per_gpu_bytes"] = memory.total();
  j["memory_parameters_bytes"] = memory.parameters;
  j["memory_gradients_bytes"] = memory.gradients;
  j["memory_optimizer_state_bytes"] = memory.optimizer_state;
  j["memory_activations_bytes"] = memory.activations;
  // Measured (the accounting above is not): null where no parameters were held (cost-only).
  j["resident_parameters_bytes"] =
      s.resident_param_bytes > 0 ? Json(s.resident_param_bytes) : Json(nullptr);
  j["resident_gradients_bytes"] =
      s.resident_grad_bytes > 0 ? Json(s.resident_grad_bytes) : Json(nullptr);
  j["time_to_accuracy"] = Json::object();
  for (const auto& [target, when] : s.time_to_accuracy)
    j["time_to_accuracy"][num(target)] = figure(when, true);
  j["backend_stats"] = Json::object();
  for (const auto& [name, value] : info.extra) j["backend_stats"][name] = figure(value);
  j["wall_seconds"] = info.wall_seconds;
  j["gemm_kernel"] = gemm_kernel();  // the CPU arithmetic's bits depend on it
  if (!info.lost_workers.empty()) {
    j["lost_workers"] = Json::array();
    for (const LostWorker& lost : info.lost_workers)
      j["lost_workers"].push_back({{"worker", lost.worker},
                                   {"at_s", lost.at_s},
                                   {"kind", lost.kind},
                                   {"lost_seconds", lost.lost_seconds}});
  }
  if (!info.restarts.empty()) {
    double lost = 0;
    j["restarts"] = restart_entries(info.restarts);
    for (const FaultRestart& r : info.restarts) lost += r.lost_seconds + r.recovery_s;
    j["restart_lost_seconds"] = lost;
  }
  for (const Resize& r : s.resizes)
    j["resized"].push_back(
        {{"from_workers", r.from}, {"to_workers", r.to}, {"at_epoch", r.at_epoch}});
  j["scenario"] =
      scenario.resolved_json.empty() ? Json::object() : Json::parse(scenario.resolved_json);
  return j.dump(2) + "\n";
}

namespace {

// A worker's bytes in flight as a counter track: the value after every change.
void append_bytes_in_flight(const WorkerReport& report, Json& events) {
  std::map<double, int64_t> change;  // time -> change of the bytes in flight
  for (const auto& e : report.trace) {
    if (e.kind != TraceEvent::Kind::kFlight) continue;
    change[e.start_s] += static_cast<int64_t>(e.bytes);
    change[e.start_s + e.duration_s] -= static_cast<int64_t>(e.bytes);
  }
  int64_t in_flight = 0;
  for (const auto& [time, delta] : change) {
    in_flight += delta;
    events.push_back({{"name", "bytes in flight"},
                      {"ph", "C"},
                      {"pid", report.worker},
                      {"ts", time * 1e6},
                      {"args", {{"bytes", in_flight}}}});
  }
}

}  // namespace

// Perfetto / Chrome trace events, in microseconds: one process per worker, its training track
// (thread 0) of nested spans, its operations in flight as async slices, and the counter.
std::string trace_json(const std::vector<WorkerReport>& reports) {
  Json events = Json::array();
  uint64_t flight_id = 0;
  for (const auto& report : reports) {
    if (report.trace.empty()) continue;
    const int pid = report.worker;
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"args", {{"name", "worker " + std::to_string(pid)}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", 0},
                      {"args", {{"name", "training"}}}});
    for (const auto& e : report.trace) {
      if (e.kind == TraceEvent::Kind::kSpan) {
        events.push_back({{"name", e.name},
                          {"cat", e.category},
                          {"ph", "X"},
                          {"pid", pid},
                          {"tid", 0},
                          {"ts", e.start_s * 1e6},
                          {"dur", e.duration_s * 1e6}});
        continue;
      }
      Json args = {{"bytes", e.bytes}};
      if (!e.algorithm.empty()) args["algorithm"] = e.algorithm;
      const Json common = {
          {"name", e.name}, {"cat", e.category}, {"pid", pid}, {"tid", 0}, {"id", ++flight_id}};
      Json begin = common, end = common;
      begin["ph"] = "b";
      begin["ts"] = e.start_s * 1e6;
      begin["args"] = std::move(args);
      end["ph"] = "e";
      end["ts"] = (e.start_s + e.duration_s) * 1e6;
      events.push_back(std::move(begin));
      events.push_back(std::move(end));
    }
    append_bytes_in_flight(report, events);
  }
  const Json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump() + "\n";
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
  if (!info.partitions_csv.empty()) write_file(partial / "partitions.csv", info.partitions_csv);
  // The run's final model (worker 0's after the strategy's consensus, or the lowest-ranked
  // survivor's once an elastic run lost worker 0): raw little-endian float32.
  if (const WorkerReport* report = run_model_report(reports);
      report != nullptr && !report->final_params.empty()) {
    std::ofstream model(partial / "model.bin", std::ios::binary);
    model.write(reinterpret_cast<const char*>(report->final_params.data()),
                static_cast<std::streamsize>(report->final_params.size() * sizeof(float)));
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

void write_fault_record(const std::string& dir, const FaultRecord& record) {
  const fs::path partial(dir + ".partial");
  fs::create_directories(partial);
  nlohmann::ordered_json j = {{"aborted", true},
                              {"kind", record.kind},
                              {"at_s", record.at_s},
                              {"last_checkpoint_s", record.last_checkpoint_s},
                              {"lost_seconds", record.lost_seconds()}};
  if (record.worker >= 0) j["worker"] = record.worker;
  if (!record.link.empty()) j["link"] = record.link;
  write_file(partial / "fault.json", j.dump(2) + "\n");
}

}  // namespace syncopate
