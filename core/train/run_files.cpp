// metrics.csv reading and the WorkerReport text form.
#include "core/train/run_files.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

constexpr std::array<std::string_view, 18> kColumns = {
    "worker", "epoch",        "start_s",    "end_s",      "compute_s",      "comm_s",
    "idle_s", "bytes_sent",   "bytes_recv", "train_loss", "train_accuracy", "test_accuracy",
    "lr",     "comm_total_s", "test_mse",   "test_mae",   "test_r2",        "test_pearson"};
// Files written before the regression columns have only the first 14.
constexpr size_t kColumnsBeforeRegression = 14;

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> cells;
  size_t start = 0;
  for (size_t comma; (comma = line.find(',', start)) != std::string_view::npos; start = comma + 1)
    cells.push_back(line.substr(start, comma - start));
  cells.push_back(line.substr(start));
  return cells;
}

// One cell as a T; `where` is "source:line".
template <typename T>
T cell(std::string_view text, const std::string& where, size_t column) {
  T value{};
  const std::string copy(text);  // strtod needs a terminated string
  if constexpr (std::is_floating_point_v<T>) {
    char* end = nullptr;
    value = std::strtod(copy.c_str(), &end);
    if (!copy.empty() && end == copy.c_str() + copy.size()) return value;
  } else {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size() && !text.empty()) return value;
  }
  throw UserError(where + ": " + std::string(kColumns[column]) + ": '" + copy +
                  "' is not a number");
}

// A regression error cell: empty is absent (NaN).
double error_cell(std::string_view text, const std::string& where, size_t column) {
  return text.empty() ? RegressionMetrics::kNotComputed : cell<double>(text, where, column);
}

EpochMetrics parse_row(std::string_view line, const std::string& where, size_t columns) {
  const std::vector<std::string_view> c = split(line);
  if (c.size() != columns) {
    throw UserError(where + ": " + std::to_string(c.size()) + " cells, the header has " +
                    std::to_string(columns));
  }
  EpochMetrics e;
  e.worker = cell<int>(c[0], where, 0);
  e.epoch = cell<int>(c[1], where, 1);
  e.start_s = cell<double>(c[2], where, 2);
  e.end_s = cell<double>(c[3], where, 3);
  e.compute_s = cell<double>(c[4], where, 4);
  e.comm_s = cell<double>(c[5], where, 5);
  e.idle_s = cell<double>(c[6], where, 6);
  e.bytes_sent = cell<uint64_t>(c[7], where, 7);
  e.bytes_recv = cell<uint64_t>(c[8], where, 8);
  e.train_loss = c[9].empty() ? -1.0 : cell<double>(c[9], where, 9);
  e.train_accuracy = c[10].empty() ? -1.0 : cell<double>(c[10], where, 10);
  e.test_accuracy = c[11].empty() ? -1.0 : cell<double>(c[11], where, 11);
  e.lr = cell<double>(c[12], where, 12);
  e.comm_total_s = cell<double>(c[13], where, 13);
  if (columns == kColumns.size()) {
    e.test_errors = {.mse = error_cell(c[14], where, 14),
                     .mae = error_cell(c[15], where, 15),
                     .r2 = error_cell(c[16], where, 16),
                     .pearson = error_cell(c[17], where, 17)};
  }
  return e;
}

// Regression errors as text, NaN included (streams do not read "nan" back).
std::string errors_text(const RegressionMetrics& m) {
  std::ostringstream out;
  out.precision(17);
  for (double v : {m.mse, m.mae, m.r2, m.pearson}) {
    if (std::isnan(v))
      out << " -";
    else
      out << ' ' << v;
  }
  return out.str().substr(1);
}

void read_errors(std::istream& in, RegressionMetrics& m) {
  for (double* v : {&m.mse, &m.mae, &m.r2, &m.pearson}) {
    std::string word;
    in >> word;
    *v = word == "-" ? RegressionMetrics::kNotComputed : std::strtod(word.c_str(), nullptr);
  }
}

}  // namespace

std::vector<EpochMetrics> parse_metrics_csv(std::string_view text, const std::string& source) {
  std::vector<EpochMetrics> rows;
  std::istringstream in{std::string(text)};
  std::string line;
  std::string header, before_regression;
  for (size_t i = 0; i < kColumns.size(); ++i) {
    if (i == kColumnsBeforeRegression) before_regression = header;
    if (!header.empty()) header += ',';
    header += kColumns[i];
  }
  const bool read = static_cast<bool>(std::getline(in, line));
  if (!read || (line != header && line != before_regression)) {
    throw UserError(source + ":1: the header is not the metrics.csv header '" + header + "'");
  }
  const size_t columns = line == header ? kColumns.size() : kColumnsBeforeRegression;
  for (int number = 2; std::getline(in, line); ++number) {
    rows.push_back(parse_row(line, source + ":" + std::to_string(number), columns));
  }
  return rows;
}

std::vector<EpochMetrics> read_metrics_csv(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw UserError(path + ": cannot open");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_metrics_csv(text.str(), path);
}

std::string serialize_report(const WorkerReport& r) {
  std::ostringstream out;
  out.precision(17);
  out << "R " << r.worker << ' ' << r.final_test_accuracy << ' ' << r.final_test_loss << ' '
      << r.steps << '\n';
  out << "F " << errors_text(r.final_test_errors) << '\n';
  out << "M " << r.resident_param_bytes << '\n';
  out << "G " << r.resident_grad_bytes << '\n';
  for (const auto& e : r.epochs)
    out << "E " << e.worker << ' ' << e.epoch << ' ' << e.start_s << ' ' << e.end_s << ' '
        << e.compute_s << ' ' << e.comm_s << ' ' << e.idle_s << ' ' << e.bytes_sent << ' '
        << e.bytes_recv << ' ' << e.train_loss << ' ' << e.train_accuracy << ' ' << e.test_accuracy
        << ' ' << e.lr << ' ' << e.comm_total_s << ' ' << errors_text(e.test_errors) << '\n';
  for (const auto& t : r.trace)
    out << "T " << t.worker << ' ' << t.start_s << ' ' << t.duration_s << ' ' << t.category << ' '
        << static_cast<int>(t.kind) << ' ' << t.bytes << ' '
        << (t.algorithm.empty() ? "-" : t.algorithm) << ' ' << t.name << '\n';
  return out.str();
}

WorkerReport deserialize_report(std::string_view text) {
  WorkerReport r;
  std::istringstream in{std::string(text)};
  std::string tag;
  while (in >> tag) {
    if (tag == "R") {
      in >> r.worker >> r.final_test_accuracy >> r.final_test_loss >> r.steps;
    } else if (tag == "E") {
      EpochMetrics e;
      in >> e.worker >> e.epoch >> e.start_s >> e.end_s >> e.compute_s >> e.comm_s >> e.idle_s >>
          e.bytes_sent >> e.bytes_recv >> e.train_loss >> e.train_accuracy >> e.test_accuracy >>
          e.lr >> e.comm_total_s;
      read_errors(in, e.test_errors);
      r.epochs.push_back(e);
    } else if (tag == "F") {
      read_errors(in, r.final_test_errors);
    } else if (tag == "M") {  // absent from the checkpoints of earlier versions
      in >> r.resident_param_bytes;
    } else if (tag == "G") {  // the same
      in >> r.resident_grad_bytes;
    } else if (tag == "T") {
      TraceEvent t;
      int kind = 0;
      in >> t.worker >> t.start_s >> t.duration_s >> t.category >> kind >> t.bytes >> t.algorithm;
      t.kind = static_cast<TraceEvent::Kind>(kind);
      if (t.algorithm == "-") t.algorithm.clear();
      in.get();
      std::getline(in, t.name);
      r.trace.push_back(t);
    } else {
      SYNC_CHECK(false, "bad report record " << tag);
    }
    SYNC_CHECK(!in.fail(), "malformed report record " << tag);
  }
  return r;
}

}  // namespace syncopate
