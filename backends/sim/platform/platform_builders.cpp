// Building a recipe's topology into SimGrid zones, hosts and links (fat tree, dragonfly, torus,
// star).
#include "backends/sim/platform/platform_builders.hpp"

#include <algorithm>
#include <functional>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate::sim::detail {
namespace {

namespace sg4 = simgrid::s4u;
using simgrid::kernel::routing::NetPoint;
using Direction = sg4::LinkInRoute::Direction;

// SimGrid host speeds are informational (the cost model uses the profile): the GEMM speed.
constexpr int kGemm = static_cast<int>(OpKind::kGemm);

// ---- The adapter: the only calls of SimGrid's zone builders (SimGrid 4 renames them to
// NetZone::add_netzone_* and changes the callbacks' signature). ------------------------------

// Builds the leaf (a node zone) number `id` of a structured fabric: returns the leaf's netpoint
// and its gateway (the router through which the fabric reaches it).
using LeafFactory = std::function<std::pair<NetPoint*, NetPoint*>(sg4::NetZone*, unsigned long)>;

sg4::NetZone* new_full_zone(const std::string& name, sg4::NetZone* parent) {
  sg4::NetZone* zone = sg4::create_full_zone(name);
  if (parent != nullptr) zone->set_parent(parent);
  return zone;
}

sg4::NetZone* new_star_zone(const std::string& name) { return sg4::create_star_zone(name); }

// Gives a zone made without a parent the models that set_parent would copy from `from`, so that
// hosts, links and routes can be made in it before it is attached.
void adopt_models(sg4::NetZone* zone, const sg4::NetZone* from) {
  simgrid::kernel::routing::NetZoneImpl* impl = zone->get_impl();
  const simgrid::kernel::routing::NetZoneImpl* models = from->get_impl();
  impl->set_network_model(models->get_network_model());
  impl->set_cpu_pm_model(models->get_cpu_pm_model());
  impl->set_cpu_vm_model(models->get_cpu_vm_model());
  impl->set_disk_model(models->get_disk_model());
  impl->set_host_model(models->get_host_model());
}

sg4::ClusterCallbacks leaf_callbacks(const LeafFactory& leaf) {
  return sg4::ClusterCallbacks([leaf](sg4::NetZone* zone,
                                      const std::vector<unsigned long>& /*coordinates*/,
                                      unsigned long id) { return leaf(zone, id); });
}

sg4::NetZone* new_fat_tree_zone(const std::string& name, sg4::NetZone* parent,
                                const FatTreeShape& shape, const LeafFactory& leaf,
                                const LinkSpec& link) {
  return sg4::create_fatTree_zone(
      name, parent, sg4::FatTreeParams(shape.levels, shape.down, shape.up, shape.count),
      leaf_callbacks(leaf), link.bandwidth, link.latency, sg4::Link::SharingPolicy::SPLITDUPLEX);
}

sg4::NetZone* new_torus_zone(const std::string& name, sg4::NetZone* parent,
                             const std::vector<unsigned long>& dims, const LeafFactory& leaf,
                             const LinkSpec& link) {
  return sg4::create_torus_zone(name, parent, dims, leaf_callbacks(leaf), link.bandwidth,
                                link.latency, sg4::Link::SharingPolicy::SPLITDUPLEX);
}

sg4::NetZone* new_dragonfly_zone(const std::string& name, sg4::NetZone* parent,
                                 const DragonflyShape& fly, const LeafFactory& leaf,
                                 const LinkSpec& link) {
  // Checked by the recipe parser: SimGrid 3.32 crashes when groups > routers per chassis.
  SYNC_CHECK(fly.groups <= fly.routers, "groups " << fly.groups << " routers " << fly.routers);
  const sg4::DragonflyParams params({fly.groups, fly.blue_links}, {fly.chassis, fly.black_links},
                                    {fly.routers, fly.green_links}, fly.nodes_per_router);
  return sg4::create_dragonfly_zone(name, parent, params, leaf_callbacks(leaf), link.bandwidth,
                                    link.latency, sg4::Link::SharingPolicy::SPLITDUPLEX);
}

// ---- Nodes -------------------------------------------------------------------------------------

struct Node {
  sg4::NetZone* zone = nullptr;
  NetPoint* nic = nullptr;  // gateway to the fabric (if several nodes)
  NetPoint* eth = nullptr;  // gateway to the master (if any)
  std::vector<sg4::Host*> gpus;
};

sg4::Link* split_duplex(sg4::NetZone* zone, const std::string& name, const LinkSpec& spec) {
  return zone->create_split_duplex_link(name, spec.bandwidth)->set_latency(spec.latency)->seal();
}

// A GPU port: split duplex, or one shared link that both directions cross (recipe
// gpu_link.duplex).
sg4::Link* gpu_port(sg4::NetZone* zone, const std::string& name, const Recipe& recipe) {
  const LinkSpec spec{recipe.gpu_link.bandwidth, recipe.gpu_link.latency / 2};
  if (recipe.gpu_link_duplex == Duplex::kSplit) return split_duplex(zone, name, spec);
  return zone->create_link(name, spec.bandwidth)
      ->set_latency(spec.latency)
      ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
      ->seal();
}

// A port's place on a route, in the direction the route crosses it (none for a shared port).
sg4::LinkInRoute port_in_route(sg4::Link* port, Direction direction) {
  if (port->get_sharing_policy() == sg4::Link::SharingPolicy::SPLITDUPLEX) return {port, direction};
  return sg4::LinkInRoute(port);
}

// A node's links: one port per GPU (NVLink or PCIe; none with one GPU), its NICs (none with one
// node), its Ethernet link (none without a master), its port on a star fabric, and, on a CPU
// platform with more GPUs (worker processes) than cores, its cores: a shared link that every
// transfer inside the node crosses. There the transport is a copy by the processes' cores, and
// the link's bandwidth is what they copy in all: the recipe's cores_bandwidth, by default
// cores_per_node x gpu_link.bandwidth (four concurrent copies on two cores go at half speed each,
// two at full speed). Its latency is the recipe's turn_latency: the receiver of a message may be
// waiting for a core.
//
// All of them are made in the root zone before any other zone exists. SimGrid 3.32 checks that a
// new link's name is unique by searching every zone of the platform, so a link made once the
// node zones exist costs a walk over all of them: made first, the whole build stays linear in
// the node count (SimGrid's own fabric links are the exception, a few per node). A route may use
// links of any zone.
struct NodeLinks {
  std::vector<sg4::Link*> ports, nics;
  sg4::Link* eth = nullptr;
  sg4::Link* star_port = nullptr;
  sg4::Link* cores = nullptr;
};

NodeLinks make_node_links(const Recipe& recipe, sg4::NetZone* root, int index) {
  const std::string name = "node" + std::to_string(index);
  NodeLinks links;
  const int gpus = recipe.gpus_per_node;
  for (int i = 0; gpus > 1 && i < gpus; ++i)
    links.ports.push_back(gpu_port(root, name + "-gpu" + std::to_string(i), recipe));
  for (int j = 0; recipe.nodes > 1 && j < std::min(recipe.nics_per_node, gpus); ++j)
    links.nics.push_back(split_duplex(root, name + "-nic" + std::to_string(j), recipe.nic));
  if (recipe.has_master)
    links.eth = split_duplex(root, name + "-eth", {recipe.node_eth_bandwidth, 0});
  if (recipe.nodes > 1 && recipe.topology == Topology::kStar)
    links.star_port = split_duplex(root, "port" + std::to_string(index), recipe.fabric);
  if (recipe.cores_per_node > 0 && gpus > recipe.cores_per_node)
    links.cores =
        root->create_link(name + "-cores", recipe.cores_bandwidth > 0
                                               ? recipe.cores_bandwidth
                                               : recipe.cores_per_node * recipe.gpu_link.bandwidth)
            ->set_latency(recipe.turn_latency)
            ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
            ->seal();
  return links;
}

// A node: a Full zone (a handful of netpoints) holding its GPUs, on its links (GPU a -> GPU b
// crosses a's port up and b's port down; GPU i uses NIC i % nics behind the router `nic`; the
// Ethernet link is behind the router `eth`).
Node build_node(const Recipe& recipe, sg4::NetZone* parent, int index, const NodeLinks& links) {
  const std::string name = "node" + std::to_string(index);
  Node node;
  node.zone = new_full_zone(name, parent);
  const int gpus = recipe.gpus_per_node;
  for (int i = 0; i < gpus; ++i) {
    sg4::Host* host = node.zone->create_host(name + "-gpu" + std::to_string(i),
                                             recipe.profile.flops_per_s[kGemm]);
    host->set_property("node", std::to_string(index));
    node.gpus.push_back(host->seal());
  }
  for (int i = 0; i < gpus; ++i) {
    for (int j = i + 1; j < gpus; ++j) {
      std::vector<sg4::LinkInRoute> route{port_in_route(links.ports[i], Direction::UP),
                                          port_in_route(links.ports[j], Direction::DOWN)};
      if (links.cores != nullptr) route.emplace_back(links.cores);
      node.zone->add_route(node.gpus[i]->get_netpoint(), node.gpus[j]->get_netpoint(), nullptr,
                           nullptr, route, true);
    }
  }
  if (!links.nics.empty()) {
    node.nic = node.zone->create_router(name + "-nic");
    for (int i = 0; i < gpus; ++i) {
      node.zone->add_route(node.gpus[i]->get_netpoint(), node.nic, nullptr, nullptr,
                           {{links.nics[i % links.nics.size()], Direction::UP}}, true);
    }
  }
  if (links.eth != nullptr) {
    node.eth = node.zone->create_router(name + "-eth");
    for (sg4::Host* host : node.gpus) {
      node.zone->add_route(host->get_netpoint(), node.eth, nullptr, nullptr,
                           {{links.eth, Direction::UP}}, true);
    }
  }
  node.zone->seal();
  return node;
}

// ---- Fabrics -----------------------------------------------------------------------------------

// The fabric zone is made without a parent and attached to the root once every node is built
// and sealed. SimGrid 3.32 checks a new host's name by searching every zone reachable from the
// root, and sealing a zone lists the hosts it holds by filtering every host reachable from the
// root: with the nodes out of the root's reach while they are built, both stay constant per
// node and the build linear in the node count (attached first, 65,536 GPUs did not finish).
// The fabric's and the nodes' netpoints are numbered in the same order either way (the fabric
// is the root's first component), so the routes are the same.

// A star: one non-blocking switch; each node hangs on its own port link (2 hops node to node).
sg4::NetZone* build_star(const Recipe& recipe, sg4::NetZone* root, std::vector<Node>& nodes,
                         const std::vector<NodeLinks>& links) {
  sg4::NetZone* fabric = new_star_zone(recipe.name + "-fabric");
  adopt_models(fabric, root);
  for (int k = 0; k < recipe.nodes; ++k) {
    nodes[k] = build_node(recipe, fabric, k, links[k]);
    fabric->add_route(nodes[k].zone->get_netpoint(), nullptr, nodes[k].nic, nullptr,
                      {{links[k].star_port, Direction::UP}}, true);
  }
  return fabric;
}

sg4::NetZone* build_fabric(const Recipe& recipe, sg4::NetZone* root, std::vector<Node>& nodes,
                           const std::vector<NodeLinks>& links) {
  if (recipe.topology == Topology::kStar) return build_star(recipe, root, nodes, links);
  LeafFactory leaf = [&](sg4::NetZone* zone, unsigned long id) {
    SYNC_CHECK(id < nodes.size() && nodes[id].zone == nullptr, "leaf " << id);
    if (zone->get_impl()->get_cpu_pm_model() == nullptr) adopt_models(zone, root);
    nodes[id] = build_node(recipe, zone, static_cast<int>(id), links[id]);
    return std::make_pair(nodes[id].zone->get_netpoint(), nodes[id].nic);
  };
  const std::string name = recipe.name + "-fabric";
  switch (recipe.topology) {
    case Topology::kFatTree:
      return new_fat_tree_zone(name, nullptr, recipe.fat_tree, leaf, recipe.fabric);
    case Topology::kTorus:
      return new_torus_zone(name, nullptr, recipe.torus_dims, leaf, recipe.fabric);
    case Topology::kDragonfly:
      return new_dragonfly_zone(name, nullptr, recipe.dragonfly, leaf, recipe.fabric);
    case Topology::kStar:
      break;
  }
  SYNC_CHECK(false, "unhandled topology");
  return nullptr;
}

// The master: its own zone (the host behind a router, on its Ethernet link), reached from every
// node through bypass routes node Ethernet -> switch -> master link, so that master traffic does
// not cross the GPU fabric. The switch is a FATPIPE link (no sharing) carrying the latency.
sg4::Host* build_master(const Recipe& recipe, sg4::NetZone* root, const std::vector<Node>& nodes) {
  sg4::NetZone* zone = new_full_zone("master-zone", root);
  sg4::Host* master = zone->create_host("master", recipe.profile.flops_per_s[kGemm]);
  master->set_property("role", "master");
  master->seal();
  NetPoint* gateway = zone->create_router("master-gw");
  sg4::Link* link = split_duplex(zone, "master", {recipe.master.bandwidth, 0});
  zone->add_route(gateway, master->get_netpoint(), nullptr, nullptr, {{link, Direction::DOWN}},
                  true);
  zone->seal();
  sg4::Link* ethernet = root->create_link("ethernet-switch", std::max(recipe.master.bandwidth,
                                                                      recipe.node_eth_bandwidth))
                            ->set_latency(recipe.master.latency)
                            ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                            ->seal();
  for (const Node& node : nodes) {
    root->add_bypass_route(node.zone->get_netpoint(), zone->get_netpoint(), node.eth, gateway,
                           {sg4::LinkInRoute(ethernet)});
    root->add_bypass_route(zone->get_netpoint(), node.zone->get_netpoint(), gateway, node.eth,
                           {sg4::LinkInRoute(ethernet)});
  }
  return master;
}

}  // namespace

BuiltCluster build_recipe(const Recipe& recipe) {
  sg4::NetZone* root = new_full_zone(recipe.name, nullptr);
  std::vector<NodeLinks> links;
  links.reserve(static_cast<size_t>(recipe.nodes));
  for (int k = 0; k < recipe.nodes; ++k) links.push_back(make_node_links(recipe, root, k));
  std::vector<Node> nodes(static_cast<size_t>(recipe.nodes));
  if (recipe.nodes == 1) {
    nodes[0] = build_node(recipe, root, 0, links[0]);
  } else {
    sg4::NetZone* fabric = build_fabric(recipe, root, nodes, links);
    fabric->set_parent(root);
    fabric->seal();
  }
  BuiltCluster built;
  if (recipe.has_master) built.master = build_master(recipe, root, nodes);
  root->seal();
  for (int k = 0; k < recipe.nodes; ++k) {
    SYNC_CHECK(nodes[k].zone != nullptr, "node " << k << " was not built");
    for (sg4::Host* gpu : nodes[k].gpus) {
      built.gpus.push_back(gpu);
      built.node_of_gpu.push_back(k);
    }
  }
  return built;
}

}  // namespace syncopate::sim::detail
