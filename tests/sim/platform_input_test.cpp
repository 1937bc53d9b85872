// Platform inputs that SimGrid 3.32 would end the process on, or that overflowed: each is a
// UserError naming the file, line and element or key, found before SimGrid reads the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/platform/platform_recipe.hpp"
#include "backends/sim/platform/xml_check.hpp"
#include "core/base/check.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/user_error.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

namespace fs = std::filesystem;

const std::string kXmlHead =
    "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
    "<platform version=\"4.1\">\n";
// Two hosts and a link in a Full zone, then `more` (before the zone closes).
std::string two_hosts(const std::string& more, const std::string& routing = "Full",
                      const std::string& bandwidth = "1GBps", const std::string& speed = "1Gf") {
  return kXmlHead + "<zone id=\"z\" routing=\"" + routing + "\">\n<host id=\"a\" speed=\"" + speed +
         "\"/>\n<host id=\"b\" speed=\"1Gf\"/>\n<link id=\"l\" bandwidth=\"" + bandwidth +
         "\" latency=\"1us\"/>\n" + more + "</zone>\n</platform>\n";
}
const std::string kRoute = "<route src=\"a\" dst=\"b\"><link_ctn id=\"l\"/></route>\n";

std::string xml_error(const std::string& text) {
  try {
    detail::check_simgrid_xml(text, "p.xml");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(XmlCheck, AcceptsTheShippedExampleAndConsistentFiles) {
  EXPECT_NO_THROW(detail::check_simgrid_xml_file(platforms_dir() + "/xml-example.xml"));
  EXPECT_EQ(xml_error(two_hosts(kRoute)), "");
  EXPECT_EQ(xml_error(two_hosts(
                "<route src=\"a\" dst=\"b\" symmetrical=\"NO\"><link_ctn id=\"l\"/></route>\n"
                "<route src=\"b\" dst=\"a\" symmetrical=\"NO\"><link_ctn id=\"l\"/></route>\n")),
            "");
}

TEST(XmlCheck, WhatSimGridWouldAbortOnIsAUserErrorWithFileAndLine) {
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {two_hosts(""),
       "p.xml:4: <zone id=\"z\">: routing=\"Full\" with 2 hosts, routers or zones and no route"},
      {two_hosts("<host id=\"c\" speed=\"1f\"/>\n" + kRoute),
       "p.xml:4: <zone id=\"z\">: routing=\"Full\": no route from a to c"},
      {two_hosts(kRoute + kRoute), "p.xml:9: <route>: the route between a and b is declared twice"},
      {two_hosts(kRoute + "<route src=\"b\" dst=\"a\"><link_ctn id=\"l\"/></route>\n"),
       "p.xml:9: <route>: the route between b and a is declared twice (routes are symmetrical"},
      {two_hosts("<link id=\"l\" bandwidth=\"1Bps\" latency=\"0\"/>\n" + kRoute),
       "p.xml:8: <link id=\"l\">: a link of this name is declared twice"},
      {two_hosts(kRoute, "Bogus"), "p.xml:4: <zone id=\"z\">: routing=\"Bogus\": unknown routing"},
      {two_hosts(kRoute, "None"),
       "p.xml:8: <route>: a zone with routing=\"None\" can hold no route"},
      {two_hosts("<link id=\"s\" bandwidth=\"1Bps\" latency=\"0\" state_file=\"x\"/>\n" + kRoute),
       "p.xml:8: <link id=\"s\">: state_file: files of speed, bandwidth, latency or state"},
      {two_hosts(kRoute, "Full", "0Bps"), "p.xml:7: <link id=\"l\">: bandwidth=\"0Bps\": must be"},
      {two_hosts(kRoute, "Full", "-5GBps"), "p.xml:7: <link id=\"l\">: bandwidth=\"-5GBps\""},
      {two_hosts(kRoute, "Full", "1GBps", "inff"),
       "p.xml:5: <host id=\"a\">: speed=\"inff\": must be"},
      {two_hosts(kRoute, "Full", "1GBps", "1e-300f"),
       "p.xml:5: <host id=\"a\">: speed=\"1e-300f\""},
      {two_hosts(kRoute, "Full", "1GBps", "1e300Tf"),
       "p.xml:5: <host id=\"a\">: speed=\"1e300Tf\""},
      {two_hosts("<host id=\"c\" speed=\"1f\"/>\n" + kRoute, "Dijkstra"),
       "p.xml:4: <zone id=\"z\">: routing=\"Dijkstra\": no path from a to c"},
      {two_hosts("<trace id=\"t\" periodicity=\"1\"/>\n" + kRoute),
       "p.xml:8: <trace id=\"t\">: traces"},
      {kXmlHead + "<zone id=\"z\" routing=\"Full\"><host id=\"a\" speed=\"1f\">",
       "the file ends inside"},
      {kXmlHead + "<zone id=\"z\" routing=\"Full\"></platform>",
       "p.xml:4: XML: </platform> closes no"},
      {"<zone/>", "p.xml:1: <zone>: the root element must be <platform>"},
  };
  for (const Case& c : cases) {
    const std::string msg = xml_error(c.text);
    EXPECT_TRUE(has(msg, c.expected)) << "expected: " << c.expected << "\ngot: " << msg;
  }
  // Nested elements 100,000 deep: an error, not a stack overflow.
  std::string deep = kXmlHead;
  for (int i = 0; i < 100000; ++i)
    deep += "<zone id=\"z" + std::to_string(i) + "\" routing=\"Full\">";
  EXPECT_TRUE(has(xml_error(deep), "elements nested more than 64 deep")) << xml_error(deep);
}

TEST(XmlCheck, LoadPlatformRefusesBeforeSimGridAborts) {
  const fs::path path = scratch_folder("xml") / "dup.xml";
  std::ofstream(path) << two_hosts(kRoute + kRoute);
  const testing::ChildResult result = testing::run_in_child([&] {
    load_platform(testing::make_engine(), path.string(), {}, 1);
    return std::string("loaded");
  });
  EXPECT_EQ(result.status, 0) << "SimGrid ended the process: " << result.status;
  EXPECT_TRUE(has(result.output, "UserError: " + path.string() + ":9: <route>: the route between"))
      << result.output;
}

std::string recipe_file_error(const std::string& text) {
  const fs::path path = scratch_folder("platform-input") / "recipe.toml";
  std::ofstream(path) << text;
  try {
    detail::parse_recipe(path.string(), {});
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(RecipeInput, DragonflyGroupSizeThatOverflows32BitsIsRefused) {
  const std::string msg = recipe_file_error(
      "topology = \"dragonfly\"\nnodes = 2\ngpus_per_node = 1\nprofile = \"h100\"\n[nic]\n"
      "bandwidth = \"25GBps\"\n[fabric]\nrouters = 65536\nchassis = 65536\nnodes_per_router = 1\n");
  EXPECT_TRUE(has(msg,
                  ":8: fabric.routers: fabric.chassis x fabric.routers x "
                  "fabric.nodes_per_router = 4294967296 nodes per dragonfly group"))
      << msg;
}

TEST(RecipeInput, SpeedsThatMakeDurationsInfiniteAreRefused) {
  const std::string profile =
      "topology = \"star\"\nnodes = 1\ngpus_per_node = 1\n[profile]\nmemory_bandwidth = 1e12\n"
      "[profile.flops_per_s]\nconv = 1e12\npool = 1e12\nelementwise = 1e12\nloss = 1e12\n"
      "optimizer = 1e12\ngemm = ";
  for (const std::string speed : {"1e-300", "5e-324", "1e300", "\"1e300Tf\""}) {
    const std::string msg = recipe_file_error(profile + speed + "\n");
    EXPECT_TRUE(has(msg, ":12: profile.flops_per_s.gemm: ")) << speed << ": " << msg;
    EXPECT_TRUE(has(msg, "out of range") || has(msg, "expected a number")) << speed << ": " << msg;
  }
  EXPECT_EQ(recipe_file_error(profile + "\"67Tf\"\n"), "");
}

TEST(RecipeInput, ProfilePathsThatAreNoFilesOrTooLong) {
  const std::string base = "topology = \"star\"\nnodes = 1\ngpus_per_node = 1\nprofile = ";
  std::string msg = recipe_file_error(base + "\"/dev/zero\"\n");
  EXPECT_TRUE(has(msg, ":4: profile: /dev/zero: host profile file is not a regular file")) << msg;
  msg = recipe_file_error(base + "\"/tmp/" + std::string(5000, 'p') + ".toml\"\n");
  EXPECT_TRUE(has(msg, ":4: profile: ") && has(msg, "cannot read host profile file")) << msg;
}

TEST(RecipeInput, CoresPerNodeIsReadAndANegativeCountIsRefused) {
  const std::string base = "topology = \"star\"\nnodes = 1\ngpus_per_node = 1\nprofile = \"cpu\"\n";
  EXPECT_EQ(recipe_file_error(base + "cores_per_node = 2\n"), "");
  const fs::path path = scratch_folder("platform-input") / "cores.toml";
  std::ofstream(path) << base << "cores_per_node = 2\n";
  EXPECT_EQ(detail::parse_recipe(path.string(), {}).cores_per_node, 2);
  EXPECT_EQ(detail::parse_recipe(path.string(), {{"cores_per_node", "8"}}).cores_per_node, 8);
  const std::string msg = recipe_file_error(base + "cores_per_node = -1\n");
  EXPECT_TRUE(has(msg, ":5: cores_per_node: ")) << msg;
}

TEST(RecipeInput, TurnLatencyNeedsCoresPerNodeAndATime) {
  const std::string base =
      "topology = \"star\"\nnodes = 1\ngpus_per_node = 4\nprofile = \"cpu\"\n"
      "gpu_link.bandwidth = \"1GBps\"\n";
  EXPECT_EQ(recipe_file_error(base + "cores_per_node = 2\nturn_latency = \"12us\"\n"), "");
  const fs::path path = scratch_folder("platform-input") / "turn.toml";
  std::ofstream(path) << base << "cores_per_node = 2\nturn_latency = 1.5e-05\n";
  EXPECT_DOUBLE_EQ(detail::parse_recipe(path.string(), {}).turn_latency, 1.5e-05);
  fs::remove(path);
  std::string msg = recipe_file_error(base + "turn_latency = \"12us\"\n");
  EXPECT_TRUE(has(msg, ":6: turn_latency: needs cores_per_node")) << msg;
  msg = recipe_file_error(base + "cores_per_node = 2\nturn_latency = -1\n");
  EXPECT_TRUE(has(msg, ":7: turn_latency: ")) << msg;
  msg = recipe_file_error(base + "cores_per_node = 2\nturn_latency = \"12GBps\"\n");
  EXPECT_TRUE(has(msg, ":7: turn_latency: ")) << msg;
}

TEST(RecipeInput, CoresBandwidthNeedsCoresPerNodeAndABandwidth) {
  const std::string base =
      "topology = \"star\"\nnodes = 1\ngpus_per_node = 4\nprofile = \"cpu\"\n"
      "gpu_link.bandwidth = \"1GBps\"\n";
  EXPECT_EQ(recipe_file_error(base + "cores_per_node = 2\ncores_bandwidth = \"1.5GBps\"\n"), "");
  const fs::path path = scratch_folder("platform-input") / "cores-bw.toml";
  std::ofstream(path) << base << "cores_per_node = 2\ncores_bandwidth = 1.5e9\n";
  EXPECT_DOUBLE_EQ(detail::parse_recipe(path.string(), {}).cores_bandwidth, 1.5e9);
  std::ofstream(path) << base << "cores_per_node = 2\n";
  EXPECT_DOUBLE_EQ(detail::parse_recipe(path.string(), {}).cores_bandwidth, 0);  // the default
  fs::remove(path);
  std::string msg = recipe_file_error(base + "cores_bandwidth = \"1GBps\"\n");
  EXPECT_TRUE(has(msg, ":6: cores_bandwidth: needs cores_per_node")) << msg;
  for (const char* bad : {"0", "-1", "\"12us\""}) {
    msg = recipe_file_error(base + "cores_per_node = 2\ncores_bandwidth = " + bad + "\n");
    EXPECT_TRUE(has(msg, ":7: cores_bandwidth: ")) << bad << ": " << msg;
  }
}

TEST(RecipeInput, CalibratedUnderHoldsTheMpiSettingsAsBooleans) {
  const std::string base = "topology = \"star\"\nnodes = 1\ngpus_per_node = 1\nprofile = \"cpu\"\n";
  const fs::path path = scratch_folder("platform-input") / "calibrated.toml";
  std::ofstream(path) << base << "[calibrated_under]\nshared_memory_single_copy = true\n"
                      << "mpi_yield_when_idle = false\n";
  using Settings = std::vector<std::pair<std::string, bool>>;
  EXPECT_EQ(detail::parse_recipe(path.string(), {}).calibrated_under,
            (Settings{{"shared_memory_single_copy", true}, {"mpi_yield_when_idle", false}}));
  std::ofstream(path) << base << "[calibrated_under]\nmpi_yield_when_idle = true\n";
  EXPECT_EQ(detail::parse_recipe(path.string(), {}).calibrated_under,
            (Settings{{"mpi_yield_when_idle", true}}));
  std::ofstream(path) << base;
  EXPECT_TRUE(detail::parse_recipe(path.string(), {}).calibrated_under.empty());
  fs::remove(path);
  std::string msg = recipe_file_error(base + "[calibrated_under]\nmpi_yield_when_idle = 1\n");
  EXPECT_TRUE(has(msg, ":6: calibrated_under.mpi_yield_when_idle: ")) << msg;
  msg = recipe_file_error(base + "[calibrated_under]\nmpi_yield_when_idel = true\n");
  EXPECT_TRUE(has(msg, ":6: calibrated_under.mpi_yield_when_idel: unknown key")) << msg;
}

}  // namespace
}  // namespace syncopate::sim
