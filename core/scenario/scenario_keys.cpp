// The scenario's keys: for each one how it is read, how it is written back, and under which
// settings it is read at all.
#include "core/scenario/scenario_keys.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <type_traits>

#include "core/data/data.hpp"
#include "core/nn/model.hpp"
#include "core/scenario/model_definition.hpp"

namespace syncopate::detail {
namespace {

using Unused = std::function<std::string(const Scenario&)>;

// An accessor of one Scenario member, for reading (Scenario&) and writing (const Scenario&).
#define FIELD(member) \
  [](auto& s) -> auto& { return s.member; }

// Comm's own names of the collective algorithms, in enum order.
const NameTable<Algorithm, 7>& algorithm_names() {
  static const NameTable<Algorithm, 7> table = [] {
    NameTable<Algorithm, 7> t;
    for (size_t i = 0; i < t.size(); ++i) {
      const auto algorithm = static_cast<Algorithm>(i);
      t[i] = {algorithm, to_string(algorithm)};
    }
    return t;
  }();
  return table;
}

// epoch_async's global model: on the master, or migrating to the worker that merges.
constexpr NameTable<GlobalModelPlacement, 2> kGlobalModelNames{
    {{GlobalModelPlacement::kMaster, "master"}, {GlobalModelPlacement::kMigrating, "migrating"}}};

std::string quoted(std::string_view text) {
  std::string out(1, '"');
  out.append(text);
  out.push_back('"');
  return out;
}

template <typename Get>
ScenarioKey integer(const std::string& name, Get get, int64_t min, int64_t max,
                    Unused unused = {}) {
  return {name,
          [=](TomlReader& r, Scenario& s) {
            auto& field = get(s);
            using T = std::remove_cvref_t<decltype(field)>;
            field = static_cast<T>(r.integer(name, static_cast<int64_t>(field), min, max));
          },
          [=](const Scenario& s, toml::table& out) {
            put(out, name, toml::value<int64_t>(static_cast<int64_t>(get(s))));
          },
          std::move(unused)};
}

template <typename Get>
ScenarioKey number(const std::string& name, Get get, double min, double max, Unused unused = {}) {
  return {name, [=](TomlReader& r, Scenario& s) { get(s) = r.number(name, get(s), min, max); },
          [=](const Scenario& s, toml::table& out) { put(out, name, toml::value<double>(get(s))); },
          std::move(unused)};
}

template <typename Get>
ScenarioKey boolean(const std::string& name, Get get, Unused unused = {}) {
  return {name, [=](TomlReader& r, Scenario& s) { get(s) = r.boolean(name, get(s)); },
          [=](const Scenario& s, toml::table& out) { put(out, name, toml::value<bool>(get(s))); },
          std::move(unused)};
}

template <typename Get>
ScenarioKey text(const std::string& name, Get get, std::vector<std::string> allowed = {},
                 Unused unused = {}) {
  return {name, [=](TomlReader& r, Scenario& s) { get(s) = r.string(name, get(s), allowed); },
          [=](const Scenario& s, toml::table& out) {
            put(out, name, toml::value<std::string>(get(s)));
          },
          std::move(unused)};
}

template <typename Get, typename E, size_t N>
ScenarioKey choice(const std::string& name, Get get, const NameTable<E, N>& names,
                   Unused unused = {}) {
  return {name, [=](TomlReader& r, Scenario& s) { get(s) = r.choice(name, get(s), names); },
          [=](const Scenario& s, toml::table& out) {
            put(out, name, toml::value<std::string>(std::string(name_in(names, get(s)))));
          },
          std::move(unused)};
}

// A key that nothing reads any more: always refused, saying why.
ScenarioKey retired(const std::string& name, const std::string& why) {
  return {name, [=](TomlReader& r, Scenario&) { r.node(name); },
          [](const Scenario&, toml::table&) {}, [=](const Scenario&) { return why; }};
}

// "" when the strategy is one of `readers`, else "read only by <who>; strategy.name is "x"".
std::string unless_strategy(const Scenario& s, std::initializer_list<StrategyKind> readers,
                            const std::string& who) {
  for (StrategyKind kind : readers)
    if (s.strategy.kind == kind) return "";
  return "read only by " + who + "; strategy.name is " + quoted(to_string(s.strategy.kind));
}

std::string unless_dataset(const Scenario& s, DatasetKind reader) {
  if (s.data.dataset == reader) return "";
  return "read only by data.dataset = " + quoted(to_string(reader)) + "; data.dataset is " +
         quoted(to_string(s.data.dataset));
}

std::string unless_block_order(const Scenario& s) {
  if (s.data_order() == DataOrder::kBlocks) return "";
  return "read only in the ds-tensor block order (data.order = \"blocks\", the default of "
         "epoch_sync and epoch_async); the data order is \"global\" (strategy.name is " +
         quoted(to_string(s.strategy.kind)) + ")";
}

std::string unless_sgd(const Scenario& s) {
  if (s.optimizer.kind == OptimizerKind::kSgd) return "";
  return "read only by optimizer.kind = \"sgd\"; optimizer.kind is " +
         quoted(to_string(s.optimizer.kind));
}

std::string unless_adam(const Scenario& s) {
  if (s.optimizer.kind != OptimizerKind::kSgd) return "";
  return "read only by optimizer.kind = \"adam\" or \"adamw\"; optimizer.kind is \"sgd\"";
}

std::string unless_schedule(const Scenario& s, ScheduleKind reader) {
  if (s.schedule.kind == reader) return "";
  return "read only by schedule.kind = " + quoted(to_string(reader)) + "; schedule.kind is " +
         quoted(to_string(s.schedule.kind));
}

std::string unless_cost_only(const Scenario& s) {
  if (s.sim.mode == SimMode::kCostOnly) return "";
  return "read only by sim.mode = \"cost_only\"; sim.mode is " + quoted(to_string(s.sim.mode));
}

std::string device_unused(const Scenario& s) {
  if (s.backend != BackendKind::kSim) return "";
  return "read only by the local and mpi backends (on the simulator the host profile decides "
         "how long compute takes); backend is \"sim\"";
}

std::string bucket_unused(const Scenario& s) {
  if (s.strategy.kind == StrategyKind::kLocalSgd && s.strategy.warmup_epochs == 0)
    return "local_sgd reads it only during its ddp warm-up; strategy.warmup_epochs is 0";
  if (s.strategy.kind == StrategyKind::kZero && s.strategy.stage == 1)
    return "zero stage 1 reduce-scatters the gradients in one piece after backward; read from "
           "strategy.stage = 2 (3: the units of layers gathered together)";
  return unless_strategy(
      s,
      {StrategyKind::kDdp, StrategyKind::kHierarchical, StrategyKind::kLocalSgd,
       StrategyKind::kZero},
      "ddp, hierarchical and local_sgd (during strategy.warmup_epochs), and zero (stages 2 "
      "and 3)");
}

std::string algorithm_unused(const Scenario& s) {
  if (s.strategy.kind == StrategyKind::kEpochSync && s.strategy.aggregation == Aggregation::kMaster)
    return "epoch_sync with strategy.aggregation = \"master\" always gathers to the master; "
           "read with aggregation = \"allreduce\"";
  if (s.strategy.kind == StrategyKind::kSerial)
    return "read only by strategies that communicate; strategy.name is \"serial\"";
  if (s.strategy.kind == StrategyKind::kZero && s.strategy.algorithm != Algorithm::kAuto &&
      s.strategy.algorithm != Algorithm::kRing && s.strategy.algorithm != Algorithm::kHierarchical)
    return "zero's reduce-scatters and allgathers run \"ring\" or \"hierarchical\" (\"auto\": "
           "hierarchical when the workers span nodes); strategy.name is \"zero\"";
  return "";
}

std::string optimizer_state_unused(const Scenario& s) {
  using enum StrategyKind;
  const StrategyKind kind = s.strategy.kind;
  const std::string name = quoted(to_string(kind));
  switch (s.strategy.optimizer_state) {
    case OptimizerStatePolicy::kKeep:
      return unless_strategy(s, {kEpochSync, kEpochAsync, kLocalSgd, kHierarchical},
                             "epoch_sync, epoch_async, local_sgd and hierarchical");
    case OptimizerStatePolicy::kReset:
      return unless_strategy(s, {kEpochSync, kEpochAsync},
                             "epoch_sync and epoch_async (\"reset\": at every ds-tensor block)");
    case OptimizerStatePolicy::kAverage:
      if (kind == kEpochAsync) return "epoch_async merges weights only; allowed: keep, reset";
      return unless_strategy(s, {kEpochSync, kLocalSgd, kHierarchical},
                             "epoch_sync, local_sgd and hierarchical (\"average\": with the "
                             "weights)");
  }
  return "";
}

ScenarioKey data_order() {
  return {"data.order",
          [](TomlReader& r, Scenario& s) {
            if (r.has("data.order"))
              s.data.order = r.choice("data.order", DataOrder::kGlobal, kDataOrderNames);
          },
          [](const Scenario& s, toml::table& out) {
            put(out, "data.order",
                toml::value<std::string>(std::string(to_string(s.data_order()))));
          },
          {}};
}

// data.partition: written back only when not iid, so that iid scenarios resolve as before.
ScenarioKey data_partition() {
  return {"data.partition",
          [](TomlReader& r, Scenario& s) {
            s.data.partition = r.choice("data.partition", s.data.partition, kDataPartitionNames);
          },
          [](const Scenario& s, toml::table& out) {
            if (s.data.partition == DataPartition::kIid) return;
            put(out, "data.partition",
                toml::value<std::string>(std::string(to_string(s.data.partition))));
          },
          [](const Scenario& s) -> std::string {
            const DataPartition p = s.data.partition;
            if (p != DataPartition::kDirichlet && p != DataPartition::kShards) return "";
            const std::string name = quoted(to_string(p));
            if (s.data.dataset == DatasetKind::kSyntheticRegression ||
                s.data.dataset == DatasetKind::kCsv)
              return name +
                     " splits by class and needs a classification dataset; data.dataset "
                     "is " +
                     quoted(to_string(s.data.dataset));
            if (s.backend == BackendKind::kSim && s.sim.mode == SimMode::kCostOnly)
              return name + " splits by class, and a cost-only run reads no labels";
            return "";
          }};
}

std::string unless_partition(const Scenario& s, DataPartition reader) {
  if (s.data.partition == reader) return "";
  return "read only by data.partition = " + quoted(to_string(reader)) + "; data.partition is " +
         quoted(to_string(s.data.partition));
}

ScenarioKey data_dir() {
  return {"data.dir", [](TomlReader& r, Scenario& s) { s.data.dir = r.string("data.dir", ""); },
          [](const Scenario& s, toml::table& out) {
            const std::string dir = s.data.dir.empty() ? default_fashion_mnist_dir() : s.data.dir;
            put(out, "data.dir", toml::value<std::string>(dir));
          },
          [](const Scenario& s) { return unless_dataset(s, DatasetKind::kFashionMnist); }};
}

// An array of column names.
template <typename Get>
ScenarioKey names(const std::string& name, Get get, Unused unused) {
  return {name,
          [=](TomlReader& r, Scenario& s) {
            const toml::node* node = r.node(name);
            if (node == nullptr) return;
            const toml::array* array = node->as_array();
            if (array == nullptr) r.fail(name, "expected an array of column names");
            get(s).clear();
            for (const toml::node& item : *array) {
              if (!item.is_string()) r.fail(name, "expected an array of column names");
              get(s).push_back(item.as_string()->get());
            }
          },
          [=](const Scenario& s, toml::table& out) {
            toml::array array;
            for (const std::string& column : get(s)) array.push_back(column);
            put(out, name, std::move(array));
          },
          std::move(unused)};
}

std::string number_text(const toml::node& n) {
  if (n.is_integer()) return std::to_string(*n.value<int64_t>());
  std::ostringstream out;
  out << *n.value<double>();
  return out.str();
}

bool is_recipe_key(std::string_view key) {
  for (size_t start = 0;;) {
    const size_t dot = key.find('.', start);
    if (!is_bare_key(key.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// sim.platform_params: recipe keys to override, nested tables flattened to dotted keys
// (`[sim.platform_params.nic] bandwidth = ...` and `--set sim.platform_params.nic.bandwidth=...`
// both give "nic.bandwidth").
void read_platform_params(TomlReader& r, const toml::table& table, const std::string& prefix,
                          std::map<std::string, std::string>& params) {
  for (const auto& [entry, n] : table) {
    const std::string key = prefix + std::string(entry.str());
    if (!is_recipe_key(entry.str()))  // bare, or dotted as the resolved scenario writes them
      r.fail("sim.platform_params." + key, "a recipe key holds only letters, digits, '_' and '-'");
    if (const toml::table* sub = n.as_table()) {
      if (sub->empty()) r.fail("sim.platform_params." + key, "an empty table sets nothing");
      read_platform_params(r, *sub, key + ".", params);
    } else if (n.is_string()) {
      params[key] = *n.value<std::string>();
    } else if (n.is_integer() || n.is_floating_point()) {
      params[key] = number_text(n);
    } else if (n.is_boolean()) {
      params[key] = *n.value<bool>() ? "true" : "false";
    } else {
      r.fail("sim.platform_params." + key, "expected a string, number or boolean");
    }
  }
}

ScenarioKey platform_params() {
  return {"sim.platform_params",
          [](TomlReader& r, Scenario& s) {
            const toml::table* table = r.table("sim.platform_params");
            if (table != nullptr) read_platform_params(r, *table, "", s.sim.platform_params);
          },
          [](const Scenario& s, toml::table& out) {
            if (s.sim.platform_params.empty()) return;
            toml::table params;
            for (const auto& [key, value] : s.sim.platform_params) params.insert(key, value);
            put(out, "sim.platform_params", std::move(params));
          },
          {}};
}

// sim.slowdown: worker index -> compute-time multiplier.
ScenarioKey slowdown() {
  return {"sim.slowdown",
          [](TomlReader& r, Scenario& s) {
            const toml::table* table = r.table("sim.slowdown");
            if (table == nullptr) return;
            for (const auto& [entry, n] : *table) {
              const std::string key = "sim.slowdown." + std::string(entry.str());
              int worker = -1;
              try {
                size_t used = 0;
                worker = std::stoi(std::string(entry.str()), &used);
                if (used != entry.str().size()) worker = -1;
              } catch (const std::exception&) {
                worker = -1;
              }
              if (worker < 0) r.fail(key, "expected a worker index as the key, e.g. \"3\" = 2.0");
              const auto v = n.value<double>();
              if (!v || !(*v >= 1e-6 && *v <= 1e6))
                r.fail(key, "expected a compute-time multiplier from 1e-6 to 1e6");
              s.sim.slowdown[worker] = *v;
            }
          },
          [](const Scenario& s, toml::table& out) {
            if (s.sim.slowdown.empty()) return;
            toml::table factors;
            for (const auto& [worker, factor] : s.sim.slowdown)
              factors.insert(std::to_string(worker), factor);
            put(out, "sim.slowdown", std::move(factors));
          },
          {}};
}

// model.name, or model.input and model.layers (one key reads both): a file gives one form.
ScenarioKey model_name() {
  return {"model.name",
          [](TomlReader& r, Scenario& s) {
            s.model.name = r.string("model.name", s.model.name, model_names());
          },
          [](const Scenario& s, toml::table& out) {
            if (!s.model.definition) put(out, "model.name", toml::value<std::string>(s.model.name));
          },
          [](const Scenario& s) -> std::string {
            if (!s.model.definition) return "";
            return "a model is named (model.name) or written out (model.input and model.layers), "
                   "not both";
          }};
}

ScenarioKey model_layers() {
  return {"model.layers",
          [](TomlReader& r, Scenario& s) {
            if (!r.has("model.layers") && !r.has("model.input")) return;
            s.model.definition = read_model_definition(r, s.name, s.batch_size);
          },
          [](const Scenario& s, toml::table& out) {
            std::string leaf;
            if (s.model.definition)
              write_model_definition(*s.model.definition, table_of(out, "model.layers", &leaf));
          },
          {}};
}

std::vector<ScenarioKey> top_and_model_keys() {
  return {
      text("name", FIELD(name)),
      integer("seed", FIELD(seed), 0, INT64_MAX),
      integer("epochs", FIELD(epochs), 1, 100000),
      integer("workers", FIELD(workers), 1, 1 << 20),
      integer("batch_size", FIELD(batch_size), 1, 1 << 24),
      choice("loss", FIELD(loss), kLossNames),
      number("huber_delta", FIELD(huber_delta), 1e-12, 1e12,
             [](const Scenario& s) -> std::string {
               if (s.loss == LossKind::kHuber) return "";
               return "read only by loss = \"huber\"; loss is " + quoted(to_string(s.loss));
             }),
      choice("backend", FIELD(backend), kBackendNames),
      boolean("eval_every_epoch", FIELD(eval_every_epoch)),
      model_name(),
      model_layers(),
      choice("model.device", FIELD(model.device), kDeviceNames, device_unused),
  };
}

// Keys of the regression datasets: CSV columns and split, scaling, the synthetic target.
std::vector<ScenarioKey> regression_data_keys() {
  const auto csv = [](const Scenario& s) { return unless_dataset(s, DatasetKind::kCsv); };
  return {
      names("data.feature_columns", FIELD(data.feature_columns), csv),
      integer("data.skip_rows", FIELD(data.skip_rows), 0, INT64_MAX, csv),
      number("data.test_fraction", FIELD(data.test_fraction), 1e-9, 1.0 - 1e-9, csv),
      choice("data.scale_features", FIELD(data.scale_features), kScalingNames,
             [](const Scenario& s) -> std::string {
               if (!s.data.normalize) return "";
               return "read only with data.normalize = false (data.normalize = true scales x by "
                      "one mean and standard deviation over all features)";
             }),
      choice("data.scale_targets", FIELD(data.scale_targets), kScalingNames,
             [](const Scenario& s) -> std::string {
               if (s.loss != LossKind::kCrossEntropy) return "";
               return "read only by the regression losses (mse, mae, huber); loss is "
                      "\"cross_entropy\"";
             }),
      choice(
          "data.target_function", FIELD(data.target_function), kTargetFunctionNames,
          [](const Scenario& s) { return unless_dataset(s, DatasetKind::kSyntheticRegression); }),
  };
}

std::vector<ScenarioKey> data_keys() {
  const std::string shape =
      "not read: the synthetic datasets take their sample shape and class count from the "
      "model (model.name)";
  return {
      choice("data.dataset", FIELD(data.dataset), kDatasetNames),
      data_dir(),
      text("data.path", FIELD(data.path), {},
           [](const Scenario& s) { return unless_dataset(s, DatasetKind::kCsv); }),
      names("data.targets", FIELD(data.targets),
            [](const Scenario& s) { return unless_dataset(s, DatasetKind::kCsv); }),
      integer("data.train_samples", FIELD(data.train_samples), 0, INT64_MAX),
      integer("data.test_samples", FIELD(data.test_samples), 0, INT64_MAX),
      boolean("data.normalize", FIELD(data.normalize)),
      integer("data.blocks", FIELD(data.blocks), 0, INT64_MAX, unless_block_order),
      boolean("data.shuffle_in_block", FIELD(data.shuffle_in_block), unless_block_order),
      data_order(),
      data_partition(),
      number("data.alpha", FIELD(data.alpha), 1e-6, 1e6,
             [](const Scenario& s) { return unless_partition(s, DataPartition::kDirichlet); }),
      integer("data.shards_per_worker", FIELD(data.shards_per_worker), 1, INT64_MAX,
              [](const Scenario& s) { return unless_partition(s, DataPartition::kShards); }),
      retired("data.features", shape),
      retired("data.classes", shape),
      number(
          "data.noise", FIELD(data.noise), 0.0, 1e6,
          [](const Scenario& s) { return unless_dataset(s, DatasetKind::kSyntheticRegression); }),
  };
}

std::vector<ScenarioKey> optimizer_keys() {
  const auto step = [](const Scenario& s) { return unless_schedule(s, ScheduleKind::kStep); };
  return {
      choice("optimizer.kind", FIELD(optimizer.kind), kOptimizerKindNames),
      number("optimizer.momentum", FIELD(optimizer.momentum), 0.0, 1.0, unless_sgd),
      boolean("optimizer.nesterov", FIELD(optimizer.nesterov), unless_sgd),
      number("optimizer.weight_decay", FIELD(optimizer.weight_decay), 0.0, 1.0),
      number("optimizer.beta1", FIELD(optimizer.beta1), 0.0, 1.0, unless_adam),
      number("optimizer.beta2", FIELD(optimizer.beta2), 0.0, 1.0, unless_adam),
      number("optimizer.eps", FIELD(optimizer.eps), 0.0, 1.0, unless_adam),
      choice("schedule.kind", FIELD(schedule.kind), kScheduleKindNames),
      number("schedule.lr", FIELD(schedule.lr), 0.0, 1e3),
      number("schedule.warmup_epochs", FIELD(schedule.warmup_epochs), 0.0, 1e5),
      number("schedule.warmup_start_factor", FIELD(schedule.warmup_start_factor), 0.0, 1.0),
      number("schedule.step_size", FIELD(schedule.step_size), 1e-9, 1e5, step),
      number("schedule.gamma", FIELD(schedule.gamma), 0.0, 1.0, step),
      number("schedule.min_lr", FIELD(schedule.min_lr), 0.0, 1e3,
             [](const Scenario& s) { return unless_schedule(s, ScheduleKind::kCosine); }),
  };
}

std::string diloco_only(const Scenario& s) {
  return unless_strategy(s, {StrategyKind::kDiloco}, "diloco");
}

// zero's pages given back: only where it holds pages of its own to give back.
std::string give_back_unused(const Scenario& s) {
  if (s.strategy.kind != StrategyKind::kZero)
    return unless_strategy(s, {StrategyKind::kZero}, "zero (stages 2 and 3)");
  if (s.strategy.stage == 1)
    return "zero stage 1 keeps its gradients and parameters whole; read from strategy.stage = 2 "
           "(the gradients; 3: and the parameters)";
  if (s.backend == BackendKind::kSim && s.sim.mode == SimMode::kCostOnly)
    return "a cost-only run holds no gradients or parameters; sim.mode is \"cost_only\"";
  if (s.backend != BackendKind::kSim && s.model.device == Device::kCuda)
    return "the device pass reads the model and writes the gradients whole, in page-locked "
           "memory; model.device is \"cuda\"";
  return "";
}

std::string compression_unused(const Scenario& s) {
  using enum StrategyKind;
  return unless_strategy(s, {kDdp, kHierarchical, kEpochSync, kLocalSgd, kDiloco, kZero},
                         "ddp and hierarchical (gradients), epoch_sync, local_sgd and diloco "
                         "(weights), and zero (both)");
}

std::vector<ScenarioKey> strategy_keys() {
  using enum StrategyKind;
  return {
      choice("strategy.name", FIELD(strategy.kind), kStrategyNames),
      integer("strategy.every", FIELD(strategy.every), 1, 1 << 30,
              [](const Scenario& s) {
                return unless_strategy(s, {kEpochSync, kLocalSgd, kDiloco},
                                       "epoch_sync (epochs), local_sgd and diloco (steps)");
              }),
      choice("strategy.aggregation", FIELD(strategy.aggregation), kAggregationNames,
             [](const Scenario& s) { return unless_strategy(s, {kEpochSync}, "epoch_sync"); }),
      number("strategy.bucket_mb", FIELD(strategy.bucket_mb), 1e-6, 1e6, bucket_unused),
      choice("strategy.algorithm", FIELD(strategy.algorithm), algorithm_names(), algorithm_unused),
      choice("strategy.optimizer_state", FIELD(strategy.optimizer_state), kOptimizerStateNames,
             optimizer_state_unused),
      integer("strategy.warmup_epochs", FIELD(strategy.warmup_epochs), 0, 1 << 20,
              [](const Scenario& s) { return unless_strategy(s, {kLocalSgd}, "local_sgd"); }),
      number("strategy.merge_local_weight", FIELD(strategy.merge_local_weight), 0.0, 1.0,
             [](const Scenario& s) { return unless_strategy(s, {kEpochAsync}, "epoch_async"); }),
      number("strategy.outer_lr", FIELD(strategy.outer_lr), 0.0, 1e3, diloco_only),
      number("strategy.outer_momentum", FIELD(strategy.outer_momentum), 0.0, 0.999999, diloco_only),
      boolean("strategy.outer_nesterov", FIELD(strategy.outer_nesterov), diloco_only),
      integer("strategy.fragments", FIELD(strategy.fragments), 1, 1 << 20, diloco_only),
      integer("strategy.stage", FIELD(strategy.stage), 1, 3,
              [](const Scenario& s) { return unless_strategy(s, {kZero}, "zero"); }),
      boolean("strategy.give_back_memory", FIELD(strategy.give_back_memory), give_back_unused),
      choice("strategy.global_model", FIELD(strategy.global_model), kGlobalModelNames,
             [](const Scenario& s) { return unless_strategy(s, {kEpochAsync}, "epoch_async"); }),
      choice("strategy.compression", FIELD(strategy.compression), kCompressionNames,
             compression_unused),
      integer("strategy.powersgd_rank", FIELD(strategy.powersgd_rank), 1, 1 << 20,
              [](const Scenario& s) {
                if (s.strategy.compression == Compression::kPowerSgd) return std::string();
                return "read only by strategy.compression = \"powersgd\"; strategy.compression "
                       "is " +
                       quoted(to_string(s.strategy.compression));
              }),
  };
}

std::string unless_noise(const Scenario& s) {
  if (s.sim.noise.kind != NoiseKind::kNone) return "";
  return "read only with per-step noise; sim.noise.kind is \"none\"";
}

// sim.fault_blocks: only where a worker can be lost and the run go on.
std::string unless_elastic(const Scenario& s) {
  const bool elastic =
      s.strategy.kind == StrategyKind::kEpochSync || s.strategy.kind == StrategyKind::kEpochAsync;
  const bool loses_a_worker = std::any_of(s.sim.faults.begin(), s.sim.faults.end(), [](auto& f) {
    return f.kind == FaultKind::kHostFailure ||
           (f.kind == FaultKind::kLinkFailure && f.link.empty());
  });
  if (elastic && loses_a_worker) return "";
  return "read only by strategy.name = \"epoch_sync\" or \"epoch_async\" with a host_failure or a "
         "worker's link_failure in [[sim.faults]]";
}

// sim.restart.recovery_s: only where a fault aborts the job and a checkpoint set can restart it.
std::string restart_unused(const Scenario& s) {
  if (s.backend != BackendKind::kSim)
    return "read only on the simulator (backend = \"sim\"); backend is " +
           quoted(to_string(s.backend));
  const bool aborts = std::any_of(s.sim.faults.begin(), s.sim.faults.end(), [](auto& f) {
    return f.kind == FaultKind::kHostFailure || f.kind == FaultKind::kLinkFailure;
  });
  if (!aborts)
    return "read only with a host_failure or link_failure in [[sim.faults]] (nothing else "
           "aborts the job)";
  if (unless_elastic(s).empty())
    return "epoch_sync and epoch_async go on without a lost worker: there is no abort to "
           "restart from (strategy.name is " +
           quoted(to_string(s.strategy.kind)) + ")";
  if (s.checkpoint.every == 0 && s.checkpoint.every_steps == 0)
    return "a restart continues from the last checkpoint set; set checkpoint.every (or "
           "checkpoint.every_steps)";
  return "";
}

ScenarioKey restart_recovery() {
  return {"sim.restart.recovery_s",
          [](TomlReader& r, Scenario& s) {
            if (r.has("sim.restart.recovery_s"))
              s.sim.restart_recovery_s = r.number("sim.restart.recovery_s", 0.0, 0.0, 1e12);
          },
          [](const Scenario& s, toml::table& out) {
            if (s.sim.restart_recovery_s >= 0)
              put(out, "sim.restart.recovery_s", toml::value<double>(s.sim.restart_recovery_s));
          },
          restart_unused};
}

// [sim] and [mpi] hold one backend's settings: a scenario may carry them to any backend (one
// file for a simulated and a measured run), but they must be consistent among themselves.
std::vector<ScenarioKey> backend_keys() {
  return {
      text("sim.platform", FIELD(sim.platform)),
      platform_params(),
      choice("sim.fidelity", FIELD(sim.fidelity), kFidelityNames),
      choice("sim.mode", FIELD(sim.mode), kSimModeNames),
      boolean("sim.fast_forward", FIELD(sim.fast_forward), unless_cost_only),
      slowdown(),
      choice("sim.noise.kind", FIELD(sim.noise.kind), kNoiseNames),
      number("sim.noise.sigma", FIELD(sim.noise.sigma), 0, 10, unless_noise),
      integer("sim.noise.seed", FIELD(sim.noise.seed), 0, INT64_MAX, unless_noise),
      integer("sim.cost_only_train_samples", FIELD(sim.cost_only_train_samples), 0, INT64_MAX,
              unless_cost_only),
      sim_faults_key(),
      choice("sim.fault_blocks", FIELD(sim.fault_blocks), kFaultBlocksNames, unless_elastic),
      restart_recovery(),
      choice("mpi.transport", FIELD(mpi.transport), kTransportNames),
  };
}

// What trace.json holds (see core/base/trace.hpp).
std::vector<ScenarioKey> trace_keys() {
  return {
      integer("trace.workers", FIELD(trace.workers), 0, 1 << 20),
      integer("trace.steps", FIELD(trace.steps), 0, INT64_MAX),
  };
}

// Checkpoints (core/train/checkpoint.hpp).
std::vector<ScenarioKey> checkpoint_keys() {
  return {integer("checkpoint.every", FIELD(checkpoint.every), 0, 1 << 30),
          integer("checkpoint.every_steps", FIELD(checkpoint.every_steps), 0, 1 << 30)};
}

#undef FIELD

}  // namespace

toml::table& table_of(toml::table& root, const std::string& key, std::string* leaf) {
  toml::table* current = &root;
  size_t start = 0;
  for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', start)) {
    const std::string part = key.substr(start, dot - start);
    toml::node* next = current->get(part);
    if (next == nullptr) next = current->insert(part, toml::table{}).first->second.as_table();
    current = next->as_table();
    start = dot + 1;
  }
  *leaf = key.substr(start);
  return *current;
}

const std::vector<ScenarioKey>& scenario_keys() {
  static const std::vector<ScenarioKey> keys = [] {
    std::vector<ScenarioKey> all;
    for (auto part : {top_and_model_keys(), data_keys(), regression_data_keys(), optimizer_keys(),
                      strategy_keys(), backend_keys(), trace_keys(), checkpoint_keys()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return keys;
}

}  // namespace syncopate::detail
