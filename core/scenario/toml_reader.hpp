#pragma once
// Typed reading of a TOML document by dotted key, with overrides and errors that name file:line:
// key (or the override). Every key asked for is remembered, so that check_all_used() can reject
// keys (and overrides) that nothing read: typos fail loudly instead of being ignored. Scenarios
// (core/scenario) and simulated platforms (backends/sim/platform) are both read with it.
#include <toml++/toml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/base/enum_names.hpp"

namespace syncopate {

class TomlReader {
 public:
  TomlReader(toml::table root, std::string file);

  // Sets dotted `key` to `text` read as a TOML value (a bare word is a string), creating the
  // tables on its path. Errors about the key then name `where` instead of file:line, e.g.
  // "--set strategy.every=2: strategy.every" or "mn5-acc.toml: override nodes=4".
  void add_override(const std::string& key, const std::string& text, const std::string& where);

  bool has(std::string_view key);                // remembered as asked for
  const toml::node* node(std::string_view key);  // the value (file or override), or null
  bool overridden(std::string_view key) const;

  // Each getter returns the value, else `fallback`; with neither it throws "required". Ranges
  // are inclusive.
  int64_t integer(std::string_view key, std::optional<int64_t> fallback, int64_t min, int64_t max);
  double number(std::string_view key, std::optional<double> fallback, double min, double max);
  bool boolean(std::string_view key, std::optional<bool> fallback);
  std::string string(std::string_view key, std::optional<std::string> fallback,
                     const std::vector<std::string>& allowed = {});
  // One of the names of an enum's table.
  template <typename E, size_t N>
  E choice(std::string_view key, std::type_identity_t<std::optional<E>> fallback,
           const NameTable<E, N>& names) {
    const toml::node* found = node(key);
    if (found == nullptr && fallback) return *fallback;
    if (found == nullptr) missing(key);
    const std::string value = string(key, std::nullopt);
    const std::optional<E> parsed = value_in(names, value);
    if (!parsed) fail(key, "unknown value '" + value + "'; allowed: " + names_in(names));
    return *parsed;
  }
  // A table of free-form keys (a map): all of its entries count as read. Null when absent.
  const toml::table* table(std::string_view key);

  // "file:line: key" (the key's line, or that of the nearest table above it), or the override's.
  std::string where(std::string_view key) const;
  // Throws UserError "where(key): what".
  [[noreturn]] void fail(std::string_view key, const std::string& what) const;
  [[noreturn]] void missing(std::string_view key) const;  // "required key is missing", a hint
  // Rejects keys and overrides that were never asked for.
  void check_all_used() const;
  const std::string& file() const { return file_; }
  const toml::table& root() const { return root_; }

 private:
  const toml::node* find(std::string_view key) const;  // like node(), without remembering
  std::string known_near(std::string_view key) const;
  void check_table(const toml::table& table, const std::string& prefix) const;
  bool is_known_table(const std::string& key) const;

  struct Override {
    std::string text, where;
  };
  toml::table root_;
  std::string file_;
  std::map<std::string, Override, std::less<>> overrides_;
  std::set<std::string, std::less<>> known_, free_tables_;
};

// How deep keys and tables may nest (deeper ones overflow toml++'s recursion).
inline constexpr int kMaxTomlDepth = 64;

// A bare TOML key (one part of a dotted key): letters, digits, '_' and '-', not empty.
bool is_bare_key(std::string_view part);

// The content of a regular file; a missing file, a directory or a device is a UserError
// "path: <what> not found / is not a regular file".
std::string read_text_file(const std::string& path, const std::string& what);
// Parses a TOML file (`what` names it in errors, e.g. "host profile file"); syntax errors
// become UserError "file:line:column: what".
toml::table parse_toml_file(const std::string& path, const std::string& what = "file");
// Parses TOML text; syntax errors become UserError "source:line: what".
toml::table parse_toml_text(const std::string& text, const std::string& source);

}  // namespace syncopate
