#include "core/scenario/scenario.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    parse_scenario(text, "exp.toml", sets);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(Scenario, DefaultParsesToDocumentedValues) {
  const Scenario s = parse_scenario(default_scenario_text(), "<default>");
  EXPECT_EQ(s.model.name, "mlp");
  EXPECT_EQ(s.workers, 1);
  EXPECT_EQ(s.batch_size, 64);
  EXPECT_EQ(s.backend, BackendKind::kLocal);
  EXPECT_EQ(s.strategy.kind, StrategyKind::kSerial);
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
  const std::string e = error_of("seed = 1\n[optimizer]\nmomentun = 0.9\n");
  EXPECT_NE(e.find("exp.toml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer.momentun"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer.momentum"), std::string::npos) << e;  // listed as allowed
}

TEST(Scenario, BadValueNamesAllowedValues) {
  const std::string e = error_of("[strategy]\nname = \"allreduce_everything\"\n");
  EXPECT_NE(e.find("exp.toml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("strategy.name"), std::string::npos) << e;
  EXPECT_NE(e.find("epoch_async"), std::string::npos) << e;
}

TEST(Scenario, MpiTransportDefaultsToMpiAndListsItsChoices) {
  EXPECT_EQ(parse_scenario(default_scenario_text(), "<default>").mpi.transport, "mpi");
  EXPECT_EQ(parse_scenario("[mpi]\ntransport = \"nccl_native\"\n", "exp.toml").mpi.transport,
            "nccl_native");
  const std::string e = error_of("seed = 3\n[mpi]\ntransport = \"gloo\"\n");
  EXPECT_NE(e.find("exp.toml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("mpi.transport"), std::string::npos) << e;
  EXPECT_NE(e.find("mpi, nccl, nccl_native"), std::string::npos) << e;
}

TEST(Scenario, WrongTypeAndRange) {
  EXPECT_NE(error_of("epochs = \"ten\"\n").find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of("workers = 0\n").find("out of range"), std::string::npos);
  EXPECT_NE(error_of("[optimizer]\nmomentum = 1.5\n").find("exp.toml:2"), std::string::npos);
}

TEST(Scenario, SyntaxErrorHasLine) {
  const std::string e = error_of("seed = 1\nepochs = = 2\n");
  EXPECT_NE(e.find("exp.toml:2"), std::string::npos) << e;
}

TEST(Scenario, OverrideErrorsNameTheOverride) {
  const std::string e = error_of(default_scenario_text(), {"strategy.algorithm=butterfly"});
  EXPECT_NE(e.find("--set strategy.algorithm=butterfly"), std::string::npos) << e;
  EXPECT_NE(e.find("rabenseifner"), std::string::npos) << e;
  EXPECT_FALSE(error_of(default_scenario_text(), {"nonsense"}).empty());
}

TEST(Scenario, CrossFieldValidation) {
  EXPECT_NE(error_of("[strategy]\nname = \"ddp\"\n[data]\norder = \"blocks\"\n").find("data.order"),
            std::string::npos);
  EXPECT_NE(error_of("workers = 2\n[sim.slowdown]\n\"5\" = 2.0\n").find("sim.slowdown.5"),
            std::string::npos);
  EXPECT_NE(error_of("loss = \"mse\"\n").find("regression"), std::string::npos);
}

TEST(Scenario, ShippedScenariosParse) {
  for (const char* name : {"fmnist-mlp", "fmnist-cnn"}) {
    const Scenario s =
        load_scenario(std::string(SYNCOPATE_SOURCE_DIR) + "/scenarios/" + name + ".toml");
    EXPECT_EQ(s.name, name);
    EXPECT_LE(s.epochs, 15);
    EXPECT_EQ(s.batch_size, 64);
    EXPECT_EQ(s.optimizer.kind, "sgd");
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

}  // namespace
}  // namespace syncopate
