// Scenarios: parsing (with --set overrides), the checks across keys, the resolved scenario.
#include "core/scenario/scenario.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/base/check.hpp"
#include "core/comm/collective_schedule.hpp"
#include "core/scenario/scenario_keys.hpp"

namespace syncopate {
namespace {

using detail::scenario_keys;

bool is_regression(DatasetKind dataset) {
  return dataset == DatasetKind::kSyntheticRegression || dataset == DatasetKind::kCsv;
}

// The name is the run directory's (runs/<name>): one plain folder name that fits the file
// system with the suffixes the run directory may add ("-12.partial").
void validate_name(const Scenario& s, const TomlReader& reader) {
  constexpr size_t kMaxName = 200;
  if (s.name.empty() || s.name == "." || s.name == ".." ||
      s.name.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
    reader.fail("name", "'" + s.name +
                            "' is not a plain folder name (no '/', not '.' or '..'); "
                            "the run directory is runs/<name>");
  if (s.name.size() > kMaxName)
    reader.fail("name", std::to_string(s.name.size()) + " characters; at most " +
                            std::to_string(kMaxName) + " (the run directory is runs/<name>)");
}

// Cost-only epochs are planned step by step: their count must stay within reach.
void validate_cost_only_steps(const Scenario& s, const TomlReader& reader) {
  constexpr int64_t kMaxSteps = 10'000'000;
  if (s.sim.mode != SimMode::kCostOnly) return;
  const bool own = s.sim.cost_only_train_samples > 0;  // else data.train_samples, if given
  const int64_t samples = own ? s.sim.cost_only_train_samples : s.data.train_samples;
  const int64_t global_batch = int64_t{s.workers} * s.batch_size;
  const int64_t steps = samples / global_batch + 1;
  if (steps > kMaxSteps)
    reader.fail(own ? "sim.cost_only_train_samples" : "data.train_samples",
                std::to_string(samples) + " samples make " + std::to_string(steps) +
                    " steps per epoch of workers x batch_size = " + std::to_string(global_batch) +
                    " samples; at most " + std::to_string(kMaxSteps) + " steps are planned");
}

// The regression losses against the dataset, the device and the model's input.
void validate_regression(const Scenario& s, const TomlReader& reader) {
  const bool classify = s.loss == LossKind::kCrossEntropy;
  if (!classify && !is_regression(s.data.dataset))
    reader.fail("loss", std::string(to_string(s.loss)) +
                            " needs a regression dataset (synthetic-regression or csv)");
  if (classify && is_regression(s.data.dataset))
    reader.fail("loss", "a regression dataset needs a regression loss (mse, mae or huber)");
  if (s.model.device == Device::kCuda && !classify && s.loss != LossKind::kMse)
    reader.fail("loss", std::string(to_string(s.loss)) +
                            " runs on the host only; model.device = \"cuda\" has "
                            "cross_entropy and mse");
  const auto columns = static_cast<int64_t>(s.data.feature_columns.size());
  if (s.data.dataset == DatasetKind::kCsv && columns > 0) {
    const ModelSpec spec = s.model.spec();
    if (columns != numel(spec.sample_shape))
      reader.fail("data.feature_columns",
                  std::to_string(columns) + " feature columns, model " + spec.name + " takes " +
                      std::to_string(numel(spec.sample_shape)) + " inputs per sample");
  }
}

// strategy.compression against the strategy and the aggregation.
void validate_compression(const Scenario& s, const TomlReader& reader) {
  const Compression c = s.strategy.compression;
  if (c == Compression::kNone) return;
  const std::string name(to_string(c));
  if (c == Compression::kPowerSgd && s.strategy.kind != StrategyKind::kDdp)
    reader.fail("strategy.compression",
                "powersgd compresses ddp's gradients only; strategy.name "
                "is \"" +
                    std::string(to_string(s.strategy.kind)) +
                    "\" (allowed there: none, fp16, bf16)");
  if ((s.strategy.kind == StrategyKind::kEpochSync &&
       s.strategy.aggregation == Aggregation::kMaster) ||
      s.strategy.algorithm == Algorithm::kMaster)
    reader.fail("strategy.compression", name +
                                            " through the master (aggregation or algorithm "
                                            "\"master\") is not modelled; allowed: none");
}

// Checks across keys; each error names the key it is about (and its file:line or --set).
void validate_checkpoint(const Scenario& s, const TomlReader& reader) {
  if (s.checkpoint.every_steps == 0) return;
  const auto refuse = [&](const std::string& why) { reader.fail("checkpoint.every_steps", why); };
  if (s.checkpoint.every > 1)
    refuse("checkpoint.every = " + std::to_string(s.checkpoint.every) +
           " asks for a checkpoint every so many epochs, every_steps for some in every epoch; "
           "set checkpoint.every to 0 or 1 with it");
  const std::string why = mid_epoch_checkpoint_refusal(s);
  if (why.empty()) return;
  if (s.strategy.kind == StrategyKind::kEpochAsync) refuse(why + "; use checkpoint.every");
  if (s.data_order() == DataOrder::kBlocks)
    refuse(why + "; use data.order = \"global\" or checkpoint.every");
  refuse(why + "; set sim.fast_forward = false with it");
}

void validate(const Scenario& s, const TomlReader& reader) {
  validate_compression(s, reader);
  validate_checkpoint(s, reader);
  if (s.data.dataset == DatasetKind::kCsv && s.data.path.empty())
    reader.fail("data.path", "the csv dataset needs data.path");
  if (s.data.dataset == DatasetKind::kCsv && s.data.targets.empty())
    reader.fail("data.targets", "the csv dataset needs data.targets (column names)");
  if (s.strategy.kind == StrategyKind::kLocalSgd && s.strategy.warmup_epochs >= s.epochs &&
      s.epochs > 1)
    reader.fail("strategy.warmup_epochs", "must be smaller than epochs");
  validate_regression(s, reader);
  try {
    syncopate::validate(s.optimizer);
    syncopate::validate(s.schedule);
  } catch (const UserError& e) {
    // "optimizer.momentum: ..." from core/optim: put the key's file:line (or --set) first.
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    if (colon == std::string::npos) throw UserError(s.source + ": " + what);
    throw UserError(reader.where(what.substr(0, colon)) + what.substr(colon));
  }
  const bool step_synchronous =
      s.strategy.kind == StrategyKind::kDdp || s.strategy.kind == StrategyKind::kLocalSgd ||
      s.strategy.kind == StrategyKind::kHierarchical || s.strategy.kind == StrategyKind::kDiloco ||
      s.strategy.kind == StrategyKind::kZero;
  if (s.strategy.kind == StrategyKind::kDiloco && s.strategy.fragments > s.strategy.every)
    reader.fail("strategy.fragments", "must be at most strategy.every (" +
                                          std::to_string(s.strategy.every) +
                                          "): each fragment synchronises once every "
                                          "strategy.every steps, at its own offset");
  if (step_synchronous && s.data_order() != DataOrder::kGlobal)
    reader.fail("data.order", "strategy " + std::string(to_string(s.strategy.kind)) +
                                  " synchronises every step and needs data.order = \"global\"");
  validate_name(s, reader);
  validate_cost_only_steps(s, reader);
  for (const auto& [worker, factor] : s.sim.slowdown)
    if (worker >= s.workers)
      reader.fail("sim.slowdown." + std::to_string(worker),
                  "worker index out of range (workers = " + std::to_string(s.workers) + ")");
}

// Refuses every key that was written but that this scenario does not read.
void refuse_unused(const Scenario& s, TomlReader& reader) {
  for (const detail::ScenarioKey& key : scenario_keys()) {
    if (!key.unused || !reader.has(key.name)) continue;
    const std::string why = key.unused(s);
    if (!why.empty()) reader.fail(key.name, why);
  }
}

// The scenario as TOML: every key it reads, defaults included.
toml::table resolved(const Scenario& s) {
  toml::table out;
  for (const detail::ScenarioKey& key : scenario_keys())
    if (!key.unused || key.unused(s).empty()) key.write(s, out);
  return out;
}

// Applies "key=value" overrides; errors about them name the --set text.
void add_overrides(TomlReader& reader, const std::vector<std::string>& overrides) {
  for (const std::string& assignment : overrides) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UserError("--set " + assignment + ": expected key=value");
    const std::string key = assignment.substr(0, eq);
    reader.add_override(key, assignment.substr(eq + 1), "--set " + assignment + ": " + key);
  }
}

// The collective the strategy runs most, and the bytes one call of it moves.
struct MainCollective {
  std::string what;
  size_t bytes = 0;
};

std::optional<MainCollective> main_collective(const Scenario& s, int64_t model_params) {
  const bool half = s.strategy.compression == Compression::kFp16 ||
                    s.strategy.compression == Compression::kBf16;  // on the wire
  const size_t element = half ? 2 : sizeof(float);
  const size_t model_bytes = element * static_cast<size_t>(model_params);
  switch (s.strategy.kind) {
    case StrategyKind::kSerial:
      return std::nullopt;
    case StrategyKind::kDdp: {  // buckets hold bucket_mb MiB of fp32 gradients
      const auto bucket =
          static_cast<size_t>(s.strategy.bucket_mb * 1024 * 1024) * element / sizeof(float);
      return MainCollective{"a gradient bucket's allreduce", std::min(bucket, model_bytes)};
    }
    case StrategyKind::kEpochSync:
      if (s.strategy.aggregation == Aggregation::kMaster) return std::nullopt;
      return MainCollective{"the weights' allreduce", model_bytes};
    case StrategyKind::kEpochAsync:
      return MainCollective{"the final average of the snapshots", model_bytes};
    case StrategyKind::kLocalSgd:
      return MainCollective{"the weights' allreduce every strategy.every steps", model_bytes};
    case StrategyKind::kHierarchical:
      return MainCollective{"the weights' average across nodes at each epoch end", model_bytes};
    case StrategyKind::kDiloco:
      return MainCollective{"the weights' allreduce (one fragment's) every strategy.every steps",
                            model_bytes / static_cast<size_t>(s.strategy.fragments)};
    case StrategyKind::kZero:
      return std::nullopt;  // reduce-scatter and allgather (print_scenario's own note)
  }
  return std::nullopt;
}

}  // namespace

std::string mid_epoch_checkpoint_refusal(const Scenario& s) {
  if (s.strategy.kind == StrategyKind::kEpochAsync)
    return "epoch_async's global model between merges is in no worker's checkpoint";
  if (s.data_order() == DataOrder::kBlocks)
    return "in the block order (data.order = \"blocks\", epoch_sync's default) the workers' "
           "epochs hold different step counts, so a step is no common point of the epoch";
  if (s.sim.mode == SimMode::kCostOnly && s.sim.fast_forward)
    return "cost-only fast-forward skips steps";
  return "";
}

std::string print_scenario(const Scenario& s, int64_t model_params) {
  std::string out = s.resolved_toml + "\n";
  if (s.strategy.algorithm != Algorithm::kAuto) return out;
  if (s.strategy.kind == StrategyKind::kZero)
    return out +
           "\n# strategy.algorithm = \"auto\": zero's reduce-scatters and allgathers run "
           "hierarchically\n#   (a ring inside every node, then one across nodes per local "
           "index) when the\n#   workers span nodes of equal size, numbered node by node; "
           "otherwise the ring\n#   (core/comm/collective_schedule.hpp, GatherLayout).\n";
  const std::optional<MainCollective> main = main_collective(s, model_params);
  if (!main) return out;
  const Algorithm one_node = resolve_algorithm(Algorithm::kAuto, s.workers, main->bytes, {});
  std::ostringstream note;
  note << "\n# strategy.algorithm = \"auto\" picks per collective "
          "(core/comm/collective_schedule.cpp):\n"
          "#   hierarchical when the workers span several nodes; otherwise recursive_doubling\n"
          "#   below 64 KiB, rabenseifner for a power-of-two worker count, ring for the others.\n"
       << "# Here, for " << main->what << " (" << main->bytes << " bytes, " << s.workers
       << (s.workers == 1 ? " worker" : " workers") << "):\n#   " << to_string(one_node)
       << " if the workers share one node, hierarchical if they span several\n"
          "#   (the simulated platform's nodes, or the MPI ranks' hosts, decide).\n";
  if (s.workers == 1) note << "#   With one worker no data moves.\n";
  return out + note.str();
}

ModelSpec ModelSection::spec() const { return definition ? *definition : zoo_spec(name); }

DataOrder Scenario::data_order() const {
  if (data.order) return *data.order;
  return strategy.kind == StrategyKind::kEpochSync || strategy.kind == StrategyKind::kEpochAsync
             ? DataOrder::kBlocks
             : DataOrder::kGlobal;
}

Scenario parse_scenario(const std::string& text, const std::string& source,
                        const std::vector<std::string>& overrides) {
  TomlReader reader(parse_toml_text(text, source), source);
  add_overrides(reader, overrides);
  Scenario s;
  s.source = source;
  for (const detail::ScenarioKey& key : scenario_keys()) key.read(reader, s);
  reader.check_all_used();
  s.schedule.total_epochs = s.epochs;
  refuse_unused(s, reader);
  validate(s, reader);
  if (s.data.dataset == DatasetKind::kCsv) s.data.path_where = reader.where("data.path");
  const toml::table root = resolved(s);
  std::ostringstream as_toml, as_json;
  as_toml << root;
  as_json << toml::json_formatter{root};
  s.resolved_toml = as_toml.str();
  s.resolved_json = as_json.str();
  return s;
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_scenario(read_text_file(path, "scenario file"), path, overrides);
}

const char* default_scenario_text() {
  return R"(# The embedded default scenario: the Fashion-MNIST MLP trained for real (emulation) by 4
# simulated H100-class GPUs of one mn5-acc node, 3 epochs. scripts/main.sh compares ddp,
# epoch_sync and epoch_async on it (syncopate sweep --strategy ...) and writes the report.
name = "default-fmnist-mlp"
seed = 42
epochs = 3
workers = 4
batch_size = 64
backend = "sim"

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
name = "epoch_sync"

[sim]
platform = "mn5-acc"
platform_params = { nodes = 1 }
fidelity = "flow"
mode = "emulation"
)";
}

}  // namespace syncopate
