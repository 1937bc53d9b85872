#pragma once
// A scenario: everything that defines an experiment, read from a TOML file (or the embedded
// default) plus `--set key=value` overrides. Every key is validated; unknown keys and bad values
// are UserErrors naming the file, line and key, with the allowed values.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/comm/comm.hpp"
#include "core/optim/optim.hpp"

namespace syncopate {

enum class StrategyKind { kSerial, kDdp, kEpochSync, kEpochAsync, kLocalSgd, kHierarchical };
enum class OptimizerStatePolicy { kKeep, kReset, kAverage };
enum class DataOrder { kGlobal, kBlocks };  // ddp-style global permutation, or ds-tensor blocks
enum class BackendKind { kLocal, kSim, kMpi };

struct ModelSection {
  std::string name = "mlp";
  std::string device = "cpu";  // cpu | cuda
};

struct DataSection {
  std::string dataset = "fashion-mnist";  // fashion-mnist | synthetic | synthetic-regression | csv
  std::string dir;                        // empty: Debian's dataset-fashion-mnist location
  std::string path;                       // csv file
  std::vector<std::string> targets;       // csv target columns
  int64_t train_samples = 0;              // 0: all (a prefix otherwise)
  int64_t test_samples = 0;
  bool normalize = true;
  int64_t blocks = 0;  // ds-tensor row blocks; 0: 4 per worker
  bool shuffle_in_block = true;
  std::string order;  // "global" | "blocks"; empty: the strategy's natural order
  // synthetic generators
  int64_t features = 64;
  int64_t classes = 10;
  double noise = 0.1;
};

struct StrategySection {
  StrategyKind kind = StrategyKind::kSerial;
  int every = 1;                           // epoch_sync: epochs; local_sgd: steps
  std::string aggregation = "allreduce";   // epoch_sync: allreduce | master
  double bucket_mb = 25.0;                 // ddp bucket size (MiB)
  Algorithm algorithm = Algorithm::kAuto;  // collective algorithm
  OptimizerStatePolicy optimizer_state = OptimizerStatePolicy::kKeep;
  int warmup_epochs = 0;            // local_sgd: ddp for the first k epochs
  double merge_local_weight = 0.5;  // epoch_async: global = (1-w)*global + w*local
};

struct SimSection {
  std::string platform = "mn5-acc";
  std::map<std::string, std::string> platform_params;
  std::string fidelity = "flow";   // message | flow | analytic
  std::string mode = "emulation";  // emulation | cost_only
  bool fast_forward = true;
  std::map<int, double> slowdown;       // worker -> compute-time multiplier
  int64_t cost_only_train_samples = 0;  // cost-only: samples per epoch (0: the dataset's)
};

// The real backend (backend = "mpi").
struct MpiSection {
  // How the ranks' data travels: "mpi" (the core schedules over MPI point-to-point), "nccl" (the
  // same schedules over NCCL between the ranks' GPUs: the same bits), or "nccl_native" (NCCL's
  // own allreduce and reduce: fastest, summed in NCCL's order).
  std::string transport = "mpi";
};

struct Scenario {
  std::string name = "default";
  std::string source;  // file it came from ("<embedded default>" for the default)
  uint64_t seed = 42;
  int epochs = 1;
  int workers = 1;
  int64_t batch_size = 64;             // per worker
  std::string loss = "cross_entropy";  // cross_entropy | mse
  BackendKind backend = BackendKind::kLocal;
  bool eval_every_epoch = true;
  ModelSection model;
  DataSection data;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;  // schedule.total_epochs is set from epochs
  StrategySection strategy;
  SimSection sim;
  MpiSection mpi;
  std::string resolved_toml;  // the whole scenario after overrides, as TOML
  std::string resolved_json;  // the same, as JSON

  DataOrder data_order() const;
  int64_t row_blocks() const { return data.blocks > 0 ? data.blocks : 4 * workers; }
};

// The scenario compiled into the program (`syncopate run` with no file).
const char* default_scenario_text();

// Parses TOML text; `source` names it in errors. overrides are "key.path=value" with a TOML
// value (strings may be bare words).
Scenario parse_scenario(const std::string& text, const std::string& source,
                        const std::vector<std::string>& overrides = {});
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});

std::string_view to_string(StrategyKind kind);
std::string_view to_string(BackendKind kind);
std::string_view to_string(OptimizerStatePolicy policy);

}  // namespace syncopate
