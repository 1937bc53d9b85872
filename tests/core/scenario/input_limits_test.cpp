// Scenario inputs that used to crash or to be accepted silently: tables nested thousands deep
// (file and --set), empty tables, a directory as the scenario, a name that leaves runs/,
// out-of-range slowdowns, cost-only sample counts that overflow or cannot be planned.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/toml_reader.hpp"
#include "tests/common/scenario_error.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/user_error.hpp"

namespace syncopate {
namespace {

std::string repeated(const std::string& part, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += part;
  return out;
}

TEST(InputLimits, DeeplyNestedTablesAreRefusedNotAStackOverflow) {
  // 10,700 levels (a 21 KB file) overflowed the stack inside toml++.
  std::string msg = scenario_error(repeated("a.", 10700) + "b = 1\n");
  EXPECT_TRUE(has(msg, "exp.toml:1: keys and tables nest")) << msg;
  EXPECT_TRUE(has(msg, "at most 64")) << msg;
  msg = scenario_error("name = \"x\"\n[" + repeated("a.", 10700) + "b]\nc = 1\n");
  EXPECT_TRUE(has(msg, "exp.toml:2: keys and tables nest")) << msg;
  msg = scenario_error("a = " + repeated("{b.c.d.e = ", 300) + "1" + repeated("}", 300) + "\n");
  EXPECT_TRUE(has(msg, "exp.toml:1: keys and tables nest")) << msg;
  msg = scenario_error("", {repeated("a.", 10700) + "b=1"});
  EXPECT_TRUE(has(msg, "--set aaa") || has(msg, "--set a.a.")) << msg;
  EXPECT_TRUE(has(msg, "the key has 10701 parts; at most 64")) << msg;
  // Real files nest a few levels; dots in strings, comments and numbers do not count.
  EXPECT_EQ(scenario_error("name = \"" + repeated("a.", 90) + "\"  # " + repeated(".", 200) +
                           "\n[schedule]\nlr = 0.5\n"),
            "");
}

TEST(InputLimits, EmptyTablesSetNothingAndAreRefused) {
  std::string msg = scenario_error("name = \"x\"\nmodel = {}\n");
  EXPECT_TRUE(has(msg, "exp.toml:2: model: an empty table sets nothing")) << msg;
  EXPECT_TRUE(has(msg, "model.name")) << msg;
  msg = scenario_error("name = \"x\"\n[no_such_table]\n");
  EXPECT_TRUE(has(msg, "exp.toml:2: no_such_table: an empty table sets nothing")) << msg;
  msg = scenario_error("name = \"x\"\nunknown = {}\n");
  EXPECT_TRUE(has(msg, "exp.toml:2: unknown: an empty table sets nothing")) << msg;
  msg = scenario_error("", {"model={}"});
  EXPECT_TRUE(has(msg, "--set model={}: model: an empty table sets nothing")) << msg;
  msg = scenario_error("backend = \"sim\"\n[sim]\nslowdown = {}\n");
  EXPECT_TRUE(has(msg, "sim.slowdown: an empty table sets nothing")) << msg;
  msg = scenario_error("epochs = {}\n");
  EXPECT_TRUE(has(msg, "exp.toml:1: epochs: expected an integer, got table")) << msg;
  // An empty header of a known table is harmless and stays allowed.
  EXPECT_EQ(scenario_error("name = \"x\"\n[model]\n[optimizer]\n"), "");
}

TEST(InputLimits, KeysThatTheResolvedScenarioCouldNotWriteBackAreRefused) {
  // Found by fuzzing: a quote in a --set key part made a resolved scenario that did not load.
  std::string msg = scenario_error("backend = \"sim\"\n", {"sim.platform_params.n'odes=1"});
  EXPECT_TRUE(has(msg,
                  "--set sim.platform_params.n'odes=1: sim.platform_params.n'odes: 'n'odes': a key "
                  "part holds only "
                  "letters, digits, '_' and '-'"))
      << msg;
  msg = scenario_error("", {"a..b=1"});
  EXPECT_TRUE(has(msg, "--set a..b=1: a..b: '': a key part")) << msg;
  msg = scenario_error("backend = \"sim\"\n[sim.platform_params]\n\"n'odes\" = 1\n");
  EXPECT_TRUE(has(msg, "exp.toml:3: sim.platform_params.n'odes: a recipe key holds only")) << msg;
  const Scenario s =
      parse_scenario("backend = \"sim\"\n", "exp.toml", {"sim.platform_params.nic.count=2"});
  EXPECT_NO_THROW(parse_scenario(s.resolved_toml, "resolved.toml"));
}

TEST(InputLimits, ADirectoryIsNotAScenario) {
  const std::filesystem::path dir = scratch_folder("input-limits") / "dir.toml";
  std::filesystem::create_directories(dir);
  try {
    load_scenario(dir.string());
    ADD_FAILURE() << "a directory loaded as a scenario";
  } catch (const UserError& e) {
    EXPECT_TRUE(has(e.what(), dir.string() + ": scenario file is not a regular file")) << e.what();
  }
  try {
    load_scenario("/no/such/scenario.toml");
    ADD_FAILURE() << "a missing file loaded";
  } catch (const UserError& e) {
    EXPECT_TRUE(has(e.what(), "/no/such/scenario.toml: scenario file not found")) << e.what();
  }
  std::filesystem::remove(dir);
}

TEST(InputLimits, TheNameIsOnePlainFolderName) {
  for (const std::string name : {"../../x", "a/b", "..", ".", ""}) {
    const std::string msg = scenario_error("name = \"" + name + "\"\n");
    EXPECT_TRUE(has(msg, "exp.toml:1: name: '" + name + "' is not a plain folder name")) << msg;
  }
  std::string msg = scenario_error("name = \"" + std::string(300, 'n') + "\"\n");
  EXPECT_TRUE(has(msg, "exp.toml:1: name: 300 characters; at most 200")) << msg;
  msg = scenario_error("", {"name=" + std::string(300, 'n')});
  EXPECT_TRUE(has(msg, ": name: 300 characters")) << msg;
  EXPECT_EQ(scenario_error("name = \"fmnist-mlp_2.v1\"\n"), "");
}

TEST(InputLimits, SlowdownsAreFiniteAndInRange) {
  const std::string base = "backend = \"sim\"\nworkers = 2\n";
  for (const std::string bad : {"inf", "1e-310", "0.0", "-1.0", "1e7", "nan"}) {
    const std::string msg = scenario_error(base + "[sim.slowdown]\n\"1\" = " + bad + "\n");
    EXPECT_TRUE(has(msg,
                    "exp.toml:4: sim.slowdown.1: expected a compute-time multiplier from "
                    "1e-6 to 1e6"))
        << bad << ": " << msg;
  }
  EXPECT_EQ(scenario_error(base + "[sim.slowdown]\n\"1\" = 2.5\n"), "");
}

TEST(InputLimits, CostOnlySampleCountsMustGiveAPlannableEpoch) {
  const std::string base = "backend = \"sim\"\n[sim]\nmode = \"cost_only\"\n";
  // Near 2^63 this wrapped to zero steps (all-zero success); at 10^15 it hung planning steps.
  for (const std::string n : {"9223372036854775000", "1000000000000000"}) {
    const std::string msg = scenario_error(base + "cost_only_train_samples = " + n + "\n");
    EXPECT_TRUE(has(msg, "exp.toml:4: sim.cost_only_train_samples: " + n + " samples make")) << msg;
    EXPECT_TRUE(has(msg, "at most 10000000 steps")) << msg;
  }
  std::string msg = scenario_error(base, {"data.train_samples=1000000000000000"});
  EXPECT_TRUE(has(msg, "data.train_samples: 1000000000000000 samples make")) << msg;
  EXPECT_EQ(scenario_error(base + "cost_only_train_samples = 1281167\n"), "");
}

}  // namespace
}  // namespace syncopate
