#pragma once
// Modelled clusters for the SimGrid backend: load a platform (a compact TOML recipe from
// platforms/, or a SimGrid XML file), build it into SimGrid zones, and describe it to the runtime.
//
// A recipe builds: one zone per node (its GPU hosts joined by per-GPU NVLink/PCIe port links, and
// its NICs), the nodes joined by an inter-node fabric (star, fat tree, torus or dragonfly), and an
// optional master host on its own Ethernet link. platforms/README.md documents the format.
//
// SimGrid allows one Engine per process and cannot be reset: load one platform per process.
#include <array>
#include <map>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "backends/sim/platform/network_factors.hpp"
#include "core/nn/cost.hpp"

namespace syncopate::sim {

// A measured layer (`syncopate calibrate`): its passes' seconds at these shapes, batch first.
struct LayerTime {
  std::string kind;  // Layer::kind()
  std::vector<int64_t> input, output;
  double forward_s = 0, backward_s = 0;
};

struct HostProfile {  // effective compute speeds of one GPU (or CPU) for the cost model
  std::string name;
  std::array<double, kNumOpKinds> flops_per_s{};  // indexed by static_cast<int>(OpKind)
  // bytes/s; a compute step takes max(flops/speed, bytes/bandwidth). Always > 0; +infinity when
  // memory traffic is not modelled (an XML platform without a profile).
  double memory_bandwidth = 0;
  double step_overhead_s = 0;  // fixed cost per training step (launches, framework)
  // Every compute pass of a training step takes this many times its figure (compute_skew): a
  // step's measured median over the sum of its passes' medians (timings skewed to the right sum
  // to more than their medians). 1 where not measured.
  double compute_skew = 1;
  // How unequal the workers' speeds are (worker_spread): the standard deviation of the log of a
  // worker's steady compute speed, which holds for a whole run. `syncopate calibrate` estimates it
  // from its ranks' paces, running whole steps at once, and writes the estimate as a comment
  // only: on the validation it overshot (README, "Unequal workers"). SimWorld gives W workers the
  // speed factors exp(worker_spread x z) with z the expected order statistics of W standard
  // normal draws, so that the slowest worker, which paces synchronous strategies, lags by the
  // expected amount. 0 (not set): equal workers.
  double worker_spread = 0;
  double memory_bytes = 0;  // the GPU's memory (memory_bytes); 0: not given, not checked
  // Measured layers ([[layer]] tables): a layer pass with a matching key takes the measured
  // time; every other cost the op kind's speed. Empty for profiles that were not calibrated.
  std::vector<LayerTime> layers;
};

// The measured entry for `key`, or null (also for a cost that is not a layer pass).
const LayerTime* find_layer_time(const HostProfile& profile, const LayerKey& key);

struct LinkModel {  // per direction
  double latency_s = 0;
  double bandwidth_Bps = 0;
};

struct Platform {
  std::string name;
  std::string source;                     // file it came from
  std::vector<simgrid::s4u::Host*> gpus;  // worker i runs on gpus[i] (i < gpus.size())
  std::vector<int> node_of_gpu;           // node index of gpus[i]
  int gpus_per_node = 1;
  // CPU platforms, whose workers are processes time-sharing a node's cores: a node running w
  // workers on c < w cores computes each one's passes w / c times slower (SimWorld). 0: every
  // worker computes on a device of its own (GPUs; XML platforms).
  int cores_per_node = 0;
  simgrid::s4u::Host* master = nullptr;  // host of the paper's master process, if any
  HostProfile profile;
  // Route figures (sum of link latencies, bottleneck bandwidth), measured on the built platform:
  LinkModel intra_node;   // route gpus[0] -> the next GPU of its node ({0, 0} if none)
  LinkModel inter_node;   // worst route from gpus[0] to another node: the largest latency and the
                          // smallest bandwidth over those routes ({0, 0} if one node)
  LinkModel master_link;  // route gpus[0] -> master ({0, 0} if no master)
  // Additions to the agreed interface:
  std::string description;
  int num_nodes = 1;  // node indices are 0 .. num_nodes-1
  // The recipe's [network] overheads and factor tables (empty: the plain model; XML platforms).
  // The factor tables are installed in SimGrid's network model by load_platform.
  NetworkFactors network;
  // The recipe's [calibrated_under] (Recipe::calibrated_under); empty for other platforms.
  std::vector<std::pair<std::string, bool>> calibrated_under;
};

// The command line a SimGrid Engine is built from: log thresholds and, under AddressSanitizer,
// system-thread actor contexts (the only ones ASan can follow). Must outlive the Engine.
class EngineArgs {
 public:
  EngineArgs(std::string program, const std::string& log_threshold);
  int* argc() { return &argc_; }
  char** argv() { return argv_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> argv_;
  int argc_ = 0;
};

// Sets the engine configuration the platforms are calibrated for: network/model:CM02,
// network/crosstraffic:0, network/TCP-gamma raised to 1e12 (so that no flow is capped at
// gamma / (2 x latency)), and any extra "key:value" entries (applied last, so they win).
// Must be called after the Engine is created and before load_platform.
void configure_engine(simgrid::s4u::Engine& engine, const std::vector<std::string>& extra = {});

// Builds the platform: `name_or_path` is a platform name (platforms/<name>.toml recipe, or
// platforms/<name>.xml) or a path to a .toml recipe or SimGrid .xml file. `overrides` set recipe
// parameters by their dotted key (e.g. {"nodes","256"}, {"nic.bandwidth","10Gbps"}); an XML
// platform accepts none. `min_gpus`: throw UserError if the platform has fewer GPUs than workers
// ("platform mn5-acc has 1024 GPUs, the scenario asks for 2000 workers").
// Errors (UserError) name the file, line and field.
Platform load_platform(simgrid::s4u::Engine& engine, const std::string& name_or_path,
                       const std::map<std::string, std::string>& overrides, int min_gpus);

// $SYNCOPATE_PLATFORMS if set, else data_path("platforms") (core/base/data_dir.hpp).
std::string platforms_dir();
// Names of the platforms in platforms_dir() (recipes and XML files), sorted.
std::vector<std::string> platform_names();

// Additions to the agreed interface:
// The figures of the route a -> b: sum of its link latencies, smallest link bandwidth
// (bandwidth +infinity for an empty route, e.g. a host to itself).
LinkModel route_model(const simgrid::s4u::Host* a, const simgrid::s4u::Host* b);
// Loads a host profile: a name (platforms_dir()/profiles/<name>.toml) or a path to a .toml file.
HostProfile load_host_profile(const std::string& name_or_path);

}  // namespace syncopate::sim
