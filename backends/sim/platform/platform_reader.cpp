// Reading platform and profile TOML files: units, dimension lists, overrides.
#include "backends/sim/platform/platform_reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <span>
#include <sstream>
#include <utility>

#include "core/base/check.hpp"

namespace syncopate::sim::detail {
namespace {

struct Unit {
  std::string_view suffix;
  double scale;
};

// SimGrid's unit spellings (https://simgrid.org/doc/latest/XML_reference.html), plus none.
constexpr Unit kBandwidthUnits[] = {{"", 1},
                                    {"Bps", 1},
                                    {"kBps", 1e3},
                                    {"KBps", 1e3},
                                    {"MBps", 1e6},
                                    {"GBps", 1e9},
                                    {"TBps", 1e12},
                                    {"KiBps", 1024.0},
                                    {"MiBps", 1 << 20},
                                    {"GiBps", 1 << 30},
                                    {"TiBps", 1099511627776.0},
                                    {"bps", 0.125},
                                    {"kbps", 125},
                                    {"Kbps", 125},
                                    {"Mbps", 1.25e5},
                                    {"Gbps", 1.25e8},
                                    {"Tbps", 1.25e11}};
constexpr Unit kTimeUnits[] = {{"", 1},      {"s", 1},     {"ms", 1e-3},
                               {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}};
constexpr Unit kFlopsUnits[] = {{"", 1},     {"f", 1},     {"kf", 1e3}, {"Mf", 1e6},
                                {"Gf", 1e9}, {"Tf", 1e12}, {"Pf", 1e15}};

std::span<const Unit> units_of(Quantity kind) {
  switch (kind) {
    case Quantity::kBandwidth:
      return kBandwidthUnits;
    case Quantity::kTime:
      return kTimeUnits;
    case Quantity::kFlops:
      return kFlopsUnits;
  }
  return {};
}

std::string unit_list(Quantity kind) {
  std::string out;
  for (const Unit& unit : units_of(kind)) {
    if (unit.suffix.empty()) continue;
    append_item(out, std::string(unit.suffix), ", ");
  }
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == separator) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

bool parse_int(std::string_view text, int64_t* value) {
  text = trim(text);
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return ec == std::errc() && ptr == end && !text.empty();
}

std::string text_of_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string type_name(const toml::node& node) {
  std::ostringstream out;
  out << node.type();
  return out.str();
}

}  // namespace

bool parse_quantity(const std::string& text, Quantity kind, double* value) {
  const std::string_view view = trim(text);
  double number = 0;
  auto [ptr, ec] = std::from_chars(view.data(), view.data() + view.size(), number);
  if (ec != std::errc() || ptr == view.data()) return false;
  const std::string_view suffix = trim(std::string_view(ptr, view.data() + view.size() - ptr));
  for (const Unit& unit : units_of(kind)) {
    if (unit.suffix == suffix) {
      *value = number * unit.scale;
      return std::isfinite(*value);
    }
  }
  return false;
}

TomlReader open_platform_file(const std::string& path,
                              const std::map<std::string, std::string>& overrides) {
  TomlReader reader(parse_toml_file(path), path);
  for (const auto& [key, text] : overrides)
    reader.add_override(key, text, path + ": override " + key + "=" + text);
  return reader;
}

double quantity(TomlReader& reader, std::string_view key, Quantity kind,
                std::optional<double> fallback, bool zero_ok) {
  double value = 0;
  auto expect = [&] {
    return std::string("expected a number in base units or a string with a unit (") +
           unit_list(kind) + ")";
  };
  if (const toml::node* found = reader.node(key)) {
    if (found->is_integer()) {
      value = static_cast<double>(found->as_integer()->get());
    } else if (found->is_floating_point()) {
      value = found->as_floating_point()->get();
    } else if (found->is_string()) {
      if (!parse_quantity(found->as_string()->get(), kind, &value)) reader.fail(key, expect());
    } else {
      reader.fail(key, expect() + ", got " + type_name(*found));
    }
  } else if (fallback) {
    value = *fallback;
  } else {
    reader.missing(key);
  }
  if (!std::isfinite(value) || value < 0 || (value == 0 && !zero_ok))
    reader.fail(key, zero_ok ? "must be >= 0" : "must be > 0");
  // Beyond these, simulated durations overflow to infinity (SimGrid then aborts).
  const auto [low, high] = kind == Quantity::kTime ? std::pair(1e-15, 1e9) : std::pair(1e-6, 1e30);
  if (value != 0 && (value < low || value > high)) {
    std::ostringstream range;
    range << (zero_ok ? "0 or " : "") << low << " to " << high << " (base units)";
    reader.fail(key, text_of_number(value) + " is out of range; allowed: " + range.str());
  }
  return value;
}

std::vector<unsigned long> dims(TomlReader& reader, std::string_view key) {
  std::vector<unsigned long> out;
  auto add = [&](int64_t value) {
    if (value < 1 || value > (1 << 20))
      reader.fail(key, "every dimension must be between 1 and 2^20");
    out.push_back(static_cast<unsigned long>(value));
  };
  const std::string expected = "expected dimensions like \"8x8x4\" or [8, 8, 4]";
  const toml::node* found = reader.node(key);
  if (found == nullptr) return out;
  if (found->is_string()) {
    for (std::string_view part : split(found->as_string()->get(), 'x')) {
      int64_t value = 0;
      if (!parse_int(part, &value)) reader.fail(key, expected);
      add(value);
    }
  } else if (found->is_integer()) {  // one dimension, e.g. an override dims=4
    add(found->as_integer()->get());
  } else if (const toml::array* array = found->as_array()) {
    for (const toml::node& item : *array) {
      if (!item.is_integer()) reader.fail(key, "expected an array of integers");
      add(item.as_integer()->get());
    }
  } else {
    reader.fail(key, expected);
  }
  return out;
}

}  // namespace syncopate::sim::detail
