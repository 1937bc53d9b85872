// TomlReader: typed, remembered look-ups in a TOML document, and the check that nothing unread
// was written.
#include "core/scenario/toml_reader.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

std::vector<std::string_view> split_key(std::string_view key) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= key.size(); ++i) {
    if (i == key.size() || key[i] == '.') {
      parts.push_back(key.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

std::string type_name(const toml::node& node) {
  std::ostringstream out;
  out << node.type();
  return out.str();
}

void append(std::string& list, std::string_view item) {
  if (!list.empty()) list += ", ";
  list += item;
}

template <typename T>
std::string text_of(T value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

TomlReader::TomlReader(toml::table root, std::string file)
    : root_(std::move(root)), file_(std::move(file)) {}

void TomlReader::add_override(const std::string& key, const std::string& text,
                              const std::string& where) {
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    parsed.insert_or_assign("v", text);  // a bare word is a string
  }
  const std::vector<std::string_view> parts = split_key(key);
  toml::table* table = &root_;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* next = table->get(parts[i]);
    if (next == nullptr)
      next = table->insert_or_assign(parts[i], toml::table{}).first->second.as_table();
    if (!next->is_table())
      throw UserError(where + ": " + std::string(parts[i]) + " is not a table");
    table = next->as_table();
  }
  table->insert_or_assign(parts.back(), *parsed.get("v"));
  overrides_[key] = {text, where};
}

bool TomlReader::overridden(std::string_view key) const { return overrides_.contains(key); }

bool TomlReader::has(std::string_view key) { return node(key) != nullptr; }

const toml::node* TomlReader::node(std::string_view key) {
  known_.emplace(key);
  return find(key);
}

const toml::node* TomlReader::find(std::string_view key) const {
  const toml::node* current = &root_;
  for (std::string_view part : split_key(key)) {
    const toml::table* table = current->as_table();
    if (table == nullptr) return nullptr;
    current = table->get(part);
    if (current == nullptr) return nullptr;
  }
  return current;
}

std::string TomlReader::where(std::string_view key) const {
  // The key's own override or line, or those of the nearest enclosing table.
  std::string_view prefix = key;
  while (true) {
    if (const auto it = overrides_.find(prefix); it != overrides_.end()) return it->second.where;
    const toml::node* found = find(prefix);
    if (found != nullptr && found->source().begin.line > 0)
      return file_ + ":" + std::to_string(found->source().begin.line) + ": " + std::string(key);
    const size_t dot = prefix.rfind('.');
    if (dot == std::string_view::npos) break;
    prefix = prefix.substr(0, dot);
  }
  return file_ + ": " + std::string(key);
}

void TomlReader::fail(std::string_view key, const std::string& what) const {
  throw UserError(where(key) + ": " + what);
}

void TomlReader::missing(std::string_view key) const {
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

int64_t TomlReader::integer(std::string_view key, std::optional<int64_t> fallback, int64_t min,
                            int64_t max) {
  int64_t value = 0;
  if (const toml::node* found = node(key)) {
    if (!found->is_integer()) fail(key, "expected an integer, got " + type_name(*found));
    value = found->as_integer()->get();
  } else if (fallback) {
    value = *fallback;
  } else {
    missing(key);
  }
  if (value < min || value > max)
    fail(key, std::to_string(value) + " is out of range; allowed: " + std::to_string(min) + " to " +
                  std::to_string(max));
  return value;
}

double TomlReader::number(std::string_view key, std::optional<double> fallback, double min,
                          double max) {
  double value = 0;
  if (const toml::node* found = node(key)) {
    if (found->is_integer()) {
      value = static_cast<double>(found->as_integer()->get());
    } else if (found->is_floating_point()) {
      value = found->as_floating_point()->get();
    } else {
      fail(key, "expected a number, got " + type_name(*found));
    }
  } else if (fallback) {
    value = *fallback;
  } else {
    missing(key);
  }
  if (!(value >= min && value <= max))
    fail(key,
         text_of(value) + " is out of range; allowed: " + text_of(min) + " to " + text_of(max));
  return value;
}

bool TomlReader::boolean(std::string_view key, std::optional<bool> fallback) {
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
  if (const toml::node* found = node(key)) {
    if (found->is_string()) {
      value = found->as_string()->get();
    } else if (const auto it = overrides_.find(key); it != overrides_.end()) {
      value = it->second.text;  // an override's text is a string whatever it looks like
    } else {
      fail(key, "expected a string, got " + type_name(*found));
    }
  } else if (fallback) {
    return *fallback;
  } else {
    missing(key);
  }
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    std::string list;
    for (const std::string& option : allowed) append(list, option);
    fail(key, "unknown value '" + value + "'; allowed: " + list);
  }
  return value;
}

const toml::table* TomlReader::table(std::string_view key) {
  free_tables_.emplace(key);
  const toml::node* found = node(key);
  if (found == nullptr) return nullptr;
  if (!found->is_table()) fail(key, "expected a table, got " + type_name(*found));
  return found->as_table();
}

std::string TomlReader::known_near(std::string_view key) const {
  const size_t dot = key.rfind('.');
  const std::string parent =
      dot == std::string_view::npos ? "" : std::string(key.substr(0, dot + 1));
  std::string list;
  for (const std::string& known : known_) {
    if (known.compare(0, parent.size(), parent) != 0) continue;
    if (parent.empty() && known.find('.') != std::string::npos) continue;
    append(list, known);
  }
  return list.empty() ? "(none)" : list;
}

void TomlReader::check_table(const toml::table& table, const std::string& prefix) const {
  for (auto&& [name, value] : table) {
    const std::string key = prefix + std::string(name.str());
    if (free_tables_.contains(key)) continue;
    if (const toml::table* child = value.as_table()) {  // only leaves are keys
      check_table(*child, key + ".");
      continue;
    }
    if (known_.contains(key)) continue;
    if (overrides_.contains(key))
      throw UserError(where(key) + ": unknown parameter; known here: " + known_near(key));
    throw UserError(
        file_ + ":" + std::to_string(value.source().begin.line) + ": " + key +
        ": unknown key (or not used with these settings); known here: " + known_near(key));
  }
}

void TomlReader::check_all_used() const { check_table(root_, ""); }

toml::table parse_toml_file(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    const auto& begin = error.source().begin;
    throw UserError(path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) +
                    ": " + std::string(error.description()));
  }
}

toml::table parse_toml_text(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    throw UserError(source + ":" + std::to_string(error.source().begin.line) + ": " +
                    std::string(error.description()));
  }
}

}  // namespace syncopate
