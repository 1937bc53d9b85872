// Loading a platform (recipe or SimGrid XML) and its host profile into a Platform.
#include "backends/sim/platform/platform.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <stdexcept>
#include <unordered_set>

#include "backends/sim/platform/platform_builders.hpp"
#include "backends/sim/platform/platform_recipe.hpp"
#include "backends/sim/platform/xml_check.hpp"
#include "core/base/check.hpp"
#include "core/base/data_dir.hpp"

namespace syncopate::sim {
namespace {

namespace fs = std::filesystem;
namespace sg4 = simgrid::s4u;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A path if it looks like one (has a folder or an extension), else a name in platforms_dir().
std::string resolve_platform(const std::string& name_or_path) {
  const fs::path given(name_or_path);
  if (given.has_parent_path() || given.has_extension()) {
    std::error_code error;
    if (!fs::is_regular_file(given, error)) {
      throw UserError(name_or_path + ": platform file not found or not a regular file" +
                      (error ? " (" + error.message() + ")" : ""));
    }
    return given.string();
  }
  for (const char* extension : {".toml", ".xml"}) {
    const fs::path candidate = fs::path(platforms_dir()) / (name_or_path + extension);
    std::error_code error;
    if (fs::exists(candidate, error)) return candidate.string();
  }
  std::string list;
  for (const std::string& name : platform_names()) detail::append_item(list, name, ", ");
  throw UserError("unknown platform '" + name_or_path + "'; available in " + platforms_dir() +
                  ": " + (list.empty() ? "(none)" : list) +
                  " (or give a path to a .toml recipe or SimGrid .xml file)");
}

// "node2-gpu10" after "node2-gpu9": digit runs compare as numbers.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      const std::string_view da = std::string_view(a).substr(i, ei - i);
      const std::string_view db = std::string_view(b).substr(j, ej - j);
      const size_t za = da.find_first_not_of('0'), zb = db.find_first_not_of('0');
      const std::string_view na = za == std::string_view::npos ? "" : da.substr(za);
      const std::string_view nb = zb == std::string_view::npos ? "" : db.substr(zb);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

int int_property(const sg4::Host* host, const char* key, const std::string& file) {
  const char* text = host->get_property(key);
  if (text == nullptr) return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > (1 << 20)) {
    throw UserError(file + ": host " + host->get_name() + ": property " + key + "=\"" + text +
                    "\": expected an integer >= 0");
  }
  return static_cast<int>(value);
}

// A SimGrid XML platform: GPUs are its hosts in natural name order, except the master (property
// role="master", or the host named "master"); property "node" gives a host's node (default 0);
// property "profile" on the first GPU names a host profile (default: every speed = host speed).
Platform load_xml(sg4::Engine& engine, const std::string& path) {
  detail::check_simgrid_xml_file(path);  // what SimGrid would abort on
  try {
    engine.load_platform(path);
  } catch (const std::exception& error) {
    throw UserError(path + ": SimGrid could not load this platform: " + error.what());
  }
  Platform platform;
  platform.name = fs::path(path).stem().string();
  platform.source = path;
  for (sg4::Host* host : engine.get_all_hosts()) {
    const char* role = host->get_property("role");
    const bool is_master =
        role != nullptr ? std::string(role) == "master" : host->get_name() == "master";
    if (!is_master) {
      platform.gpus.push_back(host);
    } else if (platform.master != nullptr) {
      throw UserError(path + ": two master hosts: " + platform.master->get_name() + " and " +
                      host->get_name());
    } else {
      platform.master = host;
    }
  }
  if (platform.gpus.empty()) throw UserError(path + ": the platform has no worker hosts");
  std::sort(platform.gpus.begin(), platform.gpus.end(), [](const sg4::Host* a, const sg4::Host* b) {
    return natural_less(a->get_name(), b->get_name());
  });
  std::map<int, int> per_node;
  for (const sg4::Host* gpu : platform.gpus) {
    platform.node_of_gpu.push_back(int_property(gpu, "node", path));
    ++per_node[platform.node_of_gpu.back()];
  }
  platform.num_nodes = per_node.rbegin()->first + 1;
  for (const auto& [node, count] : per_node) {
    platform.gpus_per_node = std::max(platform.gpus_per_node, count);
  }
  const sg4::Host* first = platform.gpus.front();
  if (const char* profile = first->get_property("profile")) {
    try {
      platform.profile = detail::parse_profile_file(detail::profile_path(profile, path));
    } catch (const UserError& error) {
      throw UserError(path + ": host " + first->get_name() + ": property profile: " + error.what());
    }
  } else {
    platform.profile.name = "host-speed";
    platform.profile.flops_per_s.fill(first->get_speed());
    platform.profile.memory_bandwidth = kInfinity;
  }
  return platform;
}

// Every route the workers may take exists (SimGrid throws on a missing one only when it is
// asked for, mid-run): all pairs up to 512 hosts, else from and to the first one.
void check_xml_routes(const Platform& platform) {
  std::vector<sg4::Host*> hosts = platform.gpus;
  if (platform.master != nullptr) hosts.push_back(platform.master);
  const bool all_pairs = hosts.size() <= 512;
  for (size_t a = 0; a < hosts.size(); ++a) {
    for (size_t b = 0; b < hosts.size(); ++b) {
      if (a == b || (!all_pairs && a != 0 && b != 0)) continue;
      try {
        route_model(hosts[a], hosts[b]);
      } catch (const std::exception& error) {
        throw UserError(platform.source + ": no route from " + hosts[a]->get_name() + " to " +
                        hosts[b]->get_name() + ": " + error.what());
      }
    }
  }
}

Platform load_recipe(const std::string& path, const std::map<std::string, std::string>& overrides) {
  const detail::Recipe recipe = detail::parse_recipe(path, overrides);
  detail::BuiltCluster built = detail::build_recipe(recipe);
  Platform platform;
  platform.name = recipe.name;
  platform.description = recipe.description;
  platform.source = path;
  platform.gpus = std::move(built.gpus);
  platform.node_of_gpu = std::move(built.node_of_gpu);
  platform.gpus_per_node = recipe.gpus_per_node;
  platform.cores_per_node = recipe.cores_per_node;
  platform.num_nodes = recipe.nodes;
  platform.master = built.master;
  platform.profile = recipe.profile;
  platform.network = recipe.network;
  platform.calibrated_under = recipe.calibrated_under;
  return platform;
}

LinkModel zero_if_empty(const LinkModel& model) {
  return model.bandwidth_Bps == kInfinity ? LinkModel{} : model;
}

// The route figures of Platform, measured on the built platform.
void measure_routes(Platform& platform) {
  const sg4::Host* first = platform.gpus.front();
  for (size_t i = 1; i < platform.gpus.size(); ++i) {
    if (platform.node_of_gpu[i] == platform.node_of_gpu[0]) {
      platform.intra_node = zero_if_empty(route_model(first, platform.gpus[i]));
      break;
    }
  }
  std::vector<bool> seen(static_cast<size_t>(platform.num_nodes), false);
  seen[static_cast<size_t>(platform.node_of_gpu[0])] = true;
  for (size_t i = 1; i < platform.gpus.size(); ++i) {
    const auto node = static_cast<size_t>(platform.node_of_gpu[i]);
    if (seen[node]) continue;
    seen[node] = true;
    const LinkModel route = route_model(first, platform.gpus[i]);
    if (platform.inter_node.bandwidth_Bps == 0) {
      platform.inter_node = route;
    } else {
      platform.inter_node.latency_s = std::max(platform.inter_node.latency_s, route.latency_s);
      platform.inter_node.bandwidth_Bps =
          std::min(platform.inter_node.bandwidth_Bps, route.bandwidth_Bps);
    }
  }
  platform.inter_node = zero_if_empty(platform.inter_node);
  if (platform.master != nullptr) {
    platform.master_link = zero_if_empty(route_model(first, platform.master));
  }
}

// SimGrid's network model takes the recipe's factor tables for every comm (CM02 multiplies the
// route's latency and bandwidth by them), through the same factor_at as the analytic fidelity.
void install_network_factors(sg4::Engine& engine, const Platform& platform) {
  const NetworkFactors& factors = platform.network;
  if (!factors.has_tables()) return;
  auto* model = engine.get_netzone_root()->get_network_model();
  SYNC_CHECK(model != nullptr, "platform " << platform.name << ": no network model");
  const auto table_cb = [](std::vector<SizeFactor> table) {
    return [table = std::move(table)](
               double size, const sg4::Host*, const sg4::Host*, const std::vector<sg4::Link*>&,
               const std::unordered_set<sg4::NetZone*>&) { return factor_at(table, size); };
  };
  try {
    model->set_bw_factor_cb(table_cb(factors.bandwidth));
    model->set_lat_factor_cb(table_cb(factors.latency));
  } catch (const std::invalid_argument& error) {
    throw UserError(platform.source + ": [network] factor tables: " + error.what() +
                    " (a sim.simgrid_config network/bandwidth-factor or latency-factor cannot "
                    "be combined with them)");
  }
}

}  // namespace

EngineArgs::EngineArgs(std::string program, const std::string& log_threshold)
    : args_{std::move(program), "--log=root.thresh:" + log_threshold,
            "--log=ker_engine.thresh:" + log_threshold} {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer follows the stack switches of system threads, not those of SimGrid's own
  // (raw/ucontext) actor contexts: it would report every actor that unwinds as an overflow.
  args_.push_back("--cfg=contexts/factory:thread");
#endif
  for (std::string& arg : args_) argv_.push_back(arg.data());
  argv_.push_back(nullptr);
  argc_ = static_cast<int>(args_.size());
}

void configure_engine(sg4::Engine& /*engine*/, const std::vector<std::string>& extra) {
  // Engine::set_config is static in SimGrid 3.32; the engine argument documents the ordering.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:1e12");
  for (const std::string& entry : extra) {
    if (entry.find(':') == std::string::npos) {
      throw UserError("simulator setting '" + entry + "': expected key:value");
    }
    try {
      sg4::Engine::set_config(entry);
    } catch (const std::exception& error) {
      throw UserError("simulator setting '" + entry + "': " + error.what());
    }
  }
}

Platform load_platform(sg4::Engine& engine, const std::string& name_or_path,
                       const std::map<std::string, std::string>& overrides, int min_gpus) {
  SYNC_CHECK(engine.get_host_count() == 0, "a platform is already loaded in this engine");
  const std::string path = resolve_platform(name_or_path);
  Platform platform;
  if (fs::path(path).extension() == ".xml") {
    if (!overrides.empty()) {
      throw UserError(path + ": override " + overrides.begin()->first +
                      ": a SimGrid XML platform takes no parameters (only .toml recipes do)");
    }
    platform = load_xml(engine, path);
    check_xml_routes(platform);
  } else {
    platform = load_recipe(path, overrides);
  }
  if (static_cast<int64_t>(platform.gpus.size()) < min_gpus) {
    throw UserError("platform " + platform.name + " has " + std::to_string(platform.gpus.size()) +
                    " GPUs, the scenario asks for " + std::to_string(min_gpus) + " workers (" +
                    path + ")");
  }
  measure_routes(platform);
  install_network_factors(engine, platform);
  return platform;
}

std::string platforms_dir() {
  if (const char* dir = std::getenv("SYNCOPATE_PLATFORMS"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return data_path("platforms");
}

std::vector<std::string> platform_names() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(platforms_dir(), error)) {
    const fs::path& path = entry.path();
    if (entry.is_regular_file() && (path.extension() == ".toml" || path.extension() == ".xml")) {
      names.push_back(path.stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

LinkModel route_model(const sg4::Host* a, const sg4::Host* b) {
  std::vector<sg4::Link*> links;
  double latency = 0;
  a->route_to(b, links, &latency);
  LinkModel model{latency, kInfinity};
  for (const sg4::Link* link : links) {
    model.bandwidth_Bps = std::min(model.bandwidth_Bps, link->get_bandwidth());
  }
  return model;
}

HostProfile load_host_profile(const std::string& name_or_path) {
  return detail::parse_profile_file(detail::profile_path(name_or_path, ""));
}

}  // namespace syncopate::sim
