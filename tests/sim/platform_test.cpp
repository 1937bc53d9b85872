// Tests of the modelled platforms (backends/sim/platform/platform.hpp). Every test that creates a
// SimGrid engine runs in a forked child (tests/sim/fork_util.hpp): an engine exists once per
// process. Expected figures come from the recipe texts and REFERENCE.md, computed by hand here.
#include "backends/sim/platform/platform.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>
#include <xbt/config.hpp>

#include "backends/sim/platform/platform_recipe.hpp"
#include "core/base/check.hpp"
#include "tests/common/scratch.hpp"
#include "tests/sim/fork_util.hpp"

namespace syncopate::sim {
namespace {

namespace sg4 = simgrid::s4u;
namespace fs = std::filesystem;
namespace forked = syncopate::testing;  // forked::run_in_child(_output), tests/sim/fork_util.hpp
using Overrides = std::map<std::string, std::string>;

// A quiet engine (SimGrid logs every configuration change at INFO level otherwise).
sg4::Engine make_engine() {
  static EngineArgs args("platform_test", "warning");
  return sg4::Engine(args.argc(), args.argv());
}

// The message of the UserError that `body` throws ("" if it throws none).
std::string user_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path path = scratch_folder("platform") / name;
  std::ofstream(path) << text;
  return path;
}

bool near(double actual, double expected, double relative = 1e-12) {
  return std::abs(actual - expected) <= relative * std::abs(expected);
}

// ---- No engine needed --------------------------------------------------------------------------

TEST(PlatformNames, ListsTheShippedPlatforms) {
  const std::vector<std::string> names = platform_names();
  for (const char* name : {"dragonfly", "ethernet-cluster", "fat-tree", "loopback", "mn5-acc",
                           "torus", "xml-example"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(PlatformUnits, ParsesSimGridStyleQuantities) {
  using detail::Quantity;
  double value = 0;
  ASSERT_TRUE(detail::parse_quantity("450GBps", Quantity::kBandwidth, &value));
  EXPECT_DOUBLE_EQ(value, 450e9);
  ASSERT_TRUE(detail::parse_quantity("200Gbps", Quantity::kBandwidth, &value));
  EXPECT_DOUBLE_EQ(value, 25e9);  // REFERENCE.md: NDR200 = 200 Gb/s = 25 GB/s
  ASSERT_TRUE(detail::parse_quantity(" 1.5 us ", Quantity::kTime, &value));
  EXPECT_DOUBLE_EQ(value, 1.5e-6);
  ASSERT_TRUE(detail::parse_quantity("67Tf", Quantity::kFlops, &value));
  EXPECT_DOUBLE_EQ(value, 67e12);
  ASSERT_TRUE(detail::parse_quantity("3e9", Quantity::kBandwidth, &value));
  EXPECT_DOUBLE_EQ(value, 3e9);
  EXPECT_FALSE(detail::parse_quantity("450GBs", Quantity::kBandwidth, &value));
  EXPECT_FALSE(detail::parse_quantity("1us", Quantity::kBandwidth, &value));
  EXPECT_FALSE(detail::parse_quantity("fast", Quantity::kTime, &value));
}

TEST(HostProfiles, H100AndCpuProfilesLoad) {
  const HostProfile h100 = load_host_profile("h100");
  EXPECT_EQ(h100.name, "h100");
  // Effective speeds may not exceed the peaks of REFERENCE.md: 67 TFLOP/s FP32, 495 TF32 dense.
  EXPECT_LE(h100.flops_per_s[static_cast<int>(OpKind::kGemm)], 67e12);
  EXPECT_LE(h100.flops_per_s[static_cast<int>(OpKind::kConv)], 495e12);
  for (double speed : h100.flops_per_s) EXPECT_GT(speed, 0);
  EXPECT_GT(h100.memory_bandwidth, 0);
  const HostProfile cpu = load_host_profile("cpu");
  EXPECT_LT(cpu.flops_per_s[static_cast<int>(OpKind::kGemm)], h100.flops_per_s[0] / 100);
}

// ---- Every platform, small and full ------------------------------------------------------------

struct Shape {
  std::string name;
  Overrides overrides;
  size_t gpus;
  int gpus_per_node;
};

void PrintTo(const Shape& shape, std::ostream* out) { *out << shape.name << "/" << shape.gpus; }

class EveryPlatform : public ::testing::TestWithParam<Shape> {};

TEST_P(EveryPlatform, LoadsWithItsGpusNodesAndMaster) {
  const Shape shape = GetParam();
  EXPECT_EQ(forked::run_in_child([&] {
              sg4::Engine engine = make_engine();
              configure_engine(engine);
              const Platform platform = load_platform(engine, shape.name, shape.overrides, 1);
              EXPECT_EQ(platform.name, shape.name);
              EXPECT_EQ(platform.gpus.size(), shape.gpus);
              EXPECT_EQ(platform.gpus_per_node, shape.gpus_per_node);
              EXPECT_EQ(platform.num_nodes * platform.gpus_per_node, static_cast<int>(shape.gpus));
              EXPECT_EQ(platform.node_of_gpu.size(), shape.gpus);
              for (size_t i = 0; i < std::min(shape.gpus, platform.node_of_gpu.size()); ++i) {
                EXPECT_EQ(platform.node_of_gpu[i], static_cast<int>(i) / shape.gpus_per_node) << i;
              }
              ASSERT_NE(platform.master, nullptr);  // every shipped recipe has a master
              EXPECT_EQ(platform.master->get_name(), "master");
              EXPECT_GT(platform.master_link.bandwidth_Bps, 0);
              if (shape.gpus_per_node > 1) {
                EXPECT_GT(platform.intra_node.bandwidth_Bps, 0);
              }
              if (platform.num_nodes > 1) {
                EXPECT_GT(platform.inter_node.bandwidth_Bps, 0);
              }
            }),
            0);
}

// Each platform at full size (1,024 GPUs) and small; odd shapes of the fat tree.
const std::vector<Shape> kShapes = {
    {"mn5-acc", {}, 1024, 4},
    {"mn5-acc", {{"nodes", "2"}}, 8, 4},
    {"mn5-acc", {{"nodes", "17"}, {"profile", "cpu"}}, 68, 4},  // prime: 17 one-node leaves
    {"fat-tree", {}, 1024, 8},
    {"fat-tree", {{"nodes", "3"}, {"gpus_per_node", "2"}}, 6, 2},
    {"fat-tree", {{"nodes", "32"}, {"fabric.oversubscription", "2"}}, 256, 8},
    {"dragonfly", {}, 1024, 4},
    {"dragonfly",
     {{"nodes", "4"},
      {"fabric.routers", "2"},
      {"fabric.nodes_per_router", "1"},
      {"fabric.chassis", "1"}},
     16,
     4},
    {"dragonfly", {{"nodes", "1"}}, 4, 4},  // one node: no fabric, shape not checked
    {"torus", {}, 1024, 4},
    {"torus", {{"nodes", "2"}}, 8, 4},
    {"ethernet-cluster", {}, 1024, 1},
    {"ethernet-cluster", {{"nodes", "2"}, {"nic.bandwidth", "10Gbps"}}, 2, 1},
    {"loopback", {}, 2, 2},
    {"loopback", {{"gpus_per_node", "4"}}, 4, 4},
};

INSTANTIATE_TEST_SUITE_P(Platforms, EveryPlatform, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<Shape>& param_info) {
                           std::string name = param_info.param.name + "_" +
                                              std::to_string(param_info.param.gpus) + "_" +
                                              std::to_string(param_info.index);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// ---- Large platforms ---------------------------------------------------------------------------

// Builds `name` with `nodes` nodes in a child and runs `check` on it. How long the build takes
// is measured by bench_sim's BM_BuildPlatform, not here.
void check_large(const std::string& name, int nodes,
                 const std::function<void(const Platform&)>& check) {
  EXPECT_EQ(forked::run_in_child([&] {
              sg4::Engine engine = make_engine();
              configure_engine(engine);
              check(load_platform(engine, name, {{"nodes", std::to_string(nodes)}}, 1));
            }),
            0);
}

// The names of the links from a to b, in route order.
std::vector<std::string> route_links(const sg4::Host* a, const sg4::Host* b) {
  std::vector<sg4::Link*> links;
  double latency = 0;
  a->route_to(b, links, &latency);
  std::vector<std::string> names;
  for (const sg4::Link* link : links) names.push_back(link->get_name());
  return names;
}

// mn5-acc at 4,096 nodes (16,384 GPUs, 256 leaf switches under 16 top switches): every GPU and
// node is there and the far routes are the recipe's.
TEST(PlatformScale, Mn5AtFourThousandNodesHasTheRecipesRoutes) {
  constexpr int kNodes = 4096, kGpus = 4 * kNodes;
  check_large("mn5-acc", kNodes, [&](const Platform& p) {
    ASSERT_EQ(p.gpus.size(), static_cast<size_t>(kGpus));
    EXPECT_EQ(sg4::Engine::get_instance()->get_host_count(), static_cast<size_t>(kGpus + 1));
    EXPECT_EQ(p.num_nodes, kNodes);
    EXPECT_EQ(p.node_of_gpu.back(), kNodes - 1);
    EXPECT_EQ(p.gpus.back()->get_name(), "node4095-gpu3");
    EXPECT_EQ(p.gpus.back()->get_property("node"), std::string("4095"));
    const std::vector<std::string> intra = route_links(p.gpus[kGpus - 2], p.gpus[kGpus - 1]);
    EXPECT_EQ(intra, (std::vector<std::string>{"node4095-gpu2_UP", "node4095-gpu3_DOWN"}));
    // First node to last: NIC, node to leaf, leaf to top, top to leaf, leaf to node, NIC.
    const std::vector<std::string> far = route_links(p.gpus[0], p.gpus[kGpus - 1]);
    ASSERT_EQ(far.size(), 6u);
    EXPECT_EQ(far.front(), "node0-nic0_UP");
    EXPECT_EQ(far.back(), "node4095-nic3_DOWN");
    EXPECT_TRUE(near(route_model(p.gpus[0], p.gpus[kGpus - 1]).latency_s, 2 * 0.5e-6 + 4 * 1e-7));
    EXPECT_EQ(route_links(p.gpus[kGpus - 1], p.master),
              (std::vector<std::string>{"node4095-eth_UP", "ethernet-switch", "master_DOWN"}));
  });
}

// A star of 4,096 one-GPU nodes (ethernet-cluster): node to node is port up, port down.
TEST(PlatformScale, StarAtFourThousandNodesRoutesThroughTwoPorts) {
  check_large("ethernet-cluster", 4096, [](const Platform& p) {
    ASSERT_EQ(p.gpus.size(), 4096u);
    EXPECT_EQ(p.node_of_gpu.back(), 4095);
    EXPECT_EQ(route_links(p.gpus[0], p.gpus[4095]),
              (std::vector<std::string>{"node0-nic0_UP", "port0_UP", "port4095_DOWN",
                                        "node4095-nic0_DOWN"}));
  });
}

// ---- Routes and transfer times against the recipe ----------------------------------------------

// A recipe with round figures: 2 GPUs per node, fat tree with 2 nodes per leaf switch.
constexpr const char* kTestRecipe = R"(name = "test-tree"
topology = "fat-tree"
nodes = 4
gpus_per_node = 2
[profile]
flops_per_s = { gemm = 1e12, conv = 1e12, pool = 1e12, elementwise = 1e12, loss = 1e12, optimizer = 1e12 }
memory_bandwidth = "1TBps"
[gpu_link]
bandwidth = "100GBps"
latency = "2us"
[nic]
count = 1
bandwidth = "10GBps"
latency = "3us"
[fabric]
bandwidth = "40GBps"
hop_latency = "0.25us"
leaf_radix = 2
[master]
bandwidth = "1GBps"
latency = "50us"
node_bandwidth = "2GBps"
)";

TEST(PlatformRoutes, MatchTheRecipe) {
  const fs::path path = write_file("test-tree.toml", kTestRecipe);
  EXPECT_EQ(forked::run_in_child([&] {
              sg4::Engine engine = make_engine();
              configure_engine(engine);
              const Platform p = load_platform(engine, path.string(), {}, 8);
              ASSERT_EQ(p.gpus.size(), 8u);
              // Same node: the two GPU ports, 2 us end to end, 100 GB/s.
              const LinkModel intra = route_model(p.gpus[0], p.gpus[1]);
              EXPECT_TRUE(near(intra.latency_s, 2e-6)) << intra.latency_s;
              EXPECT_EQ(intra.bandwidth_Bps, 100e9);
              // Nodes 0 and 1 share a leaf switch: 2 NICs + 2 tree links.
              const LinkModel same_leaf = route_model(p.gpus[0], p.gpus[2]);
              EXPECT_TRUE(near(same_leaf.latency_s, 2 * 3e-6 + 2 * 0.25e-6)) << same_leaf.latency_s;
              EXPECT_EQ(same_leaf.bandwidth_Bps, 10e9);
              // Nodes 0 and 3 are on different leaves: 4 tree links.
              std::vector<sg4::Link*> links;
              double latency = 0;
              p.gpus[1]->route_to(p.gpus[7], links, &latency);
              EXPECT_EQ(links.size(), 6u);
              EXPECT_TRUE(near(latency, 2 * 3e-6 + 4 * 0.25e-6)) << latency;
              // The Platform's summary figures: worst inter-node route, master route.
              EXPECT_TRUE(near(p.intra_node.latency_s, 2e-6));
              EXPECT_TRUE(near(p.inter_node.latency_s, 2 * 3e-6 + 4 * 0.25e-6));
              EXPECT_EQ(p.inter_node.bandwidth_Bps, 10e9);
              EXPECT_TRUE(near(p.master_link.latency_s, 50e-6));
              EXPECT_EQ(p.master_link.bandwidth_Bps, 1e9);  // min(node 2 GB/s, master 1 GB/s)
              EXPECT_EQ(p.profile.memory_bandwidth, 1e12);
            }),
            0);
}

std::string load_error(const std::string& name_or_path, const Overrides& overrides = {},
                       int min_gpus = 1);

// Overrides are TOML values read like the file's: a number in base units where the file has a
// string with a unit, one integer as a torus's dims, a profile name over an inline [profile].
TEST(PlatformOverrides, AreReadLikeTheFile) {
  const fs::path path = write_file("test-tree-overridden.toml", kTestRecipe);
  EXPECT_EQ(forked::run_in_child([&] {
              sg4::Engine engine = make_engine();
              const Platform p = load_platform(engine, path.string(),
                                               {{"nic.bandwidth", "5e9"}, {"profile", "h100"}}, 8);
              EXPECT_EQ(p.inter_node.bandwidth_Bps, 5e9);
              EXPECT_EQ(p.profile.name, "h100");
              EXPECT_NE(p.profile.memory_bandwidth, 1e12);  // not the inline profile's
            }),
            0);
  EXPECT_EQ(forked::run_in_child([] {
              sg4::Engine engine = make_engine();
              const Platform p =
                  load_platform(engine, "torus", {{"nodes", "4"}, {"fabric.dims", "4"}}, 1);
              EXPECT_EQ(p.gpus.size(), 16u);
            }),
            0);
  const std::string error = load_error("mn5-acc", {{"nodes", "four"}});
  EXPECT_NE(error.find("mn5-acc.toml: override nodes=four: expected an integer"), std::string::npos)
      << error;
}

// Hop counts of the torus (dimension order, shortest way round) and the dragonfly.
TEST(PlatformRoutes, TorusAndDragonflyHops) {
  std::string ring = kTestRecipe;
  ring.replace(ring.find("fat-tree"), 8, "torus");
  ring.replace(ring.find("leaf_radix = 2"), 14, "dims = \"4\"");
  const fs::path ring_path = write_file("ring.toml", ring);
  EXPECT_EQ(forked::run_in_child([&] {
              sg4::Engine engine = make_engine();
              const Platform p = load_platform(engine, ring_path.string(), {}, 8);
              // Node 0 to node 2: 2 torus links either way; node 0 to node 3: 1 (wrap-around).
              EXPECT_TRUE(near(route_model(p.gpus[0], p.gpus[4]).latency_s, 6e-6 + 2 * 0.25e-6));
              EXPECT_TRUE(near(route_model(p.gpus[0], p.gpus[6]).latency_s, 6e-6 + 1 * 0.25e-6));
              EXPECT_TRUE(near(route_model(p.gpus[0], p.gpus[2]).latency_s, 6e-6 + 1 * 0.25e-6));
            }),
            0);
  EXPECT_EQ(forked::run_in_child([] {
              sg4::Engine engine = make_engine();
              const Platform p = load_platform(engine, "dragonfly", {}, 1024);
              // dragonfly.toml: 0.5 us per NIC, 0.1 us per hop, 2 nodes per router, 16 routers
              // (2 chassis x 8) per group. Same router: node link up + down.
              EXPECT_TRUE(near(route_model(p.gpus[0], p.gpus[4]).latency_s, 1e-6 + 2 * 0.1e-6));
              // Node 0 (group 0, chassis 0, router 0) to the last node (group 7, chassis 1,
              // router 7): up, green to router 7, blue to group 7, green, black, down.
              EXPECT_TRUE(near(route_model(p.gpus[0], p.gpus[1023]).latency_s, 1e-6 + 6 * 0.1e-6));
            }),
            0);
}

TEST(PlatformRoutes, Mn5MatchesReferenceFigures) {
  EXPECT_EQ(forked::run_in_child([] {
              sg4::Engine engine = make_engine();
              configure_engine(engine);
              const Platform p = load_platform(engine, "mn5-acc", {{"nodes", "2"}}, 8);
              // REFERENCE.md: NVLink 4 = 450 GB/s per direction, NDR200 = 25 GB/s, 25 GbE.
              EXPECT_EQ(p.intra_node.bandwidth_Bps, 450e9);
              EXPECT_EQ(p.inter_node.bandwidth_Bps, 25e9);
              EXPECT_EQ(p.master_link.bandwidth_Bps, 3.125e9);
              // 10-50 us one way through TCP (REFERENCE.md); InfiniBand a few microseconds.
              EXPECT_GE(p.master_link.latency_s, 10e-6);
              EXPECT_LE(p.master_link.latency_s, 50e-6);
              EXPECT_LT(p.inter_node.latency_s, 5e-6);
              EXPECT_EQ(p.profile.name, "h100");
            }),
            0);
}

// Runs the transfers concurrently (each from gpus[from] to gpus[to], or to the master) and
// returns the simulated seconds each one took.
struct Transfer {
  int from, to;
};
std::vector<double> simulate(const Platform& p, sg4::Engine& engine,
                             const std::vector<Transfer>& transfers, double bytes,
                             bool to_master = false) {
  std::vector<double> seconds(transfers.size());
  for (size_t i = 0; i < transfers.size(); ++i) {
    sg4::Host* from = p.gpus[transfers[i].from];
    sg4::Host* to = to_master ? p.master : p.gpus[transfers[i].to];
    sg4::Actor::create("sender" + std::to_string(i), from, [from, to, bytes, &seconds, i] {
      const double start = sg4::Engine::get_clock();
      sg4::Comm::sendto(from, to, static_cast<uint64_t>(bytes));
      seconds[i] = sg4::Engine::get_clock() - start;
    });
  }
  engine.run();
  return seconds;
}

TEST(PlatformTransfers, Cm02TimesAreLatencyPlusBytesOverBandwidth) {
  const fs::path path = write_file("test-tree.toml", kTestRecipe);
  EXPECT_EQ(forked::run_in_child([&] {
              sg4::Engine engine = make_engine();
              configure_engine(engine);
              const Platform p = load_platform(engine, path.string(), {}, 8);
              constexpr double kBytes = 1e9;
              // Across leaves: 2 x 3 us + 4 x 0.25 us, then the NIC's 10 GB/s.
              const double across = 7e-6 + kBytes / 10e9;
              // Same node: 2 us, 100 GB/s.
              const double inside = 2e-6 + kBytes / 100e9;
              std::vector<double> t = simulate(p, engine, {{1, 7}, {2, 3}}, kBytes);
              EXPECT_TRUE(near(t[0], across, 1e-9)) << t[0] << " vs " << across;
              EXPECT_TRUE(near(t[1], inside, 1e-9)) << t[1] << " vs " << inside;
            }),
            0);
}

TEST(PlatformTransfers, SharedLinksDivideBandwidth) {
  const fs::path path = write_file("test-tree.toml", kTestRecipe);
  EXPECT_EQ(forked::run_in_child([&] {
              sg4::Engine engine = make_engine();
              configure_engine(engine);
              const Platform p = load_platform(engine, path.string(), {}, 8);
              constexpr double kBytes = 1e8;
              // Both GPUs of node 0 send to the GPUs of node 1 and share the one NIC of each
              // node (10 GB/s): each flow gets 5 GB/s.
              std::vector<double> t = simulate(p, engine, {{0, 2}, {1, 3}}, kBytes);
              const double expected = 2 * 3e-6 + 2 * 0.25e-6 + kBytes / 5e9;
              EXPECT_TRUE(near(t[0], expected, 1e-9)) << t[0];
              EXPECT_TRUE(near(t[1], expected, 1e-9)) << t[1];
            }),
            0);
  EXPECT_EQ(forked::run_in_child([&] {
              sg4::Engine engine = make_engine();
              configure_engine(engine);
              const Platform p = load_platform(engine, path.string(), {}, 8);
              constexpr double kBytes = 1e8;
              // Four GPUs on four different nodes to the master: its 1 GB/s link is shared.
              std::vector<double> t =
                  simulate(p, engine, {{0, 0}, {2, 0}, {4, 0}, {6, 0}}, kBytes, /*to_master=*/true);
              for (double seconds : t) EXPECT_TRUE(near(seconds, 50e-6 + 4 * kBytes / 1e9, 1e-9));
            }),
            0);
}

// gpu_link.duplex: split ports carry an exchange's two directions at full speed each; a shared
// port gives each direction half, while a one-way message keeps the whole link.
TEST(PlatformTransfers, SharedDuplexPortsHalveAnExchange) {
  const fs::path path = write_file("test-tree.toml", kTestRecipe);
  constexpr double kBytes = 1e8;
  const double one_way = 2e-6 + kBytes / 100e9;
  for (const std::string duplex : {"split", "shared"}) {
    SCOPED_TRACE(duplex);
    const double exchange = 2e-6 + (duplex == "shared" ? 2 : 1) * kBytes / 100e9;
    EXPECT_EQ(
        forked::run_in_child([&] {
          sg4::Engine engine = make_engine();
          configure_engine(engine);
          const Platform p = load_platform(engine, path.string(), {{"gpu_link.duplex", duplex}}, 8);
          std::vector<double> t = simulate(p, engine, {{2, 3}, {3, 2}}, kBytes);
          EXPECT_TRUE(near(t[0], exchange, 1e-9)) << t[0] << " vs " << exchange;
          EXPECT_TRUE(near(t[1], exchange, 1e-9)) << t[1] << " vs " << exchange;
          t = simulate(p, engine, {{2, 3}}, kBytes);
          EXPECT_TRUE(near(t[0], one_way, 1e-9)) << t[0] << " vs " << one_way;
          const LinkModel intra = route_model(p.gpus[2], p.gpus[3]);
          EXPECT_TRUE(near(intra.latency_s, 2e-6)) << intra.latency_s;
          EXPECT_EQ(intra.bandwidth_Bps, 100e9);
          EXPECT_EQ(route_links(p.gpus[2], p.gpus[3]),
                    duplex == "shared"
                        ? (std::vector<std::string>{"node1-gpu0", "node1-gpu1"})
                        : (std::vector<std::string>{"node1-gpu0_UP", "node1-gpu1_DOWN"}));
        }),
        0);
  }
}

// cores_per_node: a node whose worker processes outnumber its cores copies through them, so
// four concurrent transfers inside a node of two cores go at half the port's speed, two at full
// speed; with as many cores as GPUs (or 0) nothing is shared, and the route keeps its figures.
TEST(PlatformTransfers, TransfersInsideANodeShareItsCores) {
  const fs::path path = write_file("test-tree.toml", kTestRecipe);
  constexpr double kBytes = 1e8;
  const double full = 2e-6 + kBytes / 100e9;
  const std::vector<Transfer> ring{{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  for (const std::string cores : {"2", "4", "0"}) {
    SCOPED_TRACE(cores);
    EXPECT_EQ(forked::run_in_child([&] {
                sg4::Engine engine = make_engine();
                configure_engine(engine);
                const Platform p = load_platform(
                    engine, path.string(), {{"gpus_per_node", "4"}, {"cores_per_node", cores}}, 16);
                EXPECT_EQ(p.cores_per_node, std::stoi(cores));
                const double ring_round = 2e-6 + (cores == "2" ? 2 : 1) * kBytes / 100e9;
                for (double t : simulate(p, engine, ring, kBytes))
                  EXPECT_TRUE(near(t, ring_round, 1e-9)) << t << " vs " << ring_round;
                for (double t : simulate(p, engine, {{0, 1}, {2, 3}}, kBytes))
                  EXPECT_TRUE(near(t, full, 1e-9)) << t << " vs " << full;
                const LinkModel intra = route_model(p.gpus[0], p.gpus[1]);
                EXPECT_EQ(intra.bandwidth_Bps, 100e9);
                EXPECT_TRUE(near(intra.latency_s, 2e-6)) << intra.latency_s;
              }),
              0);
  }
}

// cores_bandwidth: what the cores of such a node copy in all, in place of cores_per_node x the
// port's bandwidth. Four concurrent transfers share it (a quarter each); a lone one is held to
// it where it is below the port's speed; a node with a core per worker has no cores link.
TEST(PlatformTransfers, TransfersInsideANodeShareTheCoresBandwidth) {
  const fs::path path = write_file("test-tree.toml", kTestRecipe);
  constexpr double kBytes = 1e8;
  const std::vector<Transfer> ring{{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  for (const std::string cores : {"2", "4"}) {
    SCOPED_TRACE(cores);
    EXPECT_EQ(forked::run_in_child([&] {
                sg4::Engine engine = make_engine();
                configure_engine(engine);
                const Platform p = load_platform(engine, path.string(),
                                                 {{"gpus_per_node", "4"},
                                                  {"cores_per_node", cores},
                                                  {"cores_bandwidth", "\"80GBps\""}},
                                                 16);
                const bool shared = cores == "2";
                const double ring_round = 2e-6 + kBytes / (shared ? 80e9 / 4 : 100e9);
                for (double t : simulate(p, engine, ring, kBytes))
                  EXPECT_TRUE(near(t, ring_round, 1e-9)) << t << " vs " << ring_round;
                const double alone = 2e-6 + kBytes / (shared ? 80e9 : 100e9);
                for (double t : simulate(p, engine, {{0, 1}}, kBytes))
                  EXPECT_TRUE(near(t, alone, 1e-9)) << t << " vs " << alone;
                const double route = route_model(p.gpus[0], p.gpus[1]).bandwidth_Bps;
                EXPECT_EQ(route, shared ? 80e9 : 100e9);
              }),
              0);
  }
}

// turn_latency: a message inside a node whose workers outnumber its cores waits that long more
// for the receiver's turn on a core (the cores link's latency), on SimGrid's comms and in the
// route figures the analytic fidelity reads; with a core per worker there is no wait.
TEST(PlatformTransfers, MessagesInsideATimeSharedNodeWaitForATurn) {
  const fs::path path = write_file("test-tree.toml", kTestRecipe);
  constexpr double kBytes = 1e6, kTurn = 10e-6;
  for (const std::string cores : {"2", "4"}) {
    SCOPED_TRACE(cores);
    EXPECT_EQ(forked::run_in_child([&] {
                sg4::Engine engine = make_engine();
                configure_engine(engine);
                const Platform p = load_platform(
                    engine, path.string(),
                    {{"gpus_per_node", "4"}, {"cores_per_node", cores}, {"turn_latency", "10us"}},
                    16);
                const double latency = 2e-6 + (cores == "2" ? kTurn : 0);
                const double one_way = latency + kBytes / 100e9;
                for (double t : simulate(p, engine, {{0, 1}}, kBytes))
                  EXPECT_TRUE(near(t, one_way, 1e-9)) << t << " vs " << one_way;
                EXPECT_TRUE(near(route_model(p.gpus[0], p.gpus[3]).latency_s, latency));
                EXPECT_TRUE(near(p.intra_node.latency_s, latency)) << p.intra_node.latency_s;
                // Between nodes (on one leaf switch) no core is shared: two NICs, two hops.
                const double between = route_model(p.gpus[0], p.gpus[4]).latency_s;
                EXPECT_TRUE(near(between, 2 * 3e-6 + 2 * 0.25e-6)) << between;
              }),
              0);
  }
}

// ---- SimGrid XML
// ---------------------------------------------------------------------------------

TEST(PlatformXml, ReadsHostsNodesProfileAndMaster) {
  EXPECT_EQ(forked::run_in_child([] {
              sg4::Engine engine = make_engine();
              configure_engine(engine);
              const Platform p = load_platform(engine, "xml-example", {}, 4);
              ASSERT_EQ(p.gpus.size(), 4u);
              EXPECT_EQ(p.gpus[0]->get_name(), "n0-gpu0");
              EXPECT_EQ(p.gpus[3]->get_name(), "n1-gpu1");
              EXPECT_EQ(p.node_of_gpu, (std::vector<int>{0, 0, 1, 1}));
              EXPECT_EQ(p.num_nodes, 2);
              EXPECT_EQ(p.gpus_per_node, 2);
              ASSERT_NE(p.master, nullptr);
              EXPECT_EQ(p.profile.name, "h100");
              // The XML's links: 2 x 500 ns NVLink ports, 2 x 1 us NICs, the 20 us master link.
              EXPECT_TRUE(near(p.intra_node.latency_s, 1e-6));
              EXPECT_EQ(p.intra_node.bandwidth_Bps, 450e9);
              EXPECT_TRUE(near(p.inter_node.latency_s, 2e-6));
              EXPECT_EQ(p.inter_node.bandwidth_Bps, 25e9);
              EXPECT_TRUE(near(p.master_link.latency_s, 20e-6));
              EXPECT_EQ(p.master_link.bandwidth_Bps, 3.125e9);
              // One platform per engine: a second load is a programming error.
              EXPECT_THROW(load_platform(engine, "xml-example", {}, 1), InternalError);
            }),
            0);
  EXPECT_EQ(forked::run_in_child([] {
              sg4::Engine engine = make_engine();
              const std::string error = user_error_of([&] {
                load_platform(engine, "xml-example", {{"nodes", "2"}}, 1);
              });
              EXPECT_NE(error.find("takes no parameters"), std::string::npos) << error;
            }),
            0);
}

// ---- Errors
// --------------------------------------------------------------------------------------

// Loads `name_or_path` in a child and returns the UserError message ("" if none was thrown).
std::string load_error(const std::string& name_or_path, const Overrides& overrides, int min_gpus) {
  const testing::ChildResult result = forked::run_in_child_output([&] {
    sg4::Engine engine = make_engine();
    return user_error_of([&] { load_platform(engine, name_or_path, overrides, min_gpus); });
  });
  EXPECT_EQ(result.status, 0) << "the child crashed or threw something else: " << result.error;
  return result.output;
}

TEST(PlatformErrors, UnknownNameListsTheAvailableOnes) {
  const std::string error = load_error("no-such-cluster");
  EXPECT_NE(error.find("unknown platform 'no-such-cluster'"), std::string::npos) << error;
  for (const char* name : {"mn5-acc", "dragonfly", "loopback", "xml-example"}) {
    EXPECT_NE(error.find(name), std::string::npos) << error;
  }
}

TEST(PlatformErrors, TooFewGpusForTheWorkers) {
  const std::string error = load_error("mn5-acc", {}, 2000);
  EXPECT_EQ(error.rfind("platform mn5-acc has 1024 GPUs, the scenario asks for 2000 workers", 0),
            0u)
      << error;
}

TEST(PlatformErrors, MalformedRecipesNameFileLineAndField) {
  std::string recipe = kTestRecipe;
  const fs::path bad_type =
      write_file("bad-type.toml",
                 std::string(recipe).replace(recipe.find("nodes = 4"), 9, "nodes = \"four\""));
  EXPECT_NE(
      load_error(bad_type.string()).find(bad_type.string() + ":3: nodes: expected an integer"),
      std::string::npos);
  const fs::path bad_unit = write_file(
      "bad-unit.toml", std::string(recipe).replace(recipe.find("\"100GBps\""), 9, "\"100GBs\""));
  EXPECT_NE(load_error(bad_unit.string()).find(bad_unit.string() + ":9: gpu_link.bandwidth:"),
            std::string::npos)
      << load_error(bad_unit.string());
  const fs::path typo = write_file("typo.toml", recipe + "hop_latenzy = 3\n");  // in [master]
  EXPECT_NE(load_error(typo.string()).find(typo.string() + ":23: master.hop_latenzy: unknown key"),
            std::string::npos)
      << load_error(typo.string());
  const fs::path syntax = write_file("syntax.toml", "name = \"x\"\nnodes = = 2\n");
  EXPECT_NE(load_error(syntax.string()).find(syntax.string() + ":2:"), std::string::npos);
  const fs::path missing = write_file("missing.toml", "topology = \"star\"\nnodes = 2\n");
  EXPECT_NE(load_error(missing.string()).find("gpus_per_node: required key is missing"),
            std::string::npos);
  EXPECT_NE(load_error("mn5-acc", {{"nodez", "2"}}).find("override nodez=2: unknown parameter"),
            std::string::npos);
  EXPECT_NE(load_error("mn5-acc", {{"nodes", "0"}}).find("override nodes=0: 0 is out of range"),
            std::string::npos);
  EXPECT_NE(load_error("fat-tree", {{"nic.bandwidth", "fast"}}).find("nic.bandwidth=fast"),
            std::string::npos);
  const fs::path duplex = write_file(
      "duplex.toml", std::string(recipe).replace(recipe.find("latency = \"2us\""), 15,
                                                 "latency = \"2us\"\nduplex = \"half\""));
  EXPECT_NE(load_error(duplex.string()).find(duplex.string() + ":11: gpu_link.duplex:"),
            std::string::npos)
      << load_error(duplex.string());
}

TEST(PlatformErrors, DragonflyShapesSimGridCannotRoute) {
  // 288 nodes / 32 per group = 9 groups > 8 routers per chassis: SimGrid 3.32 would crash.
  const std::string too_many = load_error("dragonfly", {{"nodes", "288"}});
  EXPECT_NE(too_many.find("9 dragonfly groups, more than fabric.routers = 8"), std::string::npos)
      << too_many;
  EXPECT_NE(too_many.find("dragonfly.toml:"), std::string::npos) << too_many;
  const std::string ragged = load_error("dragonfly", {{"nodes", "100"}});
  EXPECT_NE(ragged.find("must be a multiple of it (got 100)"), std::string::npos) << ragged;
  const std::string torus = load_error("torus", {{"fabric.dims", "4x4x4"}});
  EXPECT_NE(torus.find("4x4x4 holds 64 nodes but nodes = 256"), std::string::npos) << torus;
}

TEST(ForkUtil, ReportsFailuresExceptionsAndSignals) {
  EXPECT_EQ(forked::run_in_child([] {}), 0);
  EXPECT_EQ(
      forked::run_in_child([] { ADD_FAILURE() << "(expected: this failure is the child's)"; }), 1);
  EXPECT_EQ(forked::run_in_child([] {}), 0);  // the child's failure did not reach the parent
  EXPECT_EQ(forked::run_in_child([] { throw std::runtime_error("boom"); }), 2);
  EXPECT_EQ(forked::run_in_child([] { std::abort(); }), 128 + SIGABRT);
  const testing::ChildResult result =
      forked::run_in_child_output([] { return std::string("hello"); });
  EXPECT_EQ(result.status, 0);
  EXPECT_EQ(result.output, "hello");
}

}  // namespace
}  // namespace syncopate::sim
