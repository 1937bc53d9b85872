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

toml::table parse_toml_file(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    const auto& begin = error.source().begin;
    throw UserError(path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) +
                    ": " + std::string(error.description()));
  }
}

TomlReader::TomlReader(const toml::table& root, std::string file,
                       const std::map<std::string, std::string>* overrides)
    : root_(root), file_(std::move(file)), overrides_(overrides) {}

const toml::node* TomlReader::node(std::string_view key) {
  known_.emplace(key);
  return find(key);
}

const toml::node* TomlReader::find(std::string_view key) const {
  const toml::node* current = &root_;
  for (std::string_view part : split(key, '.')) {
    const toml::table* table = current->as_table();
    if (table == nullptr) return nullptr;
    current = table->get(part);
    if (current == nullptr) return nullptr;
  }
  return current;
}

std::optional<std::string> TomlReader::override_text(std::string_view key) {
  known_.emplace(key);
  if (overrides_ == nullptr) return std::nullopt;
  auto it = overrides_->find(std::string(key));
  if (it == overrides_->end()) return std::nullopt;
  return it->second;
}

bool TomlReader::has(std::string_view key) {
  return override_text(key).has_value() || node(key) != nullptr;
}

std::string TomlReader::where(std::string_view key) {
  if (auto text = override_text(key)) {
    return file_ + ": override " + std::string(key) + "=" + *text;
  }
  // The key's own line, or the line of the nearest enclosing table that exists.
  std::string_view prefix = key;
  while (true) {
    const toml::node* found = find(prefix);
    if (found != nullptr && found->source().begin.line > 0) {
      return file_ + ":" + std::to_string(found->source().begin.line) + ": " + std::string(key);
    }
    const size_t dot = prefix.rfind('.');
    if (dot == std::string_view::npos) break;
    prefix = prefix.substr(0, dot);
  }
  return file_ + ": " + std::string(key);
}

void TomlReader::missing(std::string_view key) {
  // A common TOML slip: a key written after a [table] header belongs to that table.
  const size_t dot = key.rfind('.');
  const std::string_view leaf = dot == std::string_view::npos ? key : key.substr(dot + 1);
  std::string hint;
  for (auto&& [name, value] : root_) {
    const toml::table* table = value.as_table();
    if (table == nullptr || table->get(leaf) == nullptr) continue;
    const std::string found = std::string(name.str()) + "." + std::string(leaf);
    if (found == key) continue;
    hint = " (there is a " + found + ": in TOML, keys written after a [" + std::string(name.str()) +
           "] header belong to that table)";
    break;
  }
  fail(key, "required key is missing" + hint);
}

void TomlReader::fail(std::string_view key, const std::string& what) {
  throw UserError(where(key) + ": " + what);
}

int64_t TomlReader::integer(std::string_view key, std::optional<int64_t> fallback, int64_t min,
                            int64_t max) {
  int64_t value = 0;
  if (auto text = override_text(key)) {
    if (!parse_int(*text, &value)) fail(key, "expected an integer");
  } else if (const toml::node* found = node(key)) {
    if (!found->is_integer()) fail(key, "expected an integer, got " + type_name(*found));
    value = found->as_integer()->get();
  } else if (fallback) {
    value = *fallback;
  } else {
    missing(key);
  }
  if (value < min || value > max) {
    fail(key, std::to_string(value) + " is out of range; allowed: " + std::to_string(min) + " to " +
                  std::to_string(max));
  }
  return value;
}

bool TomlReader::boolean(std::string_view key, std::optional<bool> fallback) {
  if (auto text = override_text(key)) {
    if (*text == "true") return true;
    if (*text == "false") return false;
    fail(key, "expected true or false");
  }
  if (const toml::node* found = node(key)) {
    if (!found->is_boolean()) fail(key, "expected true or false, got " + type_name(*found));
    return found->as_boolean()->get();
  }
  if (!fallback) missing(key);
  return *fallback;
}

std::string TomlReader::string(std::string_view key, std::optional<std::string> fallback,
                               const std::vector<std::string>& allowed) {
  std::string value;
  if (auto text = override_text(key)) {
    value = *text;
  } else if (const toml::node* found = node(key)) {
    if (!found->is_string()) fail(key, "expected a string, got " + type_name(*found));
    value = found->as_string()->get();
  } else if (fallback) {
    return *fallback;
  } else {
    missing(key);
  }
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    std::string list;
    for (const std::string& option : allowed) append_item(list, option, ", ");
    fail(key, "unknown value '" + value + "'; allowed: " + list);
  }
  return value;
}

double TomlReader::quantity(std::string_view key, Quantity kind, std::optional<double> fallback,
                            bool zero_ok) {
  double value = 0;
  auto expect = [&] {
    return std::string("expected a number in base units or a string with a unit (") +
           unit_list(kind) + ")";
  };
  if (auto text = override_text(key)) {
    if (!parse_quantity(*text, kind, &value)) fail(key, expect());
  } else if (const toml::node* found = node(key)) {
    if (found->is_integer()) {
      value = static_cast<double>(found->as_integer()->get());
    } else if (found->is_floating_point()) {
      value = found->as_floating_point()->get();
    } else if (found->is_string()) {
      if (!parse_quantity(found->as_string()->get(), kind, &value)) fail(key, expect());
    } else {
      fail(key, expect() + ", got " + type_name(*found));
    }
  } else if (fallback) {
    value = *fallback;
  } else {
    missing(key);
  }
  if (!std::isfinite(value) || value < 0 || (value == 0 && !zero_ok)) {
    fail(key, zero_ok ? "must be >= 0" : "must be > 0");
  }
  return value;
}

std::vector<unsigned long> TomlReader::dims(std::string_view key) {
  std::vector<unsigned long> out;
  auto add = [&](int64_t value) {
    if (value < 1 || value > (1 << 20)) fail(key, "every dimension must be between 1 and 2^20");
    out.push_back(static_cast<unsigned long>(value));
  };
  auto add_text = [&](std::string_view text) {
    for (std::string_view part : split(text, 'x')) {
      int64_t value = 0;
      if (!parse_int(part, &value)) fail(key, "expected dimensions like \"8x8x4\" or [8, 8, 4]");
      add(value);
    }
  };
  if (auto text = override_text(key)) {
    add_text(*text);
  } else if (const toml::node* found = node(key)) {
    if (found->is_string()) {
      add_text(found->as_string()->get());
    } else if (const toml::array* array = found->as_array()) {
      for (const toml::node& item : *array) {
        if (!item.is_integer()) fail(key, "expected an array of integers");
        add(item.as_integer()->get());
      }
    } else {
      fail(key, "expected dimensions like \"8x8x4\" or [8, 8, 4]");
    }
  }
  return out;
}

std::string TomlReader::known_near(std::string_view key) const {
  const size_t dot = key.rfind('.');
  const std::string parent =
      dot == std::string_view::npos ? "" : std::string(key.substr(0, dot + 1));
  std::string list;
  for (const std::string& known : known_) {
    if (known.compare(0, parent.size(), parent) != 0) continue;
    append_item(list, known, ", ");
  }
  return list.empty() ? "(none)" : list;
}

void TomlReader::check_table(const toml::table& table, const std::string& prefix) {
  for (auto&& [name, value] : table) {
    const std::string key = prefix + std::string(name.str());
    if (const toml::table* child = value.as_table()) {  // only leaves are keys
      check_table(*child, key + ".");
      continue;
    }
    if (!known_.contains(key)) {
      throw UserError(
          file_ + ":" + std::to_string(value.source().begin.line) + ": " + key +
          ": unknown key (or not used with these settings); known here: " + known_near(key));
    }
  }
}

void TomlReader::check_all_used() {
  check_table(root_, "");
  if (overrides_ == nullptr) return;
  for (const auto& [key, text] : *overrides_) {
    if (!known_.contains(key)) {
      std::string list;
      for (const std::string& known : known_) append_item(list, known, ", ");
      throw UserError(file_ + ": override " + key + "=" + text +
                      ": unknown parameter; allowed: " + list);
    }
  }
}

}  // namespace syncopate::sim::detail
