// Strategy zero through the binary: one local worker equals serial, stage 3 equal to ddp ring on
// the simulator and under mpirun, summary.json's memory per GPU (counted, and measured in memory
// for stages 2 and 3), and the refusal of a run that does not fit the GPU (the figures named).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/run_command.hpp"

namespace zero_test {
namespace {
namespace fs = std::filesystem;

const std::string kSmall = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";
const std::string kGpt2 =
    std::string(SYNCOPATE_SOURCE_DIR) + "/scenarios/gpt2-xl-strategies-1024.toml";

fs::path scratch() { return syncopate::scratch_folder("zero"); }

std::string bin() { return std::string(SYNCOPATE_BIN); }

nlohmann::json summary_of(const fs::path& dir) {
  return nlohmann::json::parse(syncopate::read_text(dir / "summary.json"));
}

TEST(ZeroRun, OneLocalWorkerEqualsSerial) {
  std::string log;
  const fs::path serial = scratch() / "serial", zero = scratch() / "zero-local";
  const std::string base = bin() + " run " + kSmall + " --backend local --workers 1 --quiet ";
  ASSERT_EQ(syncopate::run_command(base + "--strategy serial --out " + serial.string(), &log), 0)
      << log;
  ASSERT_EQ(syncopate::run_command(base +
                                       "--strategy zero --set strategy.stage=2 "
                                       "--set strategy.bucket_mb=0.25 --out " +
                                       zero.string(),
                                   &log),
            0)
      << log;
  const std::string a = syncopate::read_text(serial / "model.bin");
  ASSERT_EQ(a.size(), 235146u * 4);
  EXPECT_TRUE(a == syncopate::read_text(zero / "model.bin"));
}

std::string model_of(const fs::path& dir) { return syncopate::read_text(dir / "model.bin"); }

TEST(ZeroRun, StageThreeOneLocalWorkerEqualsSerial) {
  std::string log;
  const fs::path serial = scratch() / "serial3", zero = scratch() / "zero3-local";
  const std::string base = bin() + " run " + kSmall + " --backend local --workers 1 --quiet ";
  ASSERT_EQ(syncopate::run_command(base + "--strategy serial --out " + serial.string(), &log), 0)
      << log;
  ASSERT_EQ(syncopate::run_command(
                base + "--strategy zero --set strategy.stage=3 --out " + zero.string(), &log),
            0)
      << log;
  ASSERT_EQ(model_of(serial).size(), 235146u * 4);
  EXPECT_TRUE(model_of(serial) == model_of(zero));
}

// Stage 3 (units of 0.25 MiB: several layers each) gives ddp ring's weights bit for bit on the
// simulator and under mpirun at 2 ranks, and the simulator's bytes are its formula's.
TEST(ZeroRun, StageThreeEqualsDdpRingOnSimAndMpi) {
  const std::string common =
      " run " + kSmall + " --workers 2 --quiet --set strategy.bucket_mb=0.25 ";
  const fs::path ddp = scratch() / "ddp-ring", sim = scratch() / "zero3-sim",
                 mpi = scratch() / "zero3-mpi";
  std::string log;
  ASSERT_EQ(syncopate::run_command(bin() + common +
                                       "--backend sim --strategy ddp --set strategy.algorithm=ring "
                                       "--out " +
                                       ddp.string(),
                                   &log),
            0)
      << log;
  const std::string zero = "--strategy zero --set strategy.stage=3 --out ";
  ASSERT_EQ(syncopate::run_command(bin() + common + "--backend sim " + zero + sim.string(), &log),
            0)
      << log;
  ASSERT_EQ(syncopate::run_command(syncopate::mpirun(2) + " " + bin() + common + "--backend mpi " +
                                       zero + mpi.string(),
                                   &log),
            0)
      << log;
  ASSERT_EQ(model_of(ddp).size(), 235146u * 4);
  EXPECT_TRUE(model_of(sim) == model_of(ddp));
  EXPECT_TRUE(model_of(mpi) == model_of(ddp));
  // 600 samples, batch 16 on 2 workers: 19 steps per epoch, 2 epochs.
  const uint64_t params = 235146, steps = 2 * 19, epochs = 2;
  EXPECT_EQ(summary_of(sim)["bytes_sent"].get<uint64_t>(), (3 * steps + epochs) * 4 * params);
  EXPECT_EQ(summary_of(mpi)["bytes_sent"].get<uint64_t>(), (3 * steps + epochs) * 4 * params);
}

// Across two nodes of two ranks, zero's reduce-scatters and allgathers run hierarchically by
// default (a ring inside each node, then one across nodes per local index): stage 3 gives ddp's
// weights with the hierarchical allreduce bit for bit, on the simulator and under mpirun with
// pretend nodes. With strategy.algorithm = "ring" it runs the flat ring and gives ddp ring's.
// Either way it moves the ring's bytes.
TEST(ZeroRun, StageThreeAcrossNodesEqualsDdpWithTheSameAlgorithmOnSimAndMpi) {
  const std::string common = " run " + kSmall +
                             " --workers 4 --quiet --set strategy.bucket_mb=0.25 "
                             "--set sim.platform=mn5-acc --set sim.platform_params.nodes=2 "
                             "--set sim.platform_params.gpus_per_node=2 ";
  std::map<std::string, std::string> models;
  for (const std::string algorithm : {"hierarchical", "ring"}) {
    SCOPED_TRACE(algorithm);
    const fs::path ddp = scratch() / ("ddp-nodes-" + algorithm),
                   sim = scratch() / ("zero3-sim-nodes-" + algorithm),
                   mpi = scratch() / ("zero3-mpi-nodes-" + algorithm);
    std::string log;
    ASSERT_EQ(syncopate::run_command(bin() + common + "--backend sim --strategy ddp " +
                                         "--set strategy.algorithm=" + algorithm + " --out " +
                                         ddp.string(),
                                     &log),
              0)
        << log;
    // The default (auto) is hierarchical here.
    const std::string zero = std::string("--strategy zero --set strategy.stage=3 ") +
                             (algorithm == "ring" ? "--set strategy.algorithm=ring " : "") +
                             "--out ";
    ASSERT_EQ(syncopate::run_command(bin() + common + "--backend sim " + zero + sim.string(), &log),
              0)
        << log;
    ASSERT_EQ(
        syncopate::run_command("SYNCOPATE_MPI_RANKS_PER_NODE=2 " + syncopate::mpirun(4) + " " +
                                   bin() + common + "--backend mpi " + zero + mpi.string(),
                               &log),
        0)
        << log;
    ASSERT_EQ(model_of(ddp).size(), 235146u * 4);
    EXPECT_TRUE(model_of(sim) == model_of(ddp));
    EXPECT_TRUE(model_of(mpi) == model_of(ddp));
    models[algorithm] = model_of(sim);
    // 600 samples, batch 16 on 4 workers: 10 steps per epoch (the last one short), 2 epochs.
    // Each rank sends every block but one per pass: 3 (W - 1) x 4 bytes per parameter and step
    // in all, and (W - 1) x 4 for the model gathered at each epoch's end.
    const uint64_t params = 235146, steps = 2 * 10, epochs = 2, workers = 4;
    EXPECT_EQ(summary_of(sim)["bytes_sent"].get<uint64_t>(),
              (3 * steps + epochs) * (workers - 1) * 4 * params);
    EXPECT_EQ(summary_of(mpi)["bytes_sent"].get<uint64_t>(),
              (3 * steps + epochs) * (workers - 1) * 4 * params);
  }
  EXPECT_FALSE(models["hierarchical"] == models["ring"]) << "the sums run in another order";
}

// GPT-2 XL cost-only on 8 GPUs of two nodes, 10 steps of batch 1. Stage 1 reduce-scatters after
// backward and allgathers after the step: none of its communication overlaps compute. Stage 2's
// reduce-scatters run during backward, stage 3's allgathers during forward and backward (each
// unit's prefetched while the one before computes): part of theirs hides. Stage 3 sends two
// allgathers and a reduce-scatter per step, plus the whole model once at the epoch's end. Stages
// 2 and 3 have one reduce-scatter in flight at a time (the traced ones, from launch to completion,
// never overlap): backward waits for a bucket's before it starts the next one's.
TEST(ZeroRun, StagesTwoAndThreeOverlapCommunicationWithCompute) {
  const std::string base = bin() + " run " + kGpt2 +
                           " --workers 8 --set sim.platform_params.nodes=2 "
                           "--set sim.cost_only_train_samples=80 --quiet --strategy zero ";
  std::map<int, nlohmann::json> runs;
  for (int stage : {1, 2, 3}) {
    const fs::path dir = scratch() / ("gpt2-overlap-" + std::to_string(stage));
    std::string log;
    ASSERT_EQ(syncopate::run_command(
                  base + "--set strategy.stage=" + std::to_string(stage) + " --out " + dir.string(),
                  &log),
              0)
        << log;
    runs[stage] = summary_of(dir);
  }
  for (int stage : {2, 3}) {
    SCOPED_TRACE(stage);
    const nlohmann::json trace = nlohmann::json::parse(
        syncopate::read_text(scratch() / ("gpt2-overlap-" + std::to_string(stage)) / "trace.json"));
    // Per worker, each reduce-scatter's (launch, completion), by the async slice's id.
    std::map<int, std::map<int, std::pair<double, double>>> flights;
    for (const nlohmann::json& e : trace["traceEvents"]) {
      if (e.value("name", "") != "reduce_scatter" || !e.contains("id")) continue;
      auto& [launch, completion] = flights[e["pid"].get<int>()][e["id"].get<int>()];
      (e["ph"] == "b" ? launch : completion) = e["ts"].get<double>();
    }
    ASSERT_EQ(flights.size(), 8u);
    for (const auto& [worker, by_id] : flights) {
      std::vector<std::pair<double, double>> slices;
      for (const auto& [id, slice] : by_id) slices.push_back(slice);
      std::sort(slices.begin(), slices.end());
      ASSERT_GT(slices.size(), 100u);
      for (size_t k = 1; k < slices.size(); ++k)
        ASSERT_GE(slices[k].first, slices[k - 1].second) << "worker " << worker << ", " << k;
    }
  }
  const auto exposed = [&](int stage) { return runs[stage]["comm_time_s"].get<double>(); };
  const auto total = [&](int stage) { return runs[stage]["comm_total_time_s"].get<double>(); };
  EXPECT_NEAR(exposed(1), total(1), 1e-9 * total(1));
  EXPECT_LT(exposed(2), 0.95 * total(2));
  EXPECT_LT(exposed(3), 0.95 * total(3));
  const uint64_t params = 1'557'611'200, steps = 10, workers = 8;
  // Stage 3 also gathers the embedding's unit (its (50,257 + 1,024) x 1,600 weights alone, more
  // than a bucket) again for the tied output projection, in forward and in backward.
  const uint64_t embedding = (50'257 + 1'024) * 1'600;
  EXPECT_EQ(runs[3]["bytes_sent"].get<uint64_t>(), (3 * steps + 1) * (workers - 1) * 4 * params +
                                                       2 * steps * (workers - 1) * 4 * embedding);
  EXPECT_EQ(runs[1]["bytes_sent"].get<uint64_t>(), 2 * steps * (workers - 1) * 4 * params);

  // The flat ring (strategy.algorithm = "ring") moves the same bytes, but all of a node's
  // traffic across nodes goes through one GPU: stage 1's communication takes longer than with
  // the hierarchical passes (the default across nodes).
  const fs::path ring = scratch() / "gpt2-overlap-1-ring";
  std::string log;
  ASSERT_EQ(syncopate::run_command(base +
                                       "--set strategy.stage=1 --set strategy.algorithm=ring "
                                       "--out " +
                                       ring.string(),
                                   &log),
            0)
      << log;
  const nlohmann::json flat = summary_of(ring);
  EXPECT_EQ(flat["bytes_sent"].get<uint64_t>(), runs[1]["bytes_sent"].get<uint64_t>());
  EXPECT_GT(flat["comm_total_time_s"].get<double>(), 1.5 * total(1));
}

// With strategy.give_back_memory, on the host, zero gives back the pages it has done with,
// measured by mincore into summary.json:
// stage 3's model holds in memory at most the unit computing and the one prefetched, and stages
// 2 and 3 hold of the gradients the bucket being reduce-scattered and the one that backward
// fills (plus, for both, the pages that units share at their edges), where stage 1 holds both
// buffers whole. The model: one unit (and bucket) per layer, the largest four times the first
// (784 x 64), so that two are far from the whole. The same weights as stage 1's ring (they are
// ddp's arithmetic, whether the gradients were zeroed or given back).
TEST(ZeroRun, StagesTwoAndThreeHoldOnlyTheUnitsTheyComputeWithInMemory) {
  std::string text = syncopate::read_text(kSmall) + "\n";
  text.replace(text.find("name = \"mlp\""), 13, "input = [1, 28, 28]");
  text += "[[model.layers]]\nkind = \"flatten\"\n";
  for (int units : {64, 512, 512, 512, 512, 10}) {
    text += "[[model.layers]]\nkind = \"dense\"\nunits = " + std::to_string(units) + "\n";
    if (units != 10) text += "[[model.layers]]\nkind = \"relu\"\n";
  }
  const fs::path scenario = scratch() / "deep-mlp.toml";
  std::ofstream(scenario) << text;
  const uint64_t dense512 = 512 * 512 + 512;
  const uint64_t params = (784 * 64 + 64) + (64 * 512 + 512) + 3 * dense512 + (512 * 10 + 10);
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t units = 6;
  // Stage 1 on the simulator; stages 2 and 3 on the simulator and under mpirun.
  std::map<std::string, nlohmann::json> runs;
  // "2-kept": stage 2 without strategy.give_back_memory, which keeps both buffers whole.
  for (const std::string run : {"1-sim", "2-kept", "2-sim", "2-mpi", "3-sim", "3-mpi"}) {
    SCOPED_TRACE(run);
    const bool mpi = run.ends_with("mpi");
    const bool give_back = run[0] != '1' && run != "2-kept";
    std::string log;
    ASSERT_EQ(
        syncopate::run_command(
            (mpi ? syncopate::mpirun(2) + " " : std::string()) + bin() + " run " +
                scenario.string() + (mpi ? " --backend mpi" : " --backend sim") +
                " --workers 2 --quiet --strategy zero --set strategy.algorithm=ring "
                "--set strategy.stage=" +
                run.substr(0, 1) + (run[0] == '1' ? "" : " --set strategy.bucket_mb=0.000001") +
                (give_back ? " --set strategy.give_back_memory=true" : "") + " --out " +
                (scratch() / ("resident-" + run)).string(),
            &log),
        0)
        << log;
    runs[run] = summary_of(scratch() / ("resident-" + run));
    ASSERT_EQ(runs[run]["parameters"].get<uint64_t>(), params);
  }
  const auto bytes = [&](const std::string& run, const char* field) {
    return runs[run][field].get<uint64_t>();
  };
  // Two units, or buckets, of the largest and a page at each edge; at least the largest one.
  const uint64_t two_units = 2 * 4 * dense512 + (units + 1) * page;
  EXPECT_EQ(bytes("1-sim", "resident_parameters_bytes"), 4 * params);
  EXPECT_EQ(bytes("1-sim", "resident_gradients_bytes"), 4 * params);
  EXPECT_EQ(bytes("2-kept", "resident_parameters_bytes"), 4 * params);
  EXPECT_EQ(bytes("2-kept", "resident_gradients_bytes"), 4 * params);
  for (const std::string run : {"2-sim", "2-mpi", "3-sim", "3-mpi"}) {
    SCOPED_TRACE(run);
    if (run[0] == '2') {
      EXPECT_EQ(bytes(run, "resident_parameters_bytes"), 4 * params);
    } else {
      EXPECT_LE(bytes(run, "resident_parameters_bytes"), two_units);
      EXPECT_GE(bytes(run, "resident_parameters_bytes"), 4 * dense512 - 2 * page);
    }
    EXPECT_LE(bytes(run, "resident_gradients_bytes"), two_units);
    EXPECT_GE(bytes(run, "resident_gradients_bytes"), 4 * dense512 - 2 * page);
    EXPECT_TRUE(model_of(scratch() / ("resident-" + run)) ==
                model_of(scratch() / "resident-1-sim"));
  }
}

// GPT-2 XL at batch 64 on 8 GPUs: ddp needs 79.2 GB per GPU, more than the H100's 64 GiB, and is
// refused with every figure; zero stage 2 shards the gradients (but for the two buckets in use)
// and the AdamW state (63.5 GB) and runs.
TEST(ZeroRun, ARunThatDoesNotFitIsRefusedWithTheFigures) {
  const std::string base = bin() + " run " + kGpt2 +
                           " --workers 8 --set sim.platform_params.nodes=2 --set batch_size=64 "
                           "--set sim.cost_only_train_samples=5120 --quiet ";
  std::string log;
  const fs::path ddp = scratch() / "gpt2-ddp", zero = scratch() / "gpt2-zero";
  EXPECT_NE(syncopate::run_command(base + "--out " + ddp.string(), &log), 0);
  for (const char* figure :
       {"gpt2-xl-strategies-1024.toml", "the run needs 79.2 GB", "parameters 6.23 GB",
        "gradients 6.23 GB", "optimizer state 12.5 GB", "activations 54.3 GB at batch_size 64",
        "68.7 GB", "68719476736 bytes", "host profile h100 (memory_bytes)", "platform mn5-acc"})
    EXPECT_NE(log.find(figure), std::string::npos) << figure << " in:\n" << log;
  EXPECT_FALSE(fs::exists(ddp / "summary.json"));
  ASSERT_EQ(syncopate::run_command(
                base + "--strategy zero --set strategy.stage=2 --out " + zero.string(), &log),
            0)
      << log;
  const nlohmann::json s = summary_of(zero);
  const uint64_t params = 1'557'611'200, shard = params / 8;
  // The largest gradient bucket: the token and position embeddings, a layer of their own.
  const uint64_t embedding = 50'257 * 1'600 + 1'024 * 1'600;
  const uint64_t gradients = 4 * (shard + 2 * embedding);
  EXPECT_EQ(s["memory_parameters_bytes"].get<uint64_t>(), 4 * params);
  EXPECT_EQ(s["memory_gradients_bytes"].get<uint64_t>(), gradients);
  EXPECT_EQ(s["memory_optimizer_state_bytes"].get<uint64_t>(), 8 * shard);
  EXPECT_EQ(s["memory_activations_bytes"].get<uint64_t>(), 54'278'750'208u);
  EXPECT_EQ(s["memory_per_gpu_bytes"].get<uint64_t>(),
            4 * params + gradients + 8 * shard + 54'278'750'208u);
  EXPECT_LT(s["memory_per_gpu_bytes"].get<uint64_t>(), 68'719'476'736u);
}

}  // namespace
}  // namespace zero_test
