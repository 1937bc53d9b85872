#pragma once
// A scenario: everything that defines an experiment, read from a TOML file (or the embedded
// default) plus `--set key=value` overrides. Every key is validated; unknown keys, bad values and
// keys that the chosen strategy, backend or dataset would not read are UserErrors naming the
// file, line (or the --set) and key, with the allowed values or the setting that reads the key.
// The keys themselves are listed in scenario_keys.cpp.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/trace.hpp"
#include "core/comm/comm.hpp"
#include "core/nn/model_spec.hpp"
#include "core/optim/optim.hpp"
#include "core/scenario/choices.hpp"

namespace syncopate {

// A model is named (model.name, the zoo) or written out layer by layer (model.input and
// model.layers, core/scenario/model_definition.hpp), not both.
struct ModelSection {
  std::string name = "mlp";
  Device device = Device::kCpu;
  std::optional<ModelSpec> definition;  // written out in the scenario

  // The description every build of the model starts from: the definition, or the zoo's.
  ModelSpec spec() const;
};

struct DataSection {
  DatasetKind dataset = DatasetKind::kFashionMnist;
  std::string dir;                   // empty: Debian's dataset-fashion-mnist location
  std::string path;                  // csv file
  std::vector<std::string> targets;  // csv target columns
  int64_t train_samples = 0;         // 0: all (a prefix otherwise)
  int64_t test_samples = 0;
  bool normalize = true;
  int64_t blocks = 0;  // ds-tensor row blocks; 0: 4 per worker
  bool shuffle_in_block = true;
  std::optional<DataOrder> order;  // none: the strategy's natural order
  double noise = 0.1;              // synthetic-regression: the targets' noise
  DataPartition partition = DataPartition::kIid;
  double alpha = 0.5;                                        // dirichlet: the concentration
  int64_t shards_per_worker = 2;                             // shards: k
  TargetFunction target_function = TargetFunction::kLinear;  // synthetic-regression
  std::vector<std::string> feature_columns;                  // csv; empty: all but the targets
  int64_t skip_rows = 0;                                     // csv: lines before the header
  double test_fraction = 0.2;                                // csv: rows drawn for the test set
  Scaling scale_features = Scaling::kNone;                   // read when normalize is false
  Scaling scale_targets = Scaling::kNone;                    // regression losses
  std::string path_where;  // file:line of data.path (or the --set), for errors about the file
};

struct StrategySection {
  StrategyKind kind = StrategyKind::kSerial;
  int every = 1;  // epoch_sync: epochs; local_sgd and diloco: steps
  Aggregation aggregation = Aggregation::kAllreduce;  // epoch_sync
  double bucket_mb = 25.0;                            // ddp bucket size (MiB)
  Algorithm algorithm = Algorithm::kAuto;             // collective algorithm
  OptimizerStatePolicy optimizer_state = OptimizerStatePolicy::kKeep;
  int warmup_epochs = 0;            // local_sgd: ddp for the first k epochs
  double merge_local_weight = 0.5;  // epoch_async: global = (1-w)*global + w*local
  // diloco's outer optimizer (SGD on the averaged pseudo-gradient); defaults: the paper's.
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  bool outer_nesterov = true;
  int fragments = 1;  // diloco: streaming fragments, staggered by every / fragments steps
  int stage = 1;      // zero: 1 optimizer state, 2 and gradients, 3 and parameters
  // zero stages 2 and 3 in emulation on the host: give the pages of the gradients (stage 3: and
  // of the parameters) that are done with back to the kernel.
  bool give_back_memory = false;
  GlobalModelPlacement global_model = GlobalModelPlacement::kMaster;  // epoch_async
  // ddp, hierarchical: the gradient allreduces; epoch_sync, local_sgd, diloco: the weight
  // averages (fp16 / bf16); powersgd: ddp's gradients only, at rank powersgd_rank.
  Compression compression = Compression::kNone;
  int powersgd_rank = 1;
};

struct SimSection {
  std::string platform = "mn5-acc";
  std::map<std::string, std::string> platform_params;
  Fidelity fidelity = Fidelity::kFlow;
  SimMode mode = SimMode::kEmulation;
  bool fast_forward = true;
  std::map<int, double> slowdown;  // worker -> compute-time multiplier
  ComputeNoise noise;
  int64_t cost_only_train_samples = 0;  // cost-only: samples per epoch (0: the dataset's)
  std::vector<SimFault> faults;         // [[sim.faults]]
  FaultBlocks fault_blocks = FaultBlocks::kRedeal;  // a failed worker's blocks (choices.hpp)
  // sim.restart.recovery_s: a job that a fault aborts is relaunched from its last checkpoint set
  // that many simulated seconds after the fault (app/restart.hpp); < 0: not set, it aborts.
  double restart_recovery_s = -1;
};

// The real backend (backend = "mpi").
struct MpiSection {
  Transport transport = Transport::kMpi;
};

// Checkpoints of the run (core/train/checkpoint.hpp).
struct CheckpointSection {
  int every = 0;        // epochs between checkpoints; 0: none
  int every_steps = 0;  // steps between checkpoints inside an epoch; 0: none
};

struct Scenario {
  std::string name = "default";
  std::string source;  // file it came from ("<embedded default>" for the default)
  uint64_t seed = 42;
  int epochs = 1;
  int workers = 1;
  int64_t batch_size = 64;  // per worker
  LossKind loss = LossKind::kCrossEntropy;
  double huber_delta = 1.0;  // loss = "huber"
  BackendKind backend = BackendKind::kLocal;
  bool eval_every_epoch = true;
  ModelSection model;
  DataSection data;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;  // schedule.total_epochs is set from epochs
  StrategySection strategy;
  SimSection sim;
  MpiSection mpi;
  TraceSelection trace;
  CheckpointSection checkpoint;
  // The whole scenario after overrides, defaults included, as TOML and JSON: every key that
  // this scenario reads (none that it would refuse), so that the TOML loads back to the same.
  std::string resolved_toml;
  std::string resolved_json;

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

// Why a checkpoint inside an epoch cannot be restored under `scenario` ("" when it can): it
// needs a step that is the same point of the epoch on every worker, and a state that the
// checkpoint holds whole. checkpoint.every_steps is refused with this reason; SIGINT and SIGTERM
// then stop at an epoch boundary instead of the next step.
std::string mid_epoch_checkpoint_refusal(const Scenario& scenario);

// What `syncopate run --print-scenario` shows: the resolved TOML, then (as comments) what the
// collective algorithm `auto` resolves to for the strategy's main collective. model_params is
// the model's parameter count (core/scenario does not build models).
std::string print_scenario(const Scenario& scenario, int64_t model_params);

}  // namespace syncopate
