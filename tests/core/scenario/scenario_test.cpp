// Scenarios: defaults, overrides, refused keys with file:line:key, enum names, the resolved
// scenario.
#include "core/scenario/scenario.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/base/check.hpp"
#include "tests/common/scenario_error.hpp"

namespace syncopate {
namespace {

TEST(Scenario, NestedPlatformParamsBecomeDottedKeys) {
  const std::string text =
      "backend = \"sim\"\n[sim.platform_params]\nnodes = 4\n[sim.platform_params.nic]\n"
      "bandwidth = \"10GBps\"\n";
  const Scenario s =
      parse_scenario(text, "exp.toml", {"sim.platform_params.fabric.oversubscription=4"});
  EXPECT_EQ(s.sim.platform_params.at("nodes"), "4");
  EXPECT_EQ(s.sim.platform_params.at("nic.bandwidth"), "10GBps");
  EXPECT_EQ(s.sim.platform_params.at("fabric.oversubscription"), "4");
  // The resolved scenario reads back to the same overrides.
  const Scenario again = parse_scenario(s.resolved_toml, "resolved.toml");
  EXPECT_EQ(again.sim.platform_params, s.sim.platform_params);
  EXPECT_NE(scenario_error("backend = \"sim\"\n[sim.platform_params.nic]\n")
                .find("sim.platform_params.nic: an empty table sets nothing"),
            std::string::npos);
}

TEST(Scenario, DefaultParsesToDocumentedValues) {
  const Scenario s = parse_scenario(default_scenario_text(), "<default>");
  EXPECT_EQ(s.model.name, "mlp");
  EXPECT_EQ(s.workers, 4);
  EXPECT_EQ(s.epochs, 3);
  EXPECT_EQ(s.batch_size, 64);
  EXPECT_EQ(s.backend, BackendKind::kSim);
  EXPECT_EQ(s.sim.mode, SimMode::kEmulation);
  EXPECT_EQ(s.sim.platform, "mn5-acc");
  EXPECT_EQ(s.strategy.kind, StrategyKind::kEpochSync);
  EXPECT_DOUBLE_EQ(s.optimizer.momentum, 0.9);
  EXPECT_NE(s.resolved_json.find("\"mlp\""), std::string::npos);
}

TEST(Scenario, OverridesWinAndAreRecorded) {
  const Scenario s = parse_scenario(default_scenario_text(), "<default>",
                                    {"workers=8", "strategy.name=epoch_sync", "strategy.every=2",
                                     "sim.platform_params.nodes=4", "sim.slowdown.3=2.5"});
  EXPECT_EQ(s.workers, 8);
  EXPECT_EQ(s.strategy.kind, StrategyKind::kEpochSync);
  EXPECT_EQ(s.strategy.every, 2);
  EXPECT_EQ(s.sim.platform_params.at("nodes"), "4");
  EXPECT_DOUBLE_EQ(s.sim.slowdown.at(3), 2.5);
  EXPECT_EQ(s.data_order(), DataOrder::kBlocks);
  EXPECT_NE(s.resolved_toml.find("every = 2"), std::string::npos);
}

TEST(Scenario, UnknownKeyNamesFileLineAndAllowedKeys) {
  const std::string e = scenario_error("seed = 1\n[optimizer]\nmomentun = 0.9\n");
  EXPECT_NE(e.find("exp.toml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer.momentun"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer.momentum"), std::string::npos) << e;  // listed as allowed
}

TEST(Scenario, BadValueNamesAllowedValues) {
  const std::string e = scenario_error("[strategy]\nname = \"allreduce_everything\"\n");
  EXPECT_NE(e.find("exp.toml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("strategy.name"), std::string::npos) << e;
  EXPECT_NE(e.find("epoch_async"), std::string::npos) << e;
}

TEST(Scenario, MpiTransportDefaultsToMpiAndListsItsChoices) {
  EXPECT_EQ(parse_scenario(default_scenario_text(), "<default>").mpi.transport, Transport::kMpi);
  EXPECT_EQ(parse_scenario("[mpi]\ntransport = \"nccl_native\"\n", "exp.toml").mpi.transport,
            Transport::kNcclNative);
  const std::string e = scenario_error("seed = 3\n[mpi]\ntransport = \"gloo\"\n");
  EXPECT_NE(e.find("exp.toml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("mpi.transport"), std::string::npos) << e;
  EXPECT_NE(e.find("mpi, nccl, nccl_native"), std::string::npos) << e;
}

TEST(Scenario, WrongTypeAndRange) {
  EXPECT_NE(scenario_error("epochs = \"ten\"\n").find("expected an integer"), std::string::npos);
  EXPECT_NE(scenario_error("workers = 0\n").find("out of range"), std::string::npos);
  EXPECT_NE(scenario_error("[optimizer]\nmomentum = 1.5\n").find("exp.toml:2"), std::string::npos);
}

TEST(Scenario, OptimizerAndScheduleChecksNameTheKeysLine) {
  const std::string e = scenario_error("seed = 1\n[optimizer]\nnesterov = true\n");
  EXPECT_EQ(e.rfind("exp.toml:3: optimizer.nesterov: true needs momentum > 0", 0), 0u) << e;
  const std::string lr = scenario_error("[schedule]\nkind = \"cosine\"\nlr = 0.1\nmin_lr = 0.5\n");
  EXPECT_EQ(lr.rfind("exp.toml:4: schedule.min_lr:", 0), 0u) << lr;
}

TEST(Scenario, SyntaxErrorHasLine) {
  const std::string e = scenario_error("seed = 1\nepochs = = 2\n");
  EXPECT_NE(e.find("exp.toml:2"), std::string::npos) << e;
}

TEST(Scenario, OverrideErrorsNameTheOverride) {
  const std::string e = scenario_error(default_scenario_text(), {"strategy.algorithm=butterfly"});
  EXPECT_NE(e.find("--set strategy.algorithm=butterfly"), std::string::npos) << e;
  EXPECT_NE(e.find("rabenseifner"), std::string::npos) << e;
  EXPECT_FALSE(scenario_error(default_scenario_text(), {"nonsense"}).empty());
}

TEST(Scenario, CrossFieldValidation) {
  EXPECT_NE(
      scenario_error("[strategy]\nname = \"ddp\"\n[data]\norder = \"blocks\"\n").find("data.order"),
      std::string::npos);
  EXPECT_NE(scenario_error("workers = 2\n[sim.slowdown]\n\"5\" = 2.0\n").find("sim.slowdown.5"),
            std::string::npos);
  EXPECT_NE(scenario_error("loss = \"mse\"\n").find("regression"), std::string::npos);
}

TEST(Scenario, ShippedScenariosParse) {
  for (const char* name : {"fmnist-mlp", "fmnist-cnn"}) {
    const Scenario s =
        load_scenario(std::string(SYNCOPATE_SOURCE_DIR) + "/scenarios/" + name + ".toml");
    EXPECT_EQ(s.name, name);
    EXPECT_LE(s.epochs, 15);
    EXPECT_EQ(s.batch_size, 64);
    EXPECT_EQ(s.optimizer.kind, OptimizerKind::kSgd);
    EXPECT_DOUBLE_EQ(s.optimizer.momentum, 0.9);
  }
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(SYNCOPATE_SOURCE_DIR) + "/scenarios")) {
    if (entry.path().extension() == ".toml") {
      EXPECT_NO_THROW(load_scenario(entry.path().string())) << entry.path();
    }
  }
}

TEST(Scenario, MissingFile) {
  try {
    load_scenario("/nonexistent/x.toml");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.toml"), std::string::npos);
  }
}

// --- Knobs that the chosen strategy, backend or dataset does not read are refused. ---

// The error of `text` plus `sets`, which must name `key` at `where` and contain `why`.
void expect_refused(const std::string& text, const std::vector<std::string>& sets,
                    const std::string& where, const std::string& key, const std::string& why) {
  const std::string e = scenario_error(text, sets);
  EXPECT_EQ(e.rfind(where + ": " + key + ": ", 0), 0u) << e;
  EXPECT_NE(e.find(why), std::string::npos) << e;
}

std::string strategy_file(const std::string& name, const std::string& extra) {
  return "workers = 2\n[strategy]\nname = \"" + name + "\"\n" + extra;
}

TEST(ScenarioKnobs, DeadKnobNamesFileLineKeyAndTheSettingThatReadsIt) {
  expect_refused(strategy_file("ddp", "every = 2\n"), {}, "exp.toml:4", "strategy.every",
                 "read only by epoch_sync (epochs), local_sgd and diloco (steps); strategy.name is "
                 "\"ddp\"");
  // From --set, the override is named instead of file:line.
  expect_refused(strategy_file("ddp", ""), {"strategy.every=3"}, "--set strategy.every=3",
                 "strategy.every", "strategy.name is \"ddp\"");
}

TEST(ScenarioKnobs, EveryIsReadOnlyByEpochSyncAndLocalSgd) {
  for (const char* name : {"serial", "ddp", "epoch_async", "hierarchical"})
    expect_refused(strategy_file(name, "every = 2\n"), {}, "exp.toml:4", "strategy.every",
                   "strategy.name is \"" + std::string(name) + "\"");
  EXPECT_EQ(parse_scenario(strategy_file("epoch_sync", "every = 2\n"), "e").strategy.every, 2);
  EXPECT_EQ(parse_scenario(strategy_file("local_sgd", "every = 3\n"), "e").strategy.every, 3);
  EXPECT_EQ(parse_scenario(strategy_file("diloco", "every = 5\n"), "e").strategy.every, 5);
}

TEST(ScenarioKnobs, OuterOptimizerAndFragmentsAreReadOnlyByDiloco) {
  for (const char* key :
       {"outer_lr = 1.0", "outer_momentum = 0.5", "outer_nesterov = false", "fragments = 2"})
    expect_refused(strategy_file("local_sgd", std::string(key) + "\n"), {}, "exp.toml:4",
                   "strategy." + std::string(key).substr(0, std::string(key).find(' ')),
                   "read only by diloco; strategy.name is \"local_sgd\"");
  const Scenario s = parse_scenario(strategy_file("diloco", ""), "e");
  EXPECT_EQ(s.strategy.outer_lr, 0.7);  // the paper's values
  EXPECT_EQ(s.strategy.outer_momentum, 0.9);
  EXPECT_TRUE(s.strategy.outer_nesterov);
  EXPECT_EQ(s.strategy.fragments, 1);
  EXPECT_EQ(
      parse_scenario(strategy_file("diloco", "every = 4\nfragments = 4\n"), "e").strategy.fragments,
      4);
  expect_refused(strategy_file("diloco", "every = 4\nfragments = 5\n"), {}, "exp.toml:5",
                 "strategy.fragments", "must be at most strategy.every (4)");
  expect_refused("data.order = \"blocks\"\n" + strategy_file("diloco", ""), {}, "exp.toml:1",
                 "data.order", "diloco synchronises every step");
}

TEST(ScenarioKnobs, AggregationIsReadOnlyByEpochSync) {
  for (const char* name : {"serial", "ddp", "epoch_async", "local_sgd", "hierarchical"})
    expect_refused(strategy_file(name, "aggregation = \"master\"\n"), {}, "exp.toml:4",
                   "strategy.aggregation", "read only by epoch_sync");
  EXPECT_EQ(parse_scenario(strategy_file("epoch_sync", "aggregation = \"master\"\n"), "e")
                .strategy.aggregation,
            Aggregation::kMaster);
}

TEST(ScenarioKnobs, OptimizerStateResetOnlyWhereBlocksStart) {
  for (const char* name : {"serial", "ddp", "local_sgd", "hierarchical"})
    expect_refused(strategy_file(name, "optimizer_state = \"reset\"\n"), {}, "exp.toml:4",
                   "strategy.optimizer_state", "read only by epoch_sync and epoch_async");
  for (const char* name : {"epoch_sync", "epoch_async"})
    EXPECT_EQ(parse_scenario(strategy_file(name, "optimizer_state = \"reset\"\n"), "e")
                  .strategy.optimizer_state,
              OptimizerStatePolicy::kReset);
  // "average" is read by the strategies that average weights; epoch_async merges weights only.
  for (const char* name : {"serial", "ddp"})
    expect_refused(strategy_file(name, "optimizer_state = \"average\"\n"), {}, "exp.toml:4",
                   "strategy.optimizer_state", "epoch_sync, local_sgd and hierarchical");
  expect_refused(strategy_file("epoch_async", "optimizer_state = \"average\"\n"), {}, "exp.toml:4",
                 "strategy.optimizer_state", "allowed: keep, reset");
  EXPECT_NO_THROW(
      parse_scenario(strategy_file("hierarchical", "optimizer_state = \"average\"\n"), "e"));
}

TEST(ScenarioKnobs, AlgorithmIsRefusedWhereNoCollectiveReadsIt) {
  expect_refused(strategy_file("serial", "algorithm = \"ring\"\n"), {}, "exp.toml:4",
                 "strategy.algorithm", "strategy.name is \"serial\"");
  expect_refused(strategy_file("epoch_sync", "aggregation = \"master\"\nalgorithm = \"ring\"\n"),
                 {}, "exp.toml:5", "strategy.algorithm", "aggregation = \"allreduce\"");
  // Hierarchical reads it in its buckets and in its cross-node average.
  EXPECT_EQ(parse_scenario(strategy_file("hierarchical", "algorithm = \"ring\"\n"), "e")
                .strategy.algorithm,
            Algorithm::kRing);
}

TEST(ScenarioKnobs, StrategySpecificKeys) {
  expect_refused(strategy_file("epoch_sync", "bucket_mb = 1\n"), {}, "exp.toml:4",
                 "strategy.bucket_mb", "read only by ddp, hierarchical and local_sgd");
  expect_refused(strategy_file("local_sgd", "bucket_mb = 1\n"), {}, "exp.toml:4",
                 "strategy.bucket_mb", "strategy.warmup_epochs is 0");
  EXPECT_NO_THROW(parse_scenario(
      "epochs = 3\n" + strategy_file("local_sgd", "bucket_mb = 1\nwarmup_epochs = 1\n"), "e"));
  expect_refused(strategy_file("ddp", "warmup_epochs = 1\n"), {}, "exp.toml:4",
                 "strategy.warmup_epochs", "read only by local_sgd");
  expect_refused(strategy_file("epoch_sync", "merge_local_weight = 1\n"), {}, "exp.toml:4",
                 "strategy.merge_local_weight", "read only by epoch_async");
  expect_refused(strategy_file("epoch_sync", "global_model = \"migrating\"\n"), {}, "exp.toml:4",
                 "strategy.global_model", "read only by epoch_async");
  EXPECT_EQ(parse_scenario(strategy_file("epoch_async", "global_model = \"migrating\"\n"), "e")
                .strategy.global_model,
            GlobalModelPlacement::kMigrating);
  EXPECT_EQ(parse_scenario(strategy_file("epoch_async", ""), "e").strategy.global_model,
            GlobalModelPlacement::kMaster);
}

TEST(ScenarioKnobs, DataKeysOfOtherDatasetsAndOrders) {
  expect_refused("[data]\ndataset = \"synthetic\"\nfeatures = 32\n", {}, "exp.toml:3",
                 "data.features", "take their sample shape and class count from the model");
  expect_refused("[data]\ndataset = \"synthetic\"\nclasses = 4\n", {}, "exp.toml:3", "data.classes",
                 "from the model");
  expect_refused("[data]\ndataset = \"synthetic\"\nnoise = 0.5\n", {}, "exp.toml:3", "data.noise",
                 "read only by data.dataset = \"synthetic-regression\"");
  EXPECT_DOUBLE_EQ(
      parse_scenario("loss = \"mse\"\n[data]\ndataset = \"synthetic-regression\"\nnoise = 0.5\n",
                     "e")
          .data.noise,
      0.5);
  expect_refused("[data]\ndataset = \"synthetic\"\ndir = \"/tmp\"\n", {}, "exp.toml:3", "data.dir",
                 "data.dataset is \"synthetic\"");
  expect_refused("[data]\npath = \"x.csv\"\n", {}, "exp.toml:2", "data.path",
                 "read only by data.dataset = \"csv\"");
  expect_refused(strategy_file("ddp", "[data]\nblocks = 8\n"), {}, "exp.toml:5", "data.blocks",
                 "block order");
  EXPECT_EQ(parse_scenario(strategy_file("epoch_sync", "[data]\nblocks = 8\n"), "e").data.blocks,
            8);
}

TEST(ScenarioKnobs, DeviceCudaOnTheSimulatorIsRefused) {
  expect_refused("backend = \"sim\"\n[model]\ndevice = \"cuda\"\n", {}, "exp.toml:3",
                 "model.device", "backend is \"sim\"");
  expect_refused("[model]\ndevice = \"cuda\"\n", {"backend=sim"}, "exp.toml:2", "model.device",
                 "read only by the local and mpi backends");
  EXPECT_EQ(parse_scenario("backend = \"mpi\"\n[model]\ndevice = \"cuda\"\n", "e").model.device,
            Device::kCuda);
}

TEST(ScenarioKnobs, OptimizerScheduleAndSimulatorModeKeys) {
  expect_refused("[optimizer]\nkind = \"adam\"\nmomentum = 0.9\n", {}, "exp.toml:3",
                 "optimizer.momentum", "optimizer.kind is \"adam\"");
  expect_refused("[optimizer]\nbeta1 = 0.8\n", {}, "exp.toml:2", "optimizer.beta1",
                 "optimizer.kind is \"sgd\"");
  expect_refused("[schedule]\nkind = \"cosine\"\ngamma = 0.5\n", {}, "exp.toml:3", "schedule.gamma",
                 "read only by schedule.kind = \"step\"");
  expect_refused("[schedule]\nmin_lr = 0.001\n", {}, "exp.toml:2", "schedule.min_lr",
                 "schedule.kind is \"constant\"");
  expect_refused("[sim]\nfast_forward = false\n", {}, "exp.toml:2", "sim.fast_forward",
                 "read only by sim.mode = \"cost_only\"");
  // [sim] and [mpi] are each one backend's settings: a file may carry them to another backend.
  EXPECT_NO_THROW(parse_scenario("backend = \"mpi\"\n[sim]\nplatform = \"loopback\"\n", "e"));
}

// --- Every enum's names round-trip, through the table and through a scenario file. ---

// Each name of `table` set as `key` (after `context`, which makes it valid) parses to its value
// and is written back under the same name. All keys are dotted at the top level.
template <typename E, size_t N>
void expect_round_trip(const NameTable<E, N>& table, const std::string& key,
                       const std::function<std::string(std::string_view)>& context = {}) {
  for (const auto& [value, name] : table) {
    EXPECT_EQ(to_string(value), name);
    EXPECT_EQ(value_in(table, name), value) << name;
    const std::string text =
        (context ? context(name) : "") + key + " = \"" + std::string(name) + "\"\n";
    const Scenario s = parse_scenario(text, "round-trip.toml");
    const std::string leaf = key.substr(key.rfind('.') + 1);
    EXPECT_NE(s.resolved_toml.find(leaf + " = '" + std::string(name) + "'"), std::string::npos)
        << key << " " << name << "\n"
        << s.resolved_toml;
  }
  EXPECT_FALSE(value_in(table, "no-such-name").has_value());
}

TEST(ScenarioEnums, EveryNameRoundTrips) {
  const auto epoch_sync = [](std::string_view) { return "strategy.name = \"epoch_sync\"\n"; };
  const auto dataset = [](std::string_view name) -> std::string {
    if (name == "synthetic-regression") return "loss = \"mse\"\n";
    if (name == "csv") return "loss = \"mse\"\ndata.path = \"d.csv\"\ndata.targets = [\"y\"]\n";
    return "";
  };
  const auto loss = [](std::string_view name) -> std::string {
    return name != "cross_entropy" ? "data.dataset = \"synthetic-regression\"\n" : "";
  };
  expect_round_trip(kStrategyNames, "strategy.name");
  expect_round_trip(kBackendNames, "backend");
  expect_round_trip(kLossNames, "loss", loss);
  expect_round_trip(kDeviceNames, "model.device");
  expect_round_trip(kDatasetNames, "data.dataset", dataset);
  expect_round_trip(kDataOrderNames, "data.order");
  const auto regression = [](std::string_view) {
    return "loss = \"mse\"\ndata.dataset = \"synthetic-regression\"\ndata.normalize = false\n";
  };
  expect_round_trip(kScalingNames, "data.scale_features", regression);
  expect_round_trip(kScalingNames, "data.scale_targets", regression);
  expect_round_trip(kTargetFunctionNames, "data.target_function", regression);
  expect_round_trip(kAggregationNames, "strategy.aggregation", epoch_sync);
  expect_round_trip(kOptimizerStateNames, "strategy.optimizer_state", epoch_sync);
  expect_round_trip(kFidelityNames, "sim.fidelity");
  expect_round_trip(kSimModeNames, "sim.mode");
  expect_round_trip(kTransportNames, "mpi.transport");
  expect_round_trip(kOptimizerKindNames, "optimizer.kind");
  expect_round_trip(kScheduleKindNames, "schedule.kind");
}

// --- The resolved scenario: every key it reads, defaults included, and what auto chooses. ---

TEST(ScenarioPrint, ShowsDefaultsAndOnlyTheKeysThatAreRead) {
  const Scenario s = parse_scenario("[strategy]\nname = \"ddp\"\n", "exp.toml", {"workers=4"});
  const std::string text = print_scenario(s, 1000);
  for (const char* shown : {"bucket_mb = 25.0", "algorithm = 'auto'", "order = 'global'",
                            "kind = 'constant'", "momentum = 0.0", "fidelity = 'flow'",
                            "transport = 'mpi'", "dir = '/usr/share/datasets/fashion-mnist'"})
    EXPECT_NE(text.find(shown), std::string::npos) << shown << "\n" << text;
  // Keys that ddp, sgd and a constant schedule do not read are not shown.
  for (const char* hidden :
       {"\naggregation = ", "\nmerge_local_weight = ", "\nbeta1 = ", "\ngamma = ", "\nmin_lr = ",
        "\nblocks = ", "\nnoise = ", "\nfeatures = ", "\nfast_forward = "})
    EXPECT_EQ(text.find(hidden), std::string::npos) << hidden << text;
  // strategy.every (checkpoint.every is read by every scenario).
  const size_t strategy = text.find("[strategy]");
  ASSERT_NE(strategy, std::string::npos) << text;
  const std::string section = text.substr(strategy, text.find("\n[", strategy + 1) - strategy);
  EXPECT_EQ(section.find("\nevery = "), std::string::npos) << section;
}

TEST(ScenarioPrint, ResolvedScenarioLoadsBackToItself) {
  for (const std::vector<std::string>& sets :
       std::vector<std::vector<std::string>>{{},
                                             {"strategy.name=epoch_sync", "strategy.every=2"},
                                             {"strategy.name=local_sgd", "workers=4",
                                              "sim.slowdown.1=2.0", "sim.platform_params.nodes=2"},
                                             {"backend=sim", "sim.mode=cost_only"}}) {
    const Scenario s = parse_scenario(default_scenario_text(), "<default>", sets);
    const Scenario again = parse_scenario(s.resolved_toml, "resolved.toml");
    EXPECT_EQ(again.resolved_toml, s.resolved_toml);
    EXPECT_EQ(again.resolved_json, s.resolved_json);
  }
}

TEST(ScenarioPrint, SaysWhatAutoChoosesForTheMainCollective) {
  const auto note = [](const std::string& strategy, int workers, int64_t params) {
    const Scenario s =
        parse_scenario(default_scenario_text(), "<default>",
                       {"strategy.name=" + strategy, "workers=" + std::to_string(workers)});
    return print_scenario(s, params);
  };
  // 8 workers, 4 MB of weights: rabenseifner (power of two); 6 workers: ring; 4 kB: recursive
  // doubling; always hierarchical across nodes.
  const std::string big = note("epoch_sync", 8, 1 << 20);
  EXPECT_NE(big.find("the weights' allreduce (4194304 bytes, 8 workers):\n#   rabenseifner if"),
            std::string::npos)
      << big;
  EXPECT_NE(big.find("hierarchical if they span several"), std::string::npos) << big;
  EXPECT_NE(note("local_sgd", 6, 1 << 20).find("#   ring if"), std::string::npos);
  EXPECT_NE(note("ddp", 8, 1000).find("(4000 bytes, 8 workers):\n#   recursive_doubling if"),
            std::string::npos);
  // ddp's collective is a bucket: at most strategy.bucket_mb.
  EXPECT_NE(note("ddp", 8, 100 << 20).find("bucket's allreduce (26214400 bytes"),
            std::string::npos);
  // No note where no collective reads the algorithm, or where it is not auto.
  EXPECT_EQ(note("serial", 1, 1000).find("auto"), std::string::npos);
  const Scenario ring = parse_scenario(default_scenario_text(), "<default>",
                                       {"strategy.name=ddp", "strategy.algorithm=ring"});
  EXPECT_EQ(print_scenario(ring, 1000).find("picks per collective"), std::string::npos);
  // zero: its reduce-scatters and allgathers, hierarchical across nodes.
  EXPECT_NE(note("zero", 8, 1000).find("zero's reduce-scatters and allgathers run hierarchically"),
            std::string::npos);
}

TEST(ScenarioKnobs, ZeroStage) {
  EXPECT_EQ(parse_scenario(strategy_file("zero", "stage = 2\nbucket_mb = 1\n"), "e").strategy.stage,
            2);
  EXPECT_EQ(parse_scenario(strategy_file("zero", ""), "e").strategy.stage, 1);
  EXPECT_EQ(parse_scenario(strategy_file("zero", "stage = 3\n"), "e").strategy.stage, 3);
  expect_refused(strategy_file("zero", "stage = 4\n"), {}, "exp.toml:4", "strategy.stage", "3");
  expect_refused(strategy_file("ddp", "stage = 2\n"), {}, "exp.toml:4", "strategy.stage",
                 "read only by zero");
  expect_refused(strategy_file("zero", "bucket_mb = 1\n"), {}, "exp.toml:4", "strategy.bucket_mb",
                 "read from strategy.stage = 2");
  for (const Algorithm algorithm : {Algorithm::kRing, Algorithm::kHierarchical})
    EXPECT_EQ(parse_scenario(strategy_file("zero", "algorithm = \"" +
                                                       std::string(to_string(algorithm)) + "\"\n"),
                             "e")
                  .strategy.algorithm,
              algorithm);
  expect_refused(strategy_file("zero", "algorithm = \"rabenseifner\"\n"), {}, "exp.toml:4",
                 "strategy.algorithm", "run \"ring\" or \"hierarchical\"");
  expect_refused(strategy_file("zero", "") + "[data]\norder = \"blocks\"\n", {}, "exp.toml:5",
                 "data.order", "needs data.order = \"global\"");
}

// strategy.give_back_memory: read by zero stages 2 and 3 where they hold pages of their own.
TEST(ScenarioKnobs, ZeroGivesBackMemoryOnlyWhereItHoldsPages) {
  EXPECT_FALSE(parse_scenario(strategy_file("zero", "stage = 2\n"), "e").strategy.give_back_memory);
  EXPECT_TRUE(parse_scenario(strategy_file("zero", "stage = 3\ngive_back_memory = true\n"), "e")
                  .strategy.give_back_memory);
  expect_refused(strategy_file("ddp", "give_back_memory = true\n"), {}, "exp.toml:4",
                 "strategy.give_back_memory", "read only by zero (stages 2 and 3)");
  expect_refused(strategy_file("zero", "give_back_memory = true\n"), {}, "exp.toml:4",
                 "strategy.give_back_memory", "read from strategy.stage = 2");
  expect_refused("backend = \"sim\"\n" +
                     strategy_file("zero", "stage = 2\ngive_back_memory = true\n") +
                     "[sim]\nmode = \"cost_only\"\n",
                 {}, "exp.toml:6", "strategy.give_back_memory", "sim.mode is \"cost_only\"");
  expect_refused("backend = \"mpi\"\n" +
                     strategy_file("zero", "stage = 3\ngive_back_memory = true\n") +
                     "[model]\ndevice = \"cuda\"\n",
                 {}, "exp.toml:6", "strategy.give_back_memory", "model.device is \"cuda\"");
  expect_refused(strategy_file("zero", "stage = 2\ngive_back_memory = 1\n"), {}, "exp.toml:5",
                 "strategy.give_back_memory", "");
}

}  // namespace
}  // namespace syncopate

namespace syncopate {
namespace {

constexpr const char* kCsvScenario = R"(loss = "mse"
[data]
dataset = "csv"
path = "t.csv"
targets = ["y"]
[model]
input = [3]
[[model.layers]]
kind = "dense"
units = 1
)";

TEST(ScenarioRegression, LossesScalingAndColumnKeysAreReadWhereTheyApply) {
  const Scenario s = parse_scenario(
      kCsvScenario, "exp.toml",
      {"loss=huber", "huber_delta=0.5", "data.normalize=false", "data.scale_features=minmax",
       "data.scale_targets=standard", "data.skip_rows=1", "data.test_fraction=0.25"});
  EXPECT_EQ(s.loss, LossKind::kHuber);
  EXPECT_EQ(s.huber_delta, 0.5);
  EXPECT_EQ(s.data.scale_features, Scaling::kMinMax);
  EXPECT_EQ(s.data.scale_targets, Scaling::kStandard);
  EXPECT_EQ(s.data.skip_rows, 1);
  EXPECT_EQ(s.data.test_fraction, 0.25);
  EXPECT_NE(s.resolved_toml.find("scale_features = 'minmax'"), std::string::npos)
      << s.resolved_toml;
  // The resolved scenario loads back to the same.
  EXPECT_EQ(parse_scenario(s.resolved_toml, "again.toml").resolved_toml, s.resolved_toml);
  // Keys that would do nothing are refused, saying why.
  EXPECT_NE(scenario_error(kCsvScenario, {"huber_delta=2"}).find("read only by loss = \"huber\""),
            std::string::npos);
  EXPECT_NE(scenario_error(kCsvScenario, {"data.scale_features=standard"})
                .find("read only with data.normalize = false"),
            std::string::npos);
  EXPECT_NE(scenario_error("data.scale_targets = \"minmax\"\n").find("read only by the regression"),
            std::string::npos);
  EXPECT_NE(scenario_error("data.skip_rows = 1\n").find("read only by data.dataset = \"csv\""),
            std::string::npos);
  EXPECT_NE(scenario_error(kCsvScenario, {"loss=cross_entropy"}).find("needs a regression loss"),
            std::string::npos);
  EXPECT_NE(scenario_error(kCsvScenario, {"loss=mae", "model.device=cuda"}).find("host only"),
            std::string::npos);
}

TEST(ScenarioRegression, FeatureColumnsMustMatchTheFirstLayer) {
  const std::string text = std::string(kCsvScenario)
                               .replace(std::string(kCsvScenario).find("targets"), 0,
                                        "feature_columns = [\"a\", \"b\"]\n");
  const std::string wrong = scenario_error(text);
  EXPECT_NE(wrong.find("exp.toml:5: data.feature_columns: 2 feature columns, model"),
            std::string::npos)
      << wrong;
  EXPECT_NE(wrong.find("takes 3 inputs per sample"), std::string::npos) << wrong;
}

}  // namespace
}  // namespace syncopate
