#pragma once
// A platform recipe parsed and validated (no SimGrid here): what platform_builders.cpp builds.
// The format is documented in platforms/README.md; every error names file:line: key.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "core/base/enum_names.hpp"

namespace syncopate::sim::detail {

enum class Topology { kStar, kFatTree, kTorus, kDragonfly };
inline constexpr NameTable<Topology, 4> kTopologyNames{{{Topology::kStar, "star"},
                                                        {Topology::kFatTree, "fat-tree"},
                                                        {Topology::kTorus, "torus"},
                                                        {Topology::kDragonfly, "dragonfly"}}};

// How a GPU port carries its two directions: split (a link each way, as NVLink and PCIe are
// full duplex) or shared (one capacity for both, as a transport whose exchange takes twice the
// one-way message: calibrate decides from its measured exchanges).
enum class Duplex { kSplit, kShared };
inline constexpr NameTable<Duplex, 2> kDuplexNames{
    {{Duplex::kSplit, "split"}, {Duplex::kShared, "shared"}}};

struct LinkSpec {
  double bandwidth = 0;  // bytes/s per direction
  double latency = 0;    // seconds
};

struct FatTreeShape {  // SimGrid's FatTreeParams: levels, then down/up/link counts per level
  unsigned levels = 1;
  std::vector<unsigned> down, up, count;
};

struct DragonflyShape {  // groups x chassis per group x routers per chassis x nodes per router
  unsigned groups = 1, chassis = 1, routers = 1, nodes_per_router = 1;
  unsigned blue_links = 1, black_links = 1, green_links = 1;  // multiplicity of each link level
};

struct Recipe {
  std::string name;
  std::string description;
  std::string source;  // the recipe file
  HostProfile profile;
  Topology topology = Topology::kStar;
  int nodes = 1;
  int gpus_per_node = 1;
  int cores_per_node = 0;  // 0: every worker computes on a device of its own (Platform)
  // s: the wait of a message between two workers of a node that time-share its cores (more
  // workers than cores_per_node) for the receiver's turn on a core; the latency of the node's
  // cores link. 0 without cores_per_node.
  double turn_latency = 0;
  // B/s: what the node's cores copy in all, with every core copying, where its workers
  // outnumber them: the bandwidth of its cores link. 0: cores_per_node x gpu_link.bandwidth
  // (each core copies as fast as a lone message goes). 0 without cores_per_node.
  double cores_bandwidth = 0;
  LinkSpec gpu_link;  // each GPU's port inside its node; latency = GPU-to-GPU end to end
  Duplex gpu_link_duplex = Duplex::kSplit;
  int nics_per_node = 1;
  LinkSpec nic;     // each NIC; latency counted once per NIC on a route
  LinkSpec fabric;  // each inter-node link; latency per link (hop)
  FatTreeShape fat_tree;
  std::vector<unsigned long> torus_dims;
  DragonflyShape dragonfly;
  bool has_master = false;
  LinkSpec master;                // the master's link; latency = GPU-to-master end to end
  double node_eth_bandwidth = 0;  // each node's Ethernet NIC, on the way to the master
  NetworkFactors network;         // [network]: overheads and size-dependent factors
  // [calibrated_under]: the MPI settings a calibrated platform was measured under, by name
  // (core/comm/mpi_settings.hpp); recorded by a simulated run for compare.
  std::vector<std::pair<std::string, bool>> calibrated_under;
};

// Parses and validates a recipe file. `overrides` replace values by dotted key; an override of a
// key the recipe does not use is an error.
Recipe parse_recipe(const std::string& path, const std::map<std::string, std::string>& overrides);

// Parses a host-profile file (platforms/profiles/*.toml).
HostProfile parse_profile_file(const std::string& path);

// Resolves a profile name to platforms_dir()/profiles/<name>.toml, or returns a path unchanged.
std::string profile_path(const std::string& name_or_path, const std::string& near_file);

// Unit-aware parsing of "450GBps", "200Gbps", "1.5us", "67Tf", or a plain number in base units.
// Returns false when `text` is not a number with one of the allowed units.
enum class Quantity { kBandwidth, kTime, kFlops };
bool parse_quantity(const std::string& text, Quantity kind, double* value);

// Appends `item` to a `separator`-separated list.
inline void append_item(std::string& list, std::string_view item, std::string_view separator) {
  if (!list.empty()) list += separator;
  list += item;
}

}  // namespace syncopate::sim::detail
