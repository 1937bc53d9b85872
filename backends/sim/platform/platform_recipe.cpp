// Parsing a platform recipe (topology, links, NICs, fabric, master, profile) from TOML.
#include "backends/sim/platform/platform_recipe.hpp"

#include <filesystem>
#include <limits>

#include "backends/sim/platform/platform_reader.hpp"
#include "backends/sim/platform/profile_layers.hpp"
#include "core/base/check.hpp"
#include "core/comm/mpi_settings.hpp"

namespace syncopate::sim::detail {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxNodes = 1 << 20;

HostProfile read_profile(TomlReader& reader, const std::string& prefix,
                         const std::string& default_name) {
  HostProfile profile;
  profile.name = reader.string(prefix + "name", default_name);
  for (int kind = 0; kind < kNumOpKinds; ++kind) {
    const std::string key = prefix + "flops_per_s." + std::string(to_string(OpKind(kind)));
    profile.flops_per_s[kind] = quantity(reader, key, Quantity::kFlops, std::nullopt);
  }
  profile.memory_bandwidth =
      quantity(reader, prefix + "memory_bandwidth", Quantity::kBandwidth, std::nullopt);
  profile.step_overhead_s =
      quantity(reader, prefix + "step_overhead", Quantity::kTime, 0.0, /*zero_ok=*/true);
  profile.memory_bytes = reader.number(prefix + "memory_bytes", 0.0, 0.0, 1e18);
  profile.compute_skew = reader.number(prefix + "compute_skew", 1.0, 0.5, 2.0);
  profile.worker_spread = reader.number(prefix + "worker_spread", 0.0, 0.0, 0.5);
  reader.string(prefix + "description", "");
  profile.layers = read_layer_times(reader, prefix + "layer");
  return profile;
}

// The most balanced a x b x c = n (largest dimension as small as possible), largest first.
std::vector<unsigned long> balanced_dims(unsigned long n) {
  std::vector<unsigned long> best = {n, 1, 1};
  for (unsigned long a = 1; a <= n; ++a) {
    if (n % a != 0) continue;
    for (unsigned long b = 1; b <= a && a * b <= n; ++b) {
      if ((n / a) % b != 0) continue;
      const unsigned long c = n / a / b;
      if (c > b) continue;
      if (a < best[0]) best = {a, b, c};
    }
  }
  return best;
}

void read_fat_tree(TomlReader& reader, Recipe& recipe) {
  const auto radix = static_cast<unsigned>(reader.integer("fabric.leaf_radix", 16, 1, 1 << 16));
  const auto ratio =
      static_cast<unsigned>(reader.integer("fabric.oversubscription", 1, 1, 1 << 16));
  const auto nodes = static_cast<unsigned>(recipe.nodes);
  FatTreeShape& shape = recipe.fat_tree;
  if (nodes <= radix) {  // one switch: nothing to oversubscribe
    shape = {1, {nodes}, {1}, {1}};
    return;
  }
  // Leaf switches take `down` nodes each (a divisor of nodes, so that SimGrid's tree is full) and
  // have down / oversubscription uplinks, one to each top switch.
  unsigned down = 0;
  for (unsigned d = radix; d >= 1; --d) {
    if (nodes % d == 0 && d % ratio == 0) {
      down = d;
      break;
    }
  }
  if (down == 0) {
    reader.fail("fabric.oversubscription",
                "no leaf-switch size <= fabric.leaf_radix = " + std::to_string(radix) +
                    " divides nodes = " + std::to_string(nodes) + " and is a multiple of " +
                    std::to_string(ratio));
  }
  shape = {2, {down, nodes / down}, {1, down / ratio}, {1, 1}};
}

// A torus dimension of size 1 is no dimension (and SimGrid 3.32 would create its self-link
// twice and abort): drop them, keeping at least one.
std::vector<unsigned long> without_ones(std::vector<unsigned long> dims) {
  std::erase(dims, 1ul);
  if (dims.empty()) dims.push_back(1);
  return dims;
}

void read_torus(TomlReader& reader, Recipe& recipe) {
  recipe.torus_dims = dims(reader, "fabric.dims");
  const auto nodes = static_cast<unsigned long>(recipe.nodes);
  if (recipe.torus_dims.empty()) {
    recipe.torus_dims = without_ones(balanced_dims(nodes));
    return;
  }
  unsigned long product = 1;
  std::string text;
  for (unsigned long d : recipe.torus_dims) {
    product *= d;
    append_item(text, std::to_string(d), "x");
  }
  if (product != nodes && nodes > 1) {  // one node needs no fabric
    reader.fail("fabric.dims", text + " holds " + std::to_string(product) +
                                   " nodes but nodes = " + std::to_string(nodes));
  }
  recipe.torus_dims = without_ones(recipe.torus_dims);
}

void read_dragonfly(TomlReader& reader, Recipe& recipe) {
  DragonflyShape& fly = recipe.dragonfly;
  fly.chassis = static_cast<unsigned>(reader.integer("fabric.chassis", 1, 1, 1 << 16));
  fly.routers = static_cast<unsigned>(reader.integer("fabric.routers", std::nullopt, 1, 1 << 16));
  fly.nodes_per_router =
      static_cast<unsigned>(reader.integer("fabric.nodes_per_router", 1, 1, 1 << 16));
  fly.blue_links = static_cast<unsigned>(reader.integer("fabric.blue_links", 1, 1, 1 << 10));
  fly.black_links = static_cast<unsigned>(reader.integer("fabric.black_links", 1, 1, 1 << 10));
  fly.green_links = static_cast<unsigned>(reader.integer("fabric.green_links", 1, 1, 1 << 10));
  const int64_t group_size = int64_t{fly.chassis} * fly.routers * fly.nodes_per_router;
  const auto nodes = static_cast<unsigned>(recipe.nodes);
  if (nodes == 1) return;  // one node needs no fabric
  if (group_size > kMaxNodes) {
    reader.fail("fabric.routers", "fabric.chassis x fabric.routers x fabric.nodes_per_router = " +
                                      std::to_string(group_size) +
                                      " nodes per dragonfly group, more than the limit of " +
                                      std::to_string(kMaxNodes));
  }
  const auto per_group = static_cast<unsigned>(group_size);
  if (nodes % per_group != 0) {
    reader.fail("nodes",
                "a dragonfly group holds fabric.chassis x fabric.routers x "
                "fabric.nodes_per_router = " +
                    std::to_string(per_group) + " nodes, so nodes must be a multiple of it (got " +
                    std::to_string(nodes) + ")");
  }
  fly.groups = nodes / per_group;
  // SimGrid 3.32 links group g to router g of every group's first chassis and routes to it by
  // that index: more groups than routers per chassis reads past its tables (a segfault).
  if (fly.groups > fly.routers) {
    reader.fail("nodes",
                std::to_string(nodes) + " nodes make " + std::to_string(fly.groups) +
                    " dragonfly groups, more than fabric.routers = " + std::to_string(fly.routers) +
                    " routers per chassis; SimGrid 3.32's dragonfly needs groups <= "
                    "routers per chassis (it crashes otherwise): use at most " +
                    std::to_string(fly.routers * per_group) + " nodes or more routers");
  }
}

}  // namespace

std::string profile_path(const std::string& name_or_path, const std::string& near_file) {
  const fs::path given(name_or_path);
  if (given.extension() == ".toml" || given.has_parent_path()) {
    return given.is_absolute() || near_file.empty()
               ? given.string()
               : (fs::path(near_file).parent_path() / given).string();
  }
  // A name: the profiles/ folder next to the recipe, then the platforms folder.
  if (!near_file.empty()) {
    const fs::path near = fs::path(near_file).parent_path() / "profiles" / (name_or_path + ".toml");
    if (fs::exists(near)) return near.string();
  }
  return (fs::path(platforms_dir()) / "profiles" / (name_or_path + ".toml")).string();
}

HostProfile parse_profile_file(const std::string& path) {
  TomlReader reader(parse_toml_file(path, "host profile file"), path);
  HostProfile profile = read_profile(reader, "", fs::path(path).stem().string());
  reader.check_all_used();
  return profile;
}

Recipe parse_recipe(const std::string& path, const std::map<std::string, std::string>& overrides) {
  TomlReader reader = open_platform_file(path, overrides);
  Recipe recipe;
  recipe.source = path;
  recipe.name = reader.string("name", fs::path(path).stem().string());
  recipe.description = reader.string("description", "");
  recipe.topology = reader.choice("topology", std::nullopt, kTopologyNames);
  recipe.nodes = static_cast<int>(reader.integer("nodes", std::nullopt, 1, kMaxNodes));
  recipe.gpus_per_node = static_cast<int>(reader.integer("gpus_per_node", std::nullopt, 1, 4096));
  recipe.cores_per_node = static_cast<int>(reader.integer("cores_per_node", 0, 0, 1 << 20));
  recipe.turn_latency = quantity(reader, "turn_latency", Quantity::kTime, 0.0, true);
  if (recipe.turn_latency > 0 && recipe.cores_per_node == 0)
    reader.fail("turn_latency",
                "needs cores_per_node: it is the wait of workers that outnumber "
                "their node's cores for a turn on one");
  if (reader.node("cores_bandwidth") != nullptr)  // else 0: the default
    recipe.cores_bandwidth =
        quantity(reader, "cores_bandwidth", Quantity::kBandwidth, std::nullopt, false);
  if (recipe.cores_bandwidth > 0 && recipe.cores_per_node == 0)
    reader.fail("cores_bandwidth",
                "needs cores_per_node: it is what the cores copy in all where a node's "
                "workers outnumber them");

  // The profile: a name or path of a profile file, or an inline [profile] table.
  const toml::node* profile = reader.node("profile");
  if (profile != nullptr && profile->is_table() && !overrides.contains("profile")) {
    recipe.profile = read_profile(reader, "profile.", recipe.name);
  } else {
    const std::string name = reader.string("profile", std::nullopt);
    try {
      recipe.profile = parse_profile_file(profile_path(name, path));
    } catch (const UserError& error) {
      reader.fail("profile", error.what());
    }
  }

  // Each key is read whatever the settings, so that an override of nodes does not turn the
  // recipe's own keys into "unknown" ones; it is required only where it is used.
  const bool multi_gpu = recipe.gpus_per_node > 1;
  const bool multi_node = recipe.nodes > 1;
  recipe.gpu_link.bandwidth = quantity(reader, "gpu_link.bandwidth", Quantity::kBandwidth,
                                       multi_gpu ? std::nullopt : std::optional(0.0), !multi_gpu);
  recipe.gpu_link.latency = quantity(reader, "gpu_link.latency", Quantity::kTime, 0.0, true);
  recipe.gpu_link_duplex = reader.choice("gpu_link.duplex", Duplex::kSplit, kDuplexNames);
  recipe.nics_per_node =
      static_cast<int>(reader.integer("nic.count", recipe.gpus_per_node, 1, 4096));
  recipe.nic.bandwidth = quantity(reader, "nic.bandwidth", Quantity::kBandwidth,
                                  multi_node ? std::nullopt : std::optional(0.0), !multi_node);
  recipe.nic.latency = quantity(reader, "nic.latency", Quantity::kTime, 0.0, true);
  const double injection = recipe.nics_per_node * recipe.nic.bandwidth;
  recipe.fabric.bandwidth =
      quantity(reader, "fabric.bandwidth", Quantity::kBandwidth, injection, !multi_node);
  recipe.fabric.latency = quantity(reader, "fabric.hop_latency", Quantity::kTime, 0.0, true);
  switch (recipe.topology) {
    case Topology::kStar:
      break;
    case Topology::kFatTree:
      read_fat_tree(reader, recipe);
      break;
    case Topology::kTorus:
      read_torus(reader, recipe);
      break;
    case Topology::kDragonfly:
      read_dragonfly(reader, recipe);
      break;
  }

  recipe.has_master = reader.boolean("master.enabled", reader.node("master") != nullptr);
  recipe.master.bandwidth =
      quantity(reader, "master.bandwidth", Quantity::kBandwidth,
               recipe.has_master ? std::nullopt : std::optional(0.0), !recipe.has_master);
  recipe.master.latency = quantity(reader, "master.latency", Quantity::kTime, 0.0, true);
  recipe.node_eth_bandwidth = quantity(reader, "master.node_bandwidth", Quantity::kBandwidth,
                                       recipe.master.bandwidth, !recipe.has_master);
  recipe.network = read_network_factors(reader);
  for (const std::string_view setting : mpi_settings::kAll) {
    const std::string key = "calibrated_under." + std::string(setting);
    if (reader.node(key) != nullptr)
      recipe.calibrated_under.emplace_back(setting, reader.boolean(key, std::nullopt));
  }

  const int64_t gpus = int64_t{recipe.nodes} * recipe.gpus_per_node;
  if (gpus > kMaxNodes) {
    reader.fail("nodes", std::to_string(gpus) + " GPUs is more than the limit of " +
                             std::to_string(kMaxNodes));
  }
  reader.check_all_used();
  return recipe;
}

}  // namespace syncopate::sim::detail
