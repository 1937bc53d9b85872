#include "core/scenario/scenario.hpp"

#include <toml++/toml.h>

#include <array>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

// Names in enum order: the scenario's allowed values and to_string() share them.
constexpr std::array<std::string_view, 6> kStrategyNames = {
    "serial", "ddp", "epoch_sync", "epoch_async", "local_sgd", "hierarchical"};
constexpr std::array<std::string_view, 3> kBackendNames = {"local", "sim", "mpi"};
constexpr std::array<std::string_view, 3> kPolicyNames = {"keep", "reset", "average"};

template <size_t N>
std::vector<std::string> names(const std::array<std::string_view, N>& values) {
  return {values.begin(), values.end()};
}

// Where a node came from, for error messages: "file:line" or "--set key=value".
struct Origin {
  std::string source;
  std::string override_text;
};

std::string where(const Origin& origin, const toml::node& node) {
  if (!origin.override_text.empty()) return "--set " + origin.override_text;
  std::ostringstream out;
  out << origin.source;
  if (node.source().begin.line > 0) out << ":" << node.source().begin.line;
  return out.str();
}

[[noreturn]] void fail(const Origin& origin, const toml::node& node, const std::string& key,
                       const std::string& message) {
  throw UserError(where(origin, node) + ": " + key + ": " + message);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

using Setter = std::function<void(Scenario&, const toml::node&, const Origin&, const std::string&)>;

Setter integer(auto member, int64_t min, int64_t max) {
  return [=](Scenario& s, const toml::node& n, const Origin& o, const std::string& key) {
    const auto v = n.value<int64_t>();
    if (!n.is_integer() || !v) fail(o, n, key, "expected an integer");
    if (*v < min || *v > max)
      fail(o, n, key,
           "value " + std::to_string(*v) + " out of range [" + std::to_string(min) + ", " +
               std::to_string(max) + "]");
    s.*member = static_cast<std::remove_reference_t<decltype(s.*member)>>(*v);
  };
}

template <typename Section, typename T>
Setter nested_integer(Section Scenario::*section, T Section::*member, int64_t min, int64_t max) {
  return [=](Scenario& s, const toml::node& n, const Origin& o, const std::string& key) {
    const auto v = n.value<int64_t>();
    if (!n.is_integer() || !v) fail(o, n, key, "expected an integer");
    if (*v < min || *v > max)
      fail(o, n, key,
           "value " + std::to_string(*v) + " out of range [" + std::to_string(min) + ", " +
               std::to_string(max) + "]");
    (s.*section).*member = static_cast<T>(*v);
  };
}

template <typename Section>
Setter number(Section Scenario::*section, double Section::*member, double min, double max) {
  return [=](Scenario& s, const toml::node& n, const Origin& o, const std::string& key) {
    const auto v = n.value<double>();
    if (!(n.is_floating_point() || n.is_integer()) || !v) fail(o, n, key, "expected a number");
    if (!(*v >= min && *v <= max))
      fail(o, n, key,
           "value " + std::to_string(*v) + " out of range [" + std::to_string(min) + ", " +
               std::to_string(max) + "]");
    (s.*section).*member = *v;
  };
}

template <typename Section>
Setter boolean(Section Scenario::*section, bool Section::*member) {
  return [=](Scenario& s, const toml::node& n, const Origin& o, const std::string& key) {
    if (!n.is_boolean()) fail(o, n, key, "expected true or false");
    (s.*section).*member = *n.value<bool>();
  };
}

std::string string_value(const toml::node& n, const Origin& o, const std::string& key) {
  if (!n.is_string()) fail(o, n, key, "expected a string");
  return *n.value<std::string>();
}

// A string restricted to `allowed`, converted by `convert` (index into allowed).
template <typename F>
Setter choice(std::vector<std::string> allowed, F assign) {
  return [=](Scenario& s, const toml::node& n, const Origin& o, const std::string& key) {
    const std::string v = string_value(n, o, key);
    for (size_t i = 0; i < allowed.size(); ++i) {
      if (allowed[i] == v) {
        assign(s, i, v);
        return;
      }
    }
    fail(o, n, key, "unknown value \"" + v + "\"; allowed: " + join(allowed));
  };
}

template <typename Section>
Setter text(Section Scenario::*section, std::string Section::*member) {
  return [=](Scenario& s, const toml::node& n, const Origin& o, const std::string& key) {
    (s.*section).*member = string_value(n, o, key);
  };
}

// The schema: every key a scenario may hold.
const std::map<std::string, Setter>& schema() {
  static const std::map<std::string, Setter> keys = [] {
    std::map<std::string, Setter> k;
    k["name"] = [](Scenario& s, const toml::node& n, const Origin& o, const std::string& key) {
      s.name = string_value(n, o, key);
    };
    k["seed"] = integer(&Scenario::seed, 0, INT64_MAX);
    k["epochs"] = integer(&Scenario::epochs, 1, 100000);
    k["workers"] = integer(&Scenario::workers, 1, 1 << 20);
    k["batch_size"] = integer(&Scenario::batch_size, 1, 1 << 24);
    k["loss"] = choice({"cross_entropy", "mse"},
                       [](Scenario& s, size_t, const std::string& v) { s.loss = v; });
    k["backend"] = choice(names(kBackendNames), [](Scenario& s, size_t i, const std::string&) {
      s.backend = static_cast<BackendKind>(i);
    });
    k["eval_every_epoch"] = [](Scenario& s, const toml::node& n, const Origin& o,
                               const std::string& key) {
      if (!n.is_boolean()) fail(o, n, key, "expected true or false");
      s.eval_every_epoch = *n.value<bool>();
    };
    k["model.name"] = choice({"mlp", "cnn", "nfnet", "nfnet_full", "resnet50"},
                             [](Scenario& s, size_t, const std::string& v) { s.model.name = v; });
    k["model.device"] = choice(
        {"cpu", "cuda"}, [](Scenario& s, size_t, const std::string& v) { s.model.device = v; });
    k["data.dataset"] =
        choice({"fashion-mnist", "synthetic", "synthetic-regression", "csv"},
               [](Scenario& s, size_t, const std::string& v) { s.data.dataset = v; });
    k["data.dir"] = text(&Scenario::data, &DataSection::dir);
    k["data.path"] = text(&Scenario::data, &DataSection::path);
    k["data.targets"] = [](Scenario& s, const toml::node& n, const Origin& o,
                           const std::string& key) {
      const auto* array = n.as_array();
      if (!array) fail(o, n, key, "expected an array of column names");
      s.data.targets.clear();
      for (const auto& item : *array) s.data.targets.push_back(string_value(item, o, key));
    };
    k["data.train_samples"] =
        nested_integer(&Scenario::data, &DataSection::train_samples, 0, INT64_MAX);
    k["data.test_samples"] =
        nested_integer(&Scenario::data, &DataSection::test_samples, 0, INT64_MAX);
    k["data.normalize"] = boolean(&Scenario::data, &DataSection::normalize);
    k["data.blocks"] = nested_integer(&Scenario::data, &DataSection::blocks, 0, INT64_MAX);
    k["data.shuffle_in_block"] = boolean(&Scenario::data, &DataSection::shuffle_in_block);
    k["data.order"] = choice({"global", "blocks"},
                             [](Scenario& s, size_t, const std::string& v) { s.data.order = v; });
    k["data.features"] = nested_integer(&Scenario::data, &DataSection::features, 1, 1 << 24);
    k["data.classes"] = nested_integer(&Scenario::data, &DataSection::classes, 2, 1 << 20);
    k["data.noise"] = number(&Scenario::data, &DataSection::noise, 0.0, 1e6);
    k["optimizer.kind"] =
        choice({"sgd", "adam", "adamw"},
               [](Scenario& s, size_t, const std::string& v) { s.optimizer.kind = v; });
    k["optimizer.momentum"] = number(&Scenario::optimizer, &OptimizerConfig::momentum, 0.0, 1.0);
    k["optimizer.nesterov"] = boolean(&Scenario::optimizer, &OptimizerConfig::nesterov);
    k["optimizer.weight_decay"] =
        number(&Scenario::optimizer, &OptimizerConfig::weight_decay, 0.0, 1.0);
    k["optimizer.beta1"] = number(&Scenario::optimizer, &OptimizerConfig::beta1, 0.0, 1.0);
    k["optimizer.beta2"] = number(&Scenario::optimizer, &OptimizerConfig::beta2, 0.0, 1.0);
    k["optimizer.eps"] = number(&Scenario::optimizer, &OptimizerConfig::eps, 0.0, 1.0);
    k["schedule.kind"] =
        choice({"constant", "step", "cosine"},
               [](Scenario& s, size_t, const std::string& v) { s.schedule.kind = v; });
    k["schedule.lr"] = number(&Scenario::schedule, &ScheduleConfig::lr, 0.0, 1e3);
    k["schedule.warmup_epochs"] =
        number(&Scenario::schedule, &ScheduleConfig::warmup_epochs, 0.0, 1e5);
    k["schedule.warmup_start_factor"] =
        number(&Scenario::schedule, &ScheduleConfig::warmup_start_factor, 0.0, 1.0);
    k["schedule.step_size"] = number(&Scenario::schedule, &ScheduleConfig::step_size, 1e-9, 1e5);
    k["schedule.gamma"] = number(&Scenario::schedule, &ScheduleConfig::gamma, 0.0, 1.0);
    k["schedule.min_lr"] = number(&Scenario::schedule, &ScheduleConfig::min_lr, 0.0, 1e3);
    k["strategy.name"] =
        choice(names(kStrategyNames), [](Scenario& s, size_t i, const std::string&) {
          s.strategy.kind = static_cast<StrategyKind>(i);
        });
    k["strategy.every"] = nested_integer(&Scenario::strategy, &StrategySection::every, 1, 1 << 30);
    k["strategy.aggregation"] =
        choice({"allreduce", "master"},
               [](Scenario& s, size_t, const std::string& v) { s.strategy.aggregation = v; });
    k["strategy.bucket_mb"] = number(&Scenario::strategy, &StrategySection::bucket_mb, 1e-6, 1e6);
    k["strategy.algorithm"] = choice({"auto", "ring", "rabenseifner", "recursive_doubling",
                                      "binomial_tree", "hierarchical", "master"},
                                     [](Scenario& s, size_t, const std::string& v) {
                                       s.strategy.algorithm = *parse_algorithm(v);
                                     });
    k["strategy.optimizer_state"] =
        choice(names(kPolicyNames), [](Scenario& s, size_t i, const std::string&) {
          s.strategy.optimizer_state = static_cast<OptimizerStatePolicy>(i);
        });
    k["strategy.warmup_epochs"] =
        nested_integer(&Scenario::strategy, &StrategySection::warmup_epochs, 0, 1 << 20);
    k["strategy.merge_local_weight"] =
        number(&Scenario::strategy, &StrategySection::merge_local_weight, 0.0, 1.0);
    k["sim.platform"] = text(&Scenario::sim, &SimSection::platform);
    k["sim.fidelity"] =
        choice({"message", "flow", "analytic"},
               [](Scenario& s, size_t, const std::string& v) { s.sim.fidelity = v; });
    k["sim.mode"] = choice({"emulation", "cost_only"},
                           [](Scenario& s, size_t, const std::string& v) { s.sim.mode = v; });
    k["sim.fast_forward"] = boolean(&Scenario::sim, &SimSection::fast_forward);
    k["sim.cost_only_train_samples"] =
        nested_integer(&Scenario::sim, &SimSection::cost_only_train_samples, 0, INT64_MAX);
    k["mpi.transport"] =
        choice({"mpi", "nccl", "nccl_native"},
               [](Scenario& s, size_t, const std::string& v) { s.mpi.transport = v; });
    return k;
  }();
  return keys;
}

// Tables whose keys are free-form (maps), handled apart from the schema.
void set_map_entry(Scenario& s, const std::string& table, const std::string& entry,
                   const toml::node& n, const Origin& o) {
  const std::string key = table + "." + entry;
  if (table == "sim.platform_params") {
    if (n.is_string()) {
      s.sim.platform_params[entry] = *n.value<std::string>();
    } else if (n.is_integer()) {
      s.sim.platform_params[entry] = std::to_string(*n.value<int64_t>());
    } else if (n.is_floating_point()) {
      std::ostringstream out;
      out << *n.value<double>();
      s.sim.platform_params[entry] = out.str();
    } else if (n.is_boolean()) {
      s.sim.platform_params[entry] = *n.value<bool>() ? "true" : "false";
    } else {
      fail(o, n, key, "expected a string, number or boolean");
    }
    return;
  }
  // sim.slowdown: worker index -> compute-time multiplier
  int worker = -1;
  try {
    size_t used = 0;
    worker = std::stoi(entry, &used);
    if (used != entry.size()) worker = -1;
  } catch (const std::exception&) {
    worker = -1;
  }
  if (worker < 0) fail(o, n, key, "expected a worker index as the key, e.g. \"3\" = 2.0");
  const auto v = n.value<double>();
  if (!v || !(*v > 0)) fail(o, n, key, "expected a positive number (compute-time multiplier)");
  s.sim.slowdown[worker] = *v;
}

void walk(Scenario& s, const toml::table& table, const std::string& prefix, const Origin& o) {
  for (const auto& [k, node] : table) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (key == "sim.platform_params" || key == "sim.slowdown") {
      const auto* sub = node.as_table();
      if (!sub) fail(o, node, key, "expected a table");
      for (const auto& [entry, value] : *sub)
        set_map_entry(s, key, std::string(entry.str()), value, o);
      continue;
    }
    if (const auto* sub = node.as_table()) {
      walk(s, *sub, key, o);
      continue;
    }
    const auto& keys = schema();
    const auto it = keys.find(key);
    if (it == keys.end()) {
      std::vector<std::string> allowed;
      const std::string section = prefix.empty() ? "" : prefix + ".";
      for (const auto& [name, setter] : keys) {
        if (name.rfind(section, 0) == 0 && name.find('.', section.size()) == std::string::npos)
          allowed.push_back(name);
      }
      fail(o, node, key, "unknown key; allowed here: " + join(allowed));
    }
    it->second(s, node, o, key);
  }
}

toml::table parse_toml(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream out;
    out << source << ":" << e.source().begin.line << ": " << e.description();
    throw UserError(out.str());
  }
}

// Applies one "a.b.c=value" override to the table, returning the parsed value's node path.
void apply_override(toml::table& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UserError("--set " + assignment + ": expected key=value");
  const std::string key = assignment.substr(0, eq), raw = assignment.substr(eq + 1);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + raw);
  } catch (const toml::parse_error&) {
    parsed.insert_or_assign("v", raw);  // a bare word is a string
  }
  toml::table* table = &root;
  size_t start = 0;
  for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', start)) {
    const std::string part = key.substr(start, dot - start);
    auto* node = table->get(part);
    if (!node) node = table->insert_or_assign(part, toml::table{}).first->second.as_table();
    if (!node->is_table()) throw UserError("--set " + assignment + ": " + part + " is not a table");
    table = node->as_table();
    start = dot + 1;
  }
  table->insert_or_assign(key.substr(start), *parsed.get("v"));
}

void validate(const Scenario& s) {
  const auto bad = [&](const std::string& key, const std::string& message) {
    throw UserError(s.source + ": " + key + ": " + message);
  };
  if (s.data.dataset == "csv" && s.data.path.empty())
    bad("data.path", "the csv dataset needs data.path");
  if (s.data.dataset == "csv" && s.data.targets.empty())
    bad("data.targets", "the csv dataset needs data.targets (column names)");
  if (s.strategy.kind == StrategyKind::kLocalSgd && s.strategy.warmup_epochs >= s.epochs &&
      s.epochs > 1)
    bad("strategy.warmup_epochs", "must be smaller than epochs");
  if (s.loss == "mse" && s.data.dataset != "synthetic-regression" && s.data.dataset != "csv")
    bad("loss", "mse needs a regression dataset (synthetic-regression or csv)");
  if (s.loss == "cross_entropy" &&
      (s.data.dataset == "synthetic-regression" || s.data.dataset == "csv"))
    bad("loss", "a regression dataset needs loss = \"mse\"");
  try {
    syncopate::validate(s.optimizer);
    syncopate::validate(s.schedule);
  } catch (const UserError& e) {
    throw UserError(s.source + ": " + e.what());
  }
  const bool step_synchronous = s.strategy.kind == StrategyKind::kDdp ||
                                s.strategy.kind == StrategyKind::kLocalSgd ||
                                s.strategy.kind == StrategyKind::kHierarchical;
  if (step_synchronous && s.data_order() != DataOrder::kGlobal)
    bad("data.order", "strategy " + std::string(to_string(s.strategy.kind)) +
                          " synchronises every step and needs data.order = \"global\"");
  if (s.strategy.kind == StrategyKind::kEpochAsync &&
      s.strategy.optimizer_state == OptimizerStatePolicy::kAverage)
    bad("strategy.optimizer_state", "epoch_async merges weights only; allowed: keep, reset");
  for (const auto& [worker, factor] : s.sim.slowdown)
    if (worker >= s.workers)
      bad("sim.slowdown." + std::to_string(worker),
          "worker index out of range (workers = " + std::to_string(s.workers) + ")");
}

}  // namespace

DataOrder Scenario::data_order() const {
  if (data.order == "global") return DataOrder::kGlobal;
  if (data.order == "blocks") return DataOrder::kBlocks;
  return strategy.kind == StrategyKind::kEpochSync || strategy.kind == StrategyKind::kEpochAsync
             ? DataOrder::kBlocks
             : DataOrder::kGlobal;
}

Scenario parse_scenario(const std::string& text, const std::string& source,
                        const std::vector<std::string>& overrides) {
  toml::table root = parse_toml(text, source);
  Scenario s;
  s.source = source;
  walk(s, root, "", Origin{source, ""});
  for (const auto& assignment : overrides) {
    toml::table one;
    apply_override(one, assignment);
    walk(s, one, "", Origin{source, assignment});
    apply_override(root, assignment);
  }
  s.schedule.total_epochs = s.epochs;
  validate(s);
  std::ostringstream as_toml, as_json;
  as_toml << root;
  as_json << toml::json_formatter{root};
  s.resolved_toml = as_toml.str();
  s.resolved_json = as_json.str();
  return s;
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot open scenario file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_scenario(text.str(), path, overrides);
}

const char* default_scenario_text() {
  return R"(# The embedded default scenario: the Fashion-MNIST MLP, one epoch, serial SGD.
name = "default-fmnist-mlp"
seed = 42
epochs = 1
workers = 1
batch_size = 64
backend = "local"

[model]
name = "mlp"

[data]
dataset = "fashion-mnist"

[optimizer]
kind = "sgd"
momentum = 0.9

[schedule]
kind = "cosine"
lr = 0.05

[strategy]
name = "serial"
)";
}

std::string_view to_string(StrategyKind kind) { return kStrategyNames[static_cast<size_t>(kind)]; }
std::string_view to_string(BackendKind kind) { return kBackendNames[static_cast<size_t>(kind)]; }
std::string_view to_string(OptimizerStatePolicy policy) {
  return kPolicyNames[static_cast<size_t>(policy)];
}

}  // namespace syncopate
