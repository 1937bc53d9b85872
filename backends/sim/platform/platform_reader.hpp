#pragma once
// Typed reading of a TOML file by dotted key, with command-line overrides and errors that name
// file:line: key. Every key asked for is remembered, so that check_all_used() can reject keys
// (and overrides) that nothing reads: typos fail loudly instead of being ignored.
#include <toml++/toml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backends/sim/platform/platform_recipe.hpp"

namespace syncopate::sim::detail {

class TomlReader {
 public:
  // `overrides` (dotted key -> text) may be null; it must outlive the reader.
  TomlReader(const toml::table& root, std::string file,
             const std::map<std::string, std::string>* overrides);

  bool has(std::string_view key);                // in the file or overridden
  const toml::node* node(std::string_view key);  // the file's node, or null (no override)

  // The getters return the override if there is one, else the file's value, else `fallback`;
  // with no value and no fallback they throw "required". Ranges are inclusive.
  int64_t integer(std::string_view key, std::optional<int64_t> fallback, int64_t min, int64_t max);
  bool boolean(std::string_view key, std::optional<bool> fallback);
  std::string string(std::string_view key, std::optional<std::string> fallback,
                     const std::vector<std::string>& allowed = {});
  // A bandwidth, time or speed: a TOML number in base units (B/s, s, flop/s) or a string with a
  // unit ("450GBps", "200Gbps", "1us", "67Tf"). Must be > 0, or >= 0 when `zero_ok`.
  double quantity(std::string_view key, Quantity kind, std::optional<double> fallback,
                  bool zero_ok = false);
  // A list of positive integers: a TOML array [8, 8, 4] or a string "8x8x4".
  std::vector<unsigned long> dims(std::string_view key);

  // Throws UserError "file:line: key: what" (line of the key, or of the nearest table above it).
  [[noreturn]] void fail(std::string_view key, const std::string& what);
  [[noreturn]] void missing(std::string_view key);  // "required key is missing", with a hint
  // Rejects file keys and overrides that were never asked for.
  void check_all_used();
  const std::string& file() const { return file_; }

 private:
  const toml::node* find(std::string_view key) const;  // like node(), without remembering
  std::optional<std::string> override_text(std::string_view key);
  std::string where(std::string_view key);
  std::string known_near(std::string_view key) const;
  void check_table(const toml::table& table, const std::string& prefix);

  const toml::table& root_;
  std::string file_;
  const std::map<std::string, std::string>* overrides_;
  std::set<std::string, std::less<>> known_;
};

// Parses a TOML file; syntax errors become UserError "file:line:column: what".
toml::table parse_toml_file(const std::string& path);

}  // namespace syncopate::sim::detail
