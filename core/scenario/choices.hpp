#pragma once
// The choices a scenario makes, each an enum class with the one table of its names (in files,
// errors, summary.json and to_string alike). Optimizer and schedule kinds are in
// core/optim/optim.hpp, collective algorithms in core/comm/comm.hpp.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/enum_names.hpp"

namespace syncopate {

// Every choice a scenario makes, each with the one table of its names (in files, errors,
// summary.json and to_string alike).
enum class StrategyKind {
  kSerial,
  kDdp,
  kEpochSync,
  kEpochAsync,
  kLocalSgd,
  kHierarchical,
  kDiloco,
  kZero
};
inline constexpr NameTable<StrategyKind, 8> kStrategyNames{
    {{StrategyKind::kSerial, "serial"},
     {StrategyKind::kDdp, "ddp"},
     {StrategyKind::kEpochSync, "epoch_sync"},
     {StrategyKind::kEpochAsync, "epoch_async"},
     {StrategyKind::kLocalSgd, "local_sgd"},
     {StrategyKind::kHierarchical, "hierarchical"},
     {StrategyKind::kDiloco, "diloco"},
     {StrategyKind::kZero, "zero"}}};

enum class OptimizerStatePolicy { kKeep, kReset, kAverage };
inline constexpr NameTable<OptimizerStatePolicy, 3> kOptimizerStateNames{
    {{OptimizerStatePolicy::kKeep, "keep"},
     {OptimizerStatePolicy::kReset, "reset"},
     {OptimizerStatePolicy::kAverage, "average"}}};

// ddp-style global permutation, or ds-tensor blocks
enum class DataOrder { kGlobal, kBlocks };
inline constexpr NameTable<DataOrder, 2> kDataOrderNames{
    {{DataOrder::kGlobal, "global"}, {DataOrder::kBlocks, "blocks"}}};

// Which samples each worker trains on (core/data/partition.hpp): a fresh deal every epoch (iid),
// or one deal for the whole run (fixed, dirichlet label skew, label-sorted shards).
enum class DataPartition { kIid, kFixed, kDirichlet, kShards };
inline constexpr NameTable<DataPartition, 4> kDataPartitionNames{
    {{DataPartition::kIid, "iid"},
     {DataPartition::kFixed, "fixed"},
     {DataPartition::kDirichlet, "dirichlet"},
     {DataPartition::kShards, "shards"}}};

enum class BackendKind { kLocal, kSim, kMpi };
inline constexpr NameTable<BackendKind, 3> kBackendNames{
    {{BackendKind::kLocal, "local"}, {BackendKind::kSim, "sim"}, {BackendKind::kMpi, "mpi"}}};

enum class LossKind { kCrossEntropy, kMse, kMae, kHuber };
inline constexpr NameTable<LossKind, 4> kLossNames{{{LossKind::kCrossEntropy, "cross_entropy"},
                                                    {LossKind::kMse, "mse"},
                                                    {LossKind::kMae, "mae"},
                                                    {LossKind::kHuber, "huber"}}};

enum class Device { kCpu, kCuda };
inline constexpr NameTable<Device, 2> kDeviceNames{
    {{Device::kCpu, "cpu"}, {Device::kCuda, "cuda"}}};

enum class DatasetKind { kFashionMnist, kSynthetic, kSyntheticRegression, kCsv };
inline constexpr NameTable<DatasetKind, 4> kDatasetNames{
    {{DatasetKind::kFashionMnist, "fashion-mnist"},
     {DatasetKind::kSynthetic, "synthetic"},
     {DatasetKind::kSyntheticRegression, "synthetic-regression"},
     {DatasetKind::kCsv, "csv"}}};

// Scaling of features or targets, per column, fitted on the training split: none, (v - mean) /
// stddev, or (v - min) / (max - min).
enum class Scaling { kNone, kStandard, kMinMax };
inline constexpr NameTable<Scaling, 3> kScalingNames{
    {{Scaling::kNone, "none"}, {Scaling::kStandard, "standard"}, {Scaling::kMinMax, "minmax"}}};

// synthetic-regression's target: linear in the features, or Friedman's #1 function extended to
// every feature (core/data/data.hpp).
enum class TargetFunction { kLinear, kFriedman };
inline constexpr NameTable<TargetFunction, 2> kTargetFunctionNames{
    {{TargetFunction::kLinear, "linear"}, {TargetFunction::kFriedman, "friedman"}}};

// epoch_sync: allreduce, or gather to a master, average, send back (the paper's runtime)
enum class Aggregation { kAllreduce, kMaster };
inline constexpr NameTable<Aggregation, 2> kAggregationNames{
    {{Aggregation::kAllreduce, "allreduce"}, {Aggregation::kMaster, "master"}}};

// The simulator's collective fidelity (backends/sim/sim_backend.hpp describes each).
enum class Fidelity { kMessage, kFlow, kAnalytic };
inline constexpr NameTable<Fidelity, 3> kFidelityNames{{{Fidelity::kMessage, "message"},
                                                        {Fidelity::kFlow, "flow"},
                                                        {Fidelity::kAnalytic, "analytic"}}};

// Per-step compute noise on the simulator: none, 1 + sigma z truncated at 0, or
// exp(sigma z - sigma^2 / 2) (mean 1).
enum class NoiseKind { kNone, kNormal, kLognormal };
inline constexpr NameTable<NoiseKind, 3> kNoiseNames{{{NoiseKind::kNone, "none"},
                                                      {NoiseKind::kNormal, "normal"},
                                                      {NoiseKind::kLognormal, "lognormal"}}};

// sim.noise: every worker's compute of every step times a factor drawn from (seed, worker,
// step).
struct ComputeNoise {
  NoiseKind kind = NoiseKind::kNone;
  double sigma = 0.05;
  uint64_t seed = 1;
};

// [[sim.faults]]: what fails on the simulated platform (backends/sim/sim_faults.hpp).
enum class FaultKind { kHostFailure, kLinkFailure, kLinkDegradation, kStraggler };
inline constexpr NameTable<FaultKind, 4> kFaultKindNames{
    {{FaultKind::kHostFailure, "host_failure"},
     {FaultKind::kLinkFailure, "link_failure"},
     {FaultKind::kLinkDegradation, "link_degradation"},
     {FaultKind::kStraggler, "straggler"}}};

// One [[sim.faults]] entry. Times are simulated seconds from the start of the run.
struct SimFault {
  FaultKind kind = FaultKind::kStraggler;
  int worker = -1;    // host_failure, straggler; link faults: the worker's NIC (or `link`)
  std::string link;   // link faults: a link of the platform by name (else the worker's NIC)
  double at_s = 0;    // host_failure
  double from_s = 0;  // the other kinds: the interval [from_s, until_s)
  double until_s = 0;
  double factor = 1;  // link_degradation: bandwidth factor; straggler: compute speed factor
  std::string where;  // "file:line: sim.faults[i]", for errors found once the platform exists
};

// sim.fault_blocks: after a worker fails under epoch_sync or epoch_async, its ds-tensor blocks
// are dealt again over the survivors (an epoch keeps its samples) or dropped (the survivors keep
// their own deal; the epoch loses the dead worker's share).
enum class FaultBlocks { kRedeal, kDrop };
inline constexpr NameTable<FaultBlocks, 2> kFaultBlocksNames{
    {{FaultBlocks::kRedeal, "redeal"}, {FaultBlocks::kDrop, "drop"}}};

enum class SimMode { kEmulation, kCostOnly };  // real tensors, or shape-only (time only)
inline constexpr NameTable<SimMode, 2> kSimModeNames{
    {{SimMode::kEmulation, "emulation"}, {SimMode::kCostOnly, "cost_only"}}};

// How the MPI ranks' data travels: the core schedules over MPI point-to-point, the same
// schedules over NCCL between the ranks' GPUs (the same bits), or NCCL's own allreduce and
// reduce (fastest, summed in NCCL's order).
enum class Transport { kMpi, kNccl, kNcclNative };
inline constexpr NameTable<Transport, 3> kTransportNames{{{Transport::kMpi, "mpi"},
                                                          {Transport::kNccl, "nccl"},
                                                          {Transport::kNcclNative, "nccl_native"}}};

// What a strategy's collectives send (core/comm/compression.hpp, core/train/powersgd.hpp): fp32,
// fp16 or bf16 values, or PowerSGD's low-rank factors of ddp's gradients.
enum class Compression { kNone, kFp16, kBf16, kPowerSgd };
inline constexpr NameTable<Compression, 4> kCompressionNames{
    {{Compression::kNone, "none"},
     {Compression::kFp16, "fp16"},
     {Compression::kBf16, "bf16"},
     {Compression::kPowerSgd, "powersgd"}}};

inline std::string_view to_string(Compression v) { return name_in(kCompressionNames, v); }
inline std::string_view to_string(StrategyKind v) { return name_in(kStrategyNames, v); }
inline std::string_view to_string(OptimizerStatePolicy v) {
  return name_in(kOptimizerStateNames, v);
}
inline std::string_view to_string(DataOrder v) { return name_in(kDataOrderNames, v); }
inline std::string_view to_string(DataPartition v) { return name_in(kDataPartitionNames, v); }
inline std::string_view to_string(BackendKind v) { return name_in(kBackendNames, v); }
inline std::string_view to_string(LossKind v) { return name_in(kLossNames, v); }
inline std::string_view to_string(Device v) { return name_in(kDeviceNames, v); }
inline std::string_view to_string(DatasetKind v) { return name_in(kDatasetNames, v); }
inline std::string_view to_string(Aggregation v) { return name_in(kAggregationNames, v); }
inline std::string_view to_string(Fidelity v) { return name_in(kFidelityNames, v); }
inline std::string_view to_string(SimMode v) { return name_in(kSimModeNames, v); }
inline std::string_view to_string(NoiseKind v) { return name_in(kNoiseNames, v); }
inline std::string_view to_string(FaultKind v) { return name_in(kFaultKindNames, v); }
inline std::string_view to_string(Transport v) { return name_in(kTransportNames, v); }
inline std::string_view to_string(Scaling v) { return name_in(kScalingNames, v); }
inline std::string_view to_string(TargetFunction v) { return name_in(kTargetFunctionNames, v); }

}  // namespace syncopate
