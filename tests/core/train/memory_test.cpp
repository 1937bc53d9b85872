// Per-GPU memory (core/train/memory.hpp): the ZeRO accounting of parameters, gradients,
// optimizer state and activations, per strategy and optimizer.
#include "core/train/memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/nn/model.hpp"
#include "core/nn/model_summary.hpp"
#include "core/train/strategy.hpp"
#include "tests/common/serial_defaults.hpp"

namespace syncopate {
namespace {

// GPT-2 XL on 1,024 workers, batch 1, AdamW, cost-only on the simulator.
Scenario gpt2(const std::vector<std::string>& sets) {
  const char* text = R"(
name = "gpt2"
workers = 1024
batch_size = 1
backend = "sim"
[model]
name = "gpt2-xl"
[data]
dataset = "synthetic"
[optimizer]
kind = "adamw"
[sim]
mode = "cost_only"
)";
  return parse_scenario(text, "<test>", sets);
}

constexpr uint64_t kParams = 1'557'611'200;           // GPT-2 XL, tied embeddings
constexpr uint64_t kShard = (kParams + 1023) / 1024;  // the largest of 1,024 blocks

TEST(MemoryPerGpu, DdpHoldsEverythingZeroShardsByStage) {
  const uint64_t activations =
      static_cast<uint64_t>(summarize_model(gpt2({}).model.spec(), 1).activation_bytes);
  EXPECT_EQ(activations, 848'105'472u);
  const GpuMemory ddp = memory_per_gpu(gpt2({"strategy.name=ddp"}));
  EXPECT_EQ(ddp.parameters, 4 * kParams);
  EXPECT_EQ(ddp.gradients, 4 * kParams);
  EXPECT_EQ(ddp.optimizer_state, 8 * kParams);  // AdamW: m and v
  EXPECT_EQ(ddp.activations, activations);
  EXPECT_EQ(ddp.total(), 16 * kParams + activations);
  const GpuMemory z1 = memory_per_gpu(gpt2({"strategy.name=zero", "strategy.stage=1"}));
  EXPECT_EQ(z1.parameters, 4 * kParams);
  EXPECT_EQ(z1.gradients, 4 * kParams);
  EXPECT_EQ(z1.optimizer_state, 8 * kShard);
  const GpuMemory z2 =
      memory_per_gpu(gpt2({"strategy.name=zero", "strategy.stage=2", "strategy.bucket_mb=25"}));
  EXPECT_EQ(z2.parameters, 4 * kParams);
  const uint64_t bucket = largest_unit(summarize_model(gpt2({}).model.spec(), 1), 25);
  EXPECT_EQ(z2.gradients, 4 * (kShard + 2 * bucket));
  EXPECT_EQ(z2.optimizer_state, 8 * kShard);
  EXPECT_EQ(z2.activations, activations);
  // local_sgd and epoch_sync keep a full replica, as ddp.
  EXPECT_EQ(memory_per_gpu(gpt2({"strategy.name=local_sgd"})).total(), ddp.total());
}

// Stage 3 shards the parameters too and holds two whole units (the one computing and the one
// prefetched): GPT-2 XL's 25 MiB units are its transformer blocks' pieces, far below the model.
TEST(MemoryPerGpu, StageThreeShardsTheParametersPlusTwoUnits) {
  const Scenario s = gpt2({"strategy.name=zero", "strategy.stage=3", "strategy.bucket_mb=25"});
  const uint64_t unit = largest_unit(summarize_model(s.model.spec(), 1), 25);
  EXPECT_GE(4 * unit, 25u * 1024 * 1024);
  EXPECT_LT(unit, kParams / 10);
  const GpuMemory z3 = memory_per_gpu(s);
  EXPECT_EQ(z3.parameters, 4 * (kShard + 2 * unit));
  EXPECT_EQ(z3.gradients, 4 * (kShard + 2 * unit));
  EXPECT_EQ(z3.optimizer_state, 8 * kShard);
  EXPECT_LT(
      z3.total(),
      memory_per_gpu(gpt2({"strategy.name=zero", "strategy.stage=2", "strategy.bucket_mb=25"}))
          .total());
}

// largest_unit follows gradient_buckets' rule: the largest bucket of the built model.
TEST(MemoryPerGpu, LargestUnitIsTheLargestGradientBucket) {
  const ModelSpec spec = zoo_spec("mlp");
  const Model model(spec);
  for (double mb : {1e-6, 0.25, 0.5, 100.0}) {
    uint64_t largest = 0;
    for (const GradientBucket& b : gradient_buckets(model, mb))
      largest = std::max<uint64_t>(largest, b.count);
    EXPECT_EQ(largest_unit(summarize_model(spec, 1), mb), largest) << mb << " MiB";
  }
}

TEST(MemoryPerGpu, OptimizerStateFollowsTheOptimizer) {
  const Scenario sgd =
      parse_scenario(default_scenario_text(), "<test>", serial_defaults({"optimizer.momentum=0"}));
  const Scenario momentum = parse_scenario(default_scenario_text(), "<test>", serial_defaults({}));
  const auto n = static_cast<uint64_t>(summarize_model(sgd.model.spec(), 64).params);
  EXPECT_EQ(memory_per_gpu(sgd).optimizer_state, 0u);
  EXPECT_EQ(memory_per_gpu(momentum).optimizer_state, 4 * n);
  EXPECT_EQ(memory_per_gpu(momentum).activations,
            static_cast<uint64_t>(summarize_model(sgd.model.spec(), 64).activation_bytes));
}

TEST(MemoryPerGpu, DilocoAddsTheGlobalModelAndItsOuterMomentum) {
  const GpuMemory ddp = memory_per_gpu(gpt2({"strategy.name=ddp"}));
  const GpuMemory diloco = memory_per_gpu(gpt2({"strategy.name=diloco"}));
  EXPECT_EQ(diloco.optimizer_state, ddp.optimizer_state + 8 * kParams);
  const GpuMemory plain =
      memory_per_gpu(gpt2({"strategy.name=diloco", "strategy.outer_momentum=0"}));
  EXPECT_EQ(plain.optimizer_state, ddp.optimizer_state + 4 * kParams);
  EXPECT_EQ(diloco.parameters, ddp.parameters);
  EXPECT_EQ(diloco.gradients, ddp.gradients);
}

TEST(MemoryPerGpu, DescribeNamesEveryPart) {
  const GpuMemory m{.parameters = 6'230'444'800,
                    .gradients = 6'230'444'800,
                    .optimizer_state = 12'460'889'600,
                    .activations = 54'278'750'208};
  EXPECT_EQ(describe(m, 64),
            "79.2 GB (parameters 6.23 GB, gradients 6.23 GB, optimizer state 12.5 GB, "
            "activations 54.3 GB at batch_size 64)");
  EXPECT_EQ(format_bytes(999), "999 B");
}

// ddp with PowerSGD at rank 4 on the mlp (dense 784-256, 256-128, 128-10 with biases): the
// gradients, the error feedback of the same size, P (256 + 128 + 10 rows x 4), Q (784 + 256 +
// 128 columns x 4) and the 394 biases packed as vectors.
TEST(MemoryPerGpu, PowerSgdHoldsItsErrorFeedbackAndFactorsWithTheGradients) {
  const std::string text =
      "workers = 4\n[model]\nname = \"mlp\"\n[data]\ndataset = \"synthetic\"\n";
  const Scenario plain = parse_scenario(text, "<test>", {"strategy.name=ddp"});
  const Scenario powersgd = parse_scenario(
      text, "<test>",
      {"strategy.name=ddp", "strategy.compression=powersgd", "strategy.powersgd_rank=4"});
  constexpr uint64_t params = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;
  constexpr uint64_t factors = (256 + 128 + 10) * 4 + (784 + 256 + 128) * 4 + (256 + 128 + 10);
  EXPECT_EQ(memory_per_gpu(plain).gradients, 4 * params);
  EXPECT_EQ(memory_per_gpu(powersgd).gradients, 4 * (params + params + factors));
  EXPECT_EQ(memory_per_gpu(powersgd).parameters, memory_per_gpu(plain).parameters);
}

}  // namespace
}  // namespace syncopate
