// [[sim.faults]]: reading, validating and writing back the simulated faults of a scenario.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/scenario/scenario_keys.hpp"

namespace syncopate::detail {
namespace {

// The keys each kind takes besides `kind` (a link fault takes `worker` or `link`).
const std::vector<std::string>& fault_parameters(FaultKind kind) {
  static const std::map<FaultKind, std::vector<std::string>> table = {
      {FaultKind::kHostFailure, {"worker", "at_s"}},
      {FaultKind::kLinkFailure, {"worker", "link", "from_s", "until_s"}},
      {FaultKind::kLinkDegradation, {"worker", "link", "from_s", "until_s", "factor"}},
      {FaultKind::kStraggler, {"worker", "from_s", "until_s", "factor"}},
  };
  return table.at(kind);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// One entry's table: errors name file:line: sim.faults[i].key.
class FaultReader {
 public:
  FaultReader(TomlReader& r, const toml::table& table, size_t index)
      : r_(r), table_(table), path_("sim.faults[" + std::to_string(index) + "]") {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    const toml::node* n = key.empty() ? nullptr : table_.get(key);
    const int line = static_cast<int>(n ? n->source().begin.line : table_.source().begin.line);
    throw UserError(at(line) + path_ + (key.empty() ? "" : "." + key) + ": " + what);
  }
  std::string where() const { return at(static_cast<int>(table_.source().begin.line)) + path_; }
  bool has(const std::string& key) const { return table_.get(key) != nullptr; }

  FaultKind kind() const {
    const toml::node* n = table_.get("kind");
    if (n == nullptr || !n->is_string())
      fail(n ? "kind" : "", "expected kind = \"...\"; allowed: " + names_in(kFaultKindNames));
    const std::string name = n->as_string()->get();
    const auto kind = value_in(kFaultKindNames, name);
    if (!kind)
      fail("kind", "unknown fault kind '" + name + "'; allowed: " + names_in(kFaultKindNames));
    return *kind;
  }
  void check_known(FaultKind kind) const {
    const std::vector<std::string>& names = fault_parameters(kind);
    for (auto&& [key, value] : table_) {
      const std::string k(key.str());
      if (k == "kind" || std::find(names.begin(), names.end(), k) != names.end()) continue;
      fail(k, "unknown parameter; " + std::string(to_string(kind)) + " takes " + joined(names));
    }
  }
  double seconds(const std::string& key) const {
    const double value = number(key);
    if (!(value >= 0) || !std::isfinite(value))
      fail(key, std::to_string(value) + "; allowed: finite simulated seconds >= 0");
    return value;
  }
  double number(const std::string& key) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) fail("", "required parameter " + key + " is missing");
    if (!n->is_number()) fail(key, "expected a number");
    return n->is_integer() ? static_cast<double>(n->as_integer()->get())
                           : n->as_floating_point()->get();
  }
  int worker(int workers) const {
    const toml::node* n = table_.get("worker");
    if (n == nullptr) fail("", "required parameter worker is missing");
    if (!n->is_integer()) fail("worker", "expected a worker index");
    const int64_t value = n->as_integer()->get();
    if (value < 0 || value >= workers)
      fail("worker", std::to_string(value) + " does not exist; allowed: 0.." +
                         std::to_string(workers - 1) + " (workers = " + std::to_string(workers) +
                         ")");
    return static_cast<int>(value);
  }
  std::string text(const std::string& key) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr || !n->is_string() || n->as_string()->get().empty())
      fail(key, "expected a link name of the platform");
    return n->as_string()->get();
  }

 private:
  std::string at(int line) const {
    return line > 0 ? r_.file() + ":" + std::to_string(line) + ": " : r_.where("sim.faults") + ": ";
  }
  TomlReader& r_;
  const toml::table& table_;
  std::string path_;
};

// The interval [from_s, until_s) of an interval fault, refused when empty.
void read_interval(const FaultReader& f, SimFault& fault) {
  fault.from_s = f.seconds("from_s");
  fault.until_s = f.seconds("until_s");
  if (!(fault.until_s > fault.from_s))
    f.fail("until_s", "the interval [" + std::to_string(fault.from_s) + ", " +
                          std::to_string(fault.until_s) + ") is empty; allowed: until_s > from_s");
}

SimFault read_fault(const FaultReader& f, int workers) {
  SimFault fault;
  fault.kind = f.kind();
  f.check_known(fault.kind);
  fault.where = f.where();
  const bool link_fault =
      fault.kind == FaultKind::kLinkFailure || fault.kind == FaultKind::kLinkDegradation;
  if (link_fault && f.has("link") == f.has("worker"))
    f.fail("", "a link fault names one link: worker = N (its NIC) or link = \"name\"");
  if (link_fault && f.has("link"))
    fault.link = f.text("link");
  else
    fault.worker = f.worker(workers);
  if (fault.kind == FaultKind::kHostFailure) {
    fault.at_s = f.seconds("at_s");
    return fault;
  }
  read_interval(f, fault);
  if (fault.kind == FaultKind::kLinkFailure) return fault;
  fault.factor = f.number("factor");
  if (!(fault.factor > 0) || !std::isfinite(fault.factor))
    f.fail("factor", std::to_string(fault.factor) + "; allowed: a finite factor > 0");
  return fault;
}

// Two stragglers of one worker may not overlap (their factors would not say which wins).
void check_overlaps(const std::vector<SimFault>& faults) {
  for (size_t i = 0; i < faults.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const SimFault& a = faults[i];
      const SimFault& b = faults[j];
      if (a.kind != FaultKind::kStraggler || b.kind != FaultKind::kStraggler) continue;
      if (a.worker != b.worker || a.from_s >= b.until_s || b.from_s >= a.until_s) continue;
      throw UserError(a.where + ": overlaps sim.faults[" + std::to_string(j) +
                      "], a straggler of the same worker; allowed: disjoint intervals per worker");
    }
}

void read_faults(TomlReader& r, Scenario& s) {
  const toml::node* node = r.node("sim.faults");
  if (node == nullptr) return;
  const toml::array* entries = node->as_array();
  if (entries == nullptr)
    r.fail("sim.faults", "expected an array of tables ([[sim.faults]] entries)");
  s.sim.faults.clear();
  for (size_t i = 0; i < entries->size(); ++i) {
    const toml::table* table = (*entries)[i].as_table();
    if (table == nullptr) r.fail("sim.faults", "entry " + std::to_string(i) + " is not a table");
    s.sim.faults.push_back(read_fault(FaultReader(r, *table, i), s.workers));
  }
  check_overlaps(s.sim.faults);
}

void write_faults(const Scenario& s, toml::table& out) {
  if (s.sim.faults.empty()) return;
  toml::array entries;
  for (const SimFault& fault : s.sim.faults) {
    toml::table t;
    t.insert("kind", std::string(to_string(fault.kind)));
    if (fault.link.empty()) t.insert("worker", static_cast<int64_t>(fault.worker));
    if (!fault.link.empty()) t.insert("link", fault.link);
    if (fault.kind == FaultKind::kHostFailure) {
      t.insert("at_s", fault.at_s);
    } else {
      t.insert("from_s", fault.from_s);
      t.insert("until_s", fault.until_s);
    }
    if (fault.kind == FaultKind::kLinkDegradation || fault.kind == FaultKind::kStraggler)
      t.insert("factor", fault.factor);
    entries.push_back(std::move(t));
  }
  put(out, "sim.faults", std::move(entries));
}

}  // namespace

ScenarioKey sim_faults_key() {
  return {"sim.faults", read_faults, write_faults, [](const Scenario& s) -> std::string {
            if (s.backend == BackendKind::kSim) return "";
            return "read only by backend = \"sim\" (faults are simulated); backend is \"" +
                   std::string(to_string(s.backend)) + "\"";
          }};
}

}  // namespace syncopate::detail
