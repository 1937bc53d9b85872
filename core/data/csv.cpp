// The CSV reader: a header row (after skipped lines), selected feature and target columns.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>

#include "core/base/check.hpp"
#include "core/data/data.hpp"

namespace syncopate {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// A field without its surrounding whitespace and one pair of surrounding double quotes.
std::string_view unquote(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = trim(s.substr(1, s.size() - 2));
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(
        unquote(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

[[noreturn]] void csv_error(const std::string& path, int64_t line, const std::string& what) {
  throw UserError(path + ":" + std::to_string(line) + ": " + what);
}

std::string column_list(const std::vector<std::string>& header) {
  std::string names;
  for (const std::string& h : header) names += (names.empty() ? "" : ", ") + h;
  return names;
}

// The header's index of each named column; `key` names the scenario key in errors.
std::vector<size_t> find_columns(const std::vector<std::string>& header,
                                 const std::vector<std::string>& names, const char* what,
                                 const std::string& path, int64_t line_no) {
  std::vector<size_t> index;
  for (const std::string& name : names) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      csv_error(path, line_no,
                std::string(what) + " column '" + name +
                    "' not in the header; columns: " + column_list(header));
    }
    const auto c = static_cast<size_t>(it - header.begin());
    if (std::find(index.begin(), index.end(), c) != index.end())
      csv_error(path, line_no, std::string(what) + " column '" + name + "' given twice");
    index.push_back(c);
  }
  return index;
}

// Reads lines up to and including the header (skip_rows lines first, then the first non-blank
// one) and checks its names.
std::vector<std::string> read_header(std::istream& in, const std::string& path, int64_t skip_rows,
                                     int64_t& line_no) {
  std::string line;
  while (line_no < skip_rows && std::getline(in, line)) ++line_no;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    for (std::string_view f : split_fields(line)) header.emplace_back(f);
  }
  if (header.empty()) {
    csv_error(path, line_no,
              "no header row" +
                  (skip_rows > 0 ? " after data.skip_rows = " + std::to_string(skip_rows) + " lines"
                                 : std::string("; a header row is required (empty file)")));
  }
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c].empty())
      csv_error(path, line_no, "header: column " + std::to_string(c + 1) + " has no name");
    for (size_t d = 0; d < c; ++d) {
      if (header[d] == header[c])
        csv_error(path, line_no, "header: duplicate column '" + header[c] + "'");
    }
  }
  return header;
}

// One cell as a float; errors name the line, the data row and the column.
float parse_cell(std::string_view f, const std::string& path, int64_t line_no, int64_t row,
                 const std::string& column, size_t c) {
  const std::string where = "row " + std::to_string(row) + ", column '" + column + "' (" +
                            std::to_string(c + 1) + "): '" + std::string(f) + "'";
  double value = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
  if (f.empty() || ec != std::errc() || end != f.data() + f.size() || !std::isfinite(value))
    csv_error(path, line_no, where + " is not a finite number");
  if (std::abs(value) > std::numeric_limits<float>::max())  // values are stored as float
    csv_error(path, line_no, where + " is too large for float");
  return static_cast<float>(value);
}

}  // namespace

Dataset load_csv_regression(const std::string& path,
                            const std::vector<std::string>& target_columns) {
  CsvOptions options;
  options.targets = target_columns;
  return load_csv_regression(path, options);
}

Dataset load_csv_regression(const std::string& path, const CsvOptions& options) {
  std::error_code status;
  if (!std::filesystem::is_regular_file(path, status))
    throw UserError(path + ": CSV file not found (or not a regular file)");
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot open CSV file: " + std::strerror(errno));
  int64_t line_no = 0;
  const std::vector<std::string> header = read_header(in, path, options.skip_rows, line_no);
  if (options.targets.empty()) {
    throw UserError(path +
                    ": data.targets: no target column given; allowed: columns of the header");
  }
  const std::vector<size_t> target_index =
      find_columns(header, options.targets, "target", path, line_no);
  std::vector<size_t> feature_index =
      find_columns(header, options.features, "feature", path, line_no);
  for (size_t c : feature_index) {
    if (std::find(target_index.begin(), target_index.end(), c) != target_index.end())
      csv_error(path, line_no, "column '" + header[c] + "' is both a feature and a target");
  }
  if (options.features.empty()) {  // every column that is not a target
    for (size_t c = 0; c < header.size(); ++c)
      if (std::find(target_index.begin(), target_index.end(), c) == target_index.end())
        feature_index.push_back(c);
  }
  if (feature_index.empty())
    csv_error(path, line_no, "every column is a target; no feature column left");
  std::vector<float> xs, ys;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.size() != header.size()) {
      csv_error(path, line_no,
                "expected " + std::to_string(header.size()) + " fields, found " +
                    std::to_string(fields.size()));
    }
    for (size_t c : feature_index)
      xs.push_back(parse_cell(fields[c], path, line_no, n + 1, header[c], c));
    for (size_t c : target_index)
      ys.push_back(parse_cell(fields[c], path, line_no, n + 1, header[c], c));
    ++n;
  }
  if (n == 0) csv_error(path, line_no, "no data rows after the header");
  Dataset data;
  data.name = std::filesystem::path(path).stem().string();
  data.x = Tensor({n, static_cast<int64_t>(feature_index.size())}, std::move(xs));
  data.y = Tensor({n, static_cast<int64_t>(target_index.size())}, std::move(ys));
  return data;
}

}  // namespace syncopate
