// TomlReader: typed, remembered look-ups in a TOML document, and the check that nothing unread
// was written.
#include "core/scenario/toml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
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

// Upper bound of how deep the tables of a TOML text nest: header dots, dotted keys and inline
// tables, counted outside strings and comments. toml++ parses (and frees) nested tables
// recursively: some 10^4 levels overflow the stack.
class NestingScan {
 public:
  explicit NestingScan(std::string_view text) : text_(text) {}
  // The deepest nesting and the line it is on.
  std::pair<int, int> deepest() {
    for (i_ = 0; i_ < text_.size(); ++i_) step(text_[i_]);
    return {deepest_, deepest_line_};
  }

 private:
  void step(char c) {
    if (c == '"' || c == '\'') return skip_string(c);
    if (c == '#') {
      while (i_ + 1 < text_.size() && text_[i_ + 1] != '\n') ++i_;
      return;
    }
    if (c == '\n') {
      ++line_;
      if (brackets_ == 0 && inline_.empty()) {
        in_header_ = in_value_ = false;
        run_ = 0;
      }
    } else if (c == '[' && !in_value_ && inline_.empty()) {
      in_header_ = true;
      header_ = run_ = 0;
    } else if (c == ']' && in_header_) {
      header_ = run_;
      in_header_ = false;
      run_ = 0;
    } else if (c == '[') {
      ++brackets_;
    } else if (c == ']') {
      brackets_ = std::max(0, brackets_ - 1);
    } else if (c == '{') {
      inline_.push_back(key_ + 1);  // the key the inline table is the value of
      key_ = run_ = 0;
    } else if (c == '}') {
      if (!inline_.empty()) inline_.pop_back();
    } else if (c == '=') {
      in_value_ = true;
      key_ = run_;
      run_ = 0;
    } else if (c == ',') {
      run_ = 0;
    } else if (c == '.') {
      ++run_;
      note();
    }
  }
  void note() {
    int depth = header_ + (in_value_ ? key_ : 0) + run_ + 1;
    for (const int level : inline_) depth += level;
    if (depth > deepest_) {
      deepest_ = depth;
      deepest_line_ = line_;
    }
  }
  void skip_string(char quote) {
    const bool multi = text_.substr(i_, 3) == std::string(3, quote);
    const std::string_view end =
        multi ? std::string_view(text_.data() + i_, 3) : text_.substr(i_, 1);
    for (i_ += end.size(); i_ < text_.size(); ++i_) {
      if (text_[i_] == '\n') ++line_;
      if (quote == '"' && text_[i_] == '\\') {
        ++i_;
      } else if (text_.substr(i_, end.size()) == end) {
        i_ += end.size() - 1;
        return;
      }
    }
  }

  std::string_view text_;
  size_t i_ = 0;
  int line_ = 1, brackets_ = 0, header_ = 0, key_ = 0, run_ = 0;
  bool in_header_ = false, in_value_ = false;
  std::vector<int> inline_;  // nesting added by each open inline table
  int deepest_ = 0, deepest_line_ = 1;
};

void check_nesting(std::string_view text, const std::string& source) {
  const auto [depth, line] = NestingScan(text).deepest();
  if (depth > kMaxTomlDepth)
    throw UserError(source + ":" + std::to_string(line) + ": keys and tables nest " +
                    std::to_string(depth) + " deep; at most " + std::to_string(kMaxTomlDepth) +
                    " levels are allowed");
}

}  // namespace

bool is_bare_key(std::string_view part) {
  if (part.empty()) return false;
  for (const char c : part)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error && error != std::errc::no_such_file_or_directory)
    throw UserError(path + ": cannot read " + what + ": " + error.message());
  if (!std::filesystem::exists(status)) throw UserError(path + ": " + what + " not found");
  if (!std::filesystem::is_regular_file(status))
    throw UserError(path + ": " + what + " is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open " + what + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TomlReader::TomlReader(toml::table root, std::string file)
    : root_(std::move(root)), file_(std::move(file)) {}

void TomlReader::add_override(const std::string& key, const std::string& text,
                              const std::string& where) {
  const std::vector<std::string_view> parts = split_key(key);
  for (std::string_view part : parts)
    if (!is_bare_key(part))
      throw UserError(where + ": '" + std::string(part) +
                      "': a key part holds only letters, digits, '_' and '-'");
  if (parts.size() > static_cast<size_t>(kMaxTomlDepth))
    throw UserError(where + ": the key has " + std::to_string(parts.size()) + " parts; at most " +
                    std::to_string(kMaxTomlDepth) + " are allowed");
  check_nesting("v = " + text, where);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    parsed.insert_or_assign("v", text);  // a bare word is a string
  }
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
    const toml::table* child = value.as_table();
    // `key = {}` (inline, or an override) never sets anything; an empty [header] only if known.
    const bool inline_or_override = child != nullptr && (child->is_inline() || overridden(key));
    if (child != nullptr && child->empty() && (inline_or_override || !is_known_table(key)))
      throw UserError(where(key) + ": an empty table sets nothing; known here: " +
                      known_near(is_known_table(key) ? key + ".*" : key));
    if (free_tables_.contains(key)) continue;
    if (child != nullptr) {  // only leaves are keys
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

// A table that holds keys that were asked for, e.g. [optimizer] (empty, it is harmless); not a
// leaf key (`epochs = {}`), nor a free-form table (`sim.slowdown = {}` sets nothing).
bool TomlReader::is_known_table(const std::string& key) const {
  const std::string prefix = key + ".";
  const auto next = known_.lower_bound(prefix);
  return next != known_.end() && next->compare(0, prefix.size(), prefix) == 0;
}

void TomlReader::check_all_used() const { check_table(root_, ""); }

toml::table parse_toml_file(const std::string& path, const std::string& what) {
  const std::string text = read_text_file(path, what);
  check_nesting(text, path);
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    const auto& begin = error.source().begin;
    throw UserError(path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) +
                    ": " + std::string(error.description()));
  }
}

toml::table parse_toml_text(const std::string& text, const std::string& source) {
  check_nesting(text, source);
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    throw UserError(source + ":" + std::to_string(error.source().begin.line) + ": " +
                    std::string(error.description()));
  }
}

}  // namespace syncopate
