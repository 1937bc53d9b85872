#pragma once
// The scenario's schema: every key a scenario file may hold, how it is read into the Scenario,
// how it is written back (the resolved scenario), and when it is read at all. A key that the
// chosen strategy, backend or dataset would not read is refused, naming the setting that would
// make it meaningful.
#include <functional>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "core/scenario/toml_reader.hpp"

namespace syncopate::detail {

struct ScenarioKey {
  std::string name;  // dotted, e.g. "strategy.every"
  std::function<void(TomlReader&, Scenario&)> read;
  // Adds the key's resolved value to `out` (nothing for keys that hold no value).
  std::function<void(const Scenario&, toml::table& out)> write;
  // Empty when this scenario reads the key; otherwise why not and which setting would, e.g.
  // "read only by epoch_sync (epochs) and local_sgd (steps); strategy.name is \"ddp\"". Null:
  // always read.
  std::function<std::string(const Scenario&)> unused;
};

// [[sim.faults]] (fault_keys.cpp).
ScenarioKey sim_faults_key();

// In reading order: a key's `unused` may look at any value, since it runs after all are read.
const std::vector<ScenarioKey>& scenario_keys();

// The table that holds dotted `key` (created with those on its path); *leaf is the last part.
toml::table& table_of(toml::table& root, const std::string& key, std::string* leaf);

// Sets dotted `key` in `root`.
template <typename V>
void put(toml::table& root, const std::string& key, V&& value) {
  std::string leaf;
  table_of(root, key, &leaf).insert_or_assign(leaf, std::forward<V>(value));
}

}  // namespace syncopate::detail
