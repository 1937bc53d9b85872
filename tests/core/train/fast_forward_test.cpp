// The steady-state fast-forward's decision on a scripted executor (when it skips, how many steps,
// and what it says they would have added), and the epoch meter that adds them to the records.
#include "core/train/fast_forward.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "core/train/epoch_meter.hpp"

namespace syncopate {
namespace {

// Records every vote; all workers agree when this one votes yes.
class VotingExecutor final : public Executor {
 public:
  double now() const override { return 0; }
  void compute(const Cost&, FunctionRef<void()> math) override { math(); }
  bool all_agree(bool vote) override {
    votes.push_back(vote);
    return vote;
  }
  std::vector<bool> votes;
};

std::vector<PlannedStep> steps_of(size_t count, int64_t size) {
  std::vector<PlannedStep> steps(count);
  for (PlannedStep& step : steps) step.size = size;
  return steps;
}

const StepDelta kSteady{
    .time = 0.5, .compute = 0.25, .comm = 0.125, .idle = 0.0625, .sent = 100, .recv = 200};

// Feeds `delta` after steps 0, 1, ... until a skip (or the end); returns the skip and its step.
std::pair<Skip, size_t> run_until_skip(FastForward& ff, const std::vector<PlannedStep>& steps,
                                       int64_t sync, Executor& exec,
                                       const std::vector<StepDelta>& deltas = {}) {
  for (size_t k = 0; k < steps.size(); ++k) {
    const Skip skip = ff.after_step(k < deltas.size() ? deltas[k] : kSteady, k, steps, sync, exec);
    if (skip.steps > 0) return {skip, k};
  }
  return {Skip{}, steps.size()};
}

TEST(FastForward, AfterThreeSteadyStepsSkipsToTheEpochsLastStep) {
  VotingExecutor exec;
  FastForward ff(FastForward::Use::kOn);
  const std::vector<PlannedStep> steps = steps_of(20, 32);
  const auto [skip, at] = run_until_skip(ff, steps, 1, exec);
  EXPECT_EQ(at, 2u);
  EXPECT_EQ(skip.steps, 16u);  // steps 3..18; step 19, the last, runs
  EXPECT_EQ(skip.delta.time, 16 * 0.5);
  EXPECT_EQ(skip.delta.compute, 16 * 0.25);
  EXPECT_EQ(skip.delta.comm, 16 * 0.125);
  EXPECT_EQ(skip.delta.idle, 16 * 0.0625);
  EXPECT_EQ(skip.delta.sent, 1600u);
  EXPECT_EQ(skip.delta.recv, 3200u);
  EXPECT_EQ(exec.votes, std::vector<bool>{true});  // steps synchronise: the workers agree
}

TEST(FastForward, SkipsWholeSynchronisationPeriods) {
  VotingExecutor exec;
  FastForward ff(FastForward::Use::kOn);
  const std::vector<PlannedStep> steps = steps_of(40, 32);
  const auto [skip, at] = run_until_skip(ff, steps, 4, exec);
  EXPECT_EQ(at, 11u);          // after three periods of 4 steps
  EXPECT_EQ(skip.steps, 24u);  // (39 - 12) / 4 = 6 whole periods
  EXPECT_EQ(skip.delta.time, 6 * (4 * 0.5));
  EXPECT_EQ(skip.delta.sent, 6u * 400u);
}

TEST(FastForward, StopsBeforeABlocksFirstStepAndAStepOfAnotherSize) {
  VotingExecutor exec;
  std::vector<PlannedStep> steps = steps_of(20, 32);
  steps[10].block_begin = true;
  FastForward blocks(FastForward::Use::kOn);
  EXPECT_EQ(run_until_skip(blocks, steps, 0, exec).first.steps, 7u);  // 3..9; step 10 runs
  steps[10].block_begin = false;
  steps[8].size = 31;
  FastForward sizes(FastForward::Use::kOn);
  EXPECT_EQ(run_until_skip(sizes, steps, 0, exec).first.steps, 5u);  // 3..7; step 8 runs
  EXPECT_TRUE(exec.votes.empty());  // epoch-level strategies decide alone
}

TEST(FastForward, ACostThatChangedIsNoSteadyState) {
  VotingExecutor exec;
  FastForward ff(FastForward::Use::kOn);
  StepDelta slower = kSteady;
  slower.comm *= 1.001;
  const std::vector<PlannedStep> steps = steps_of(20, 32);
  // Periods 2 and 3 differ: no skip at step 2; from step 3 on, the last two agree again.
  const auto [skip, at] = run_until_skip(ff, steps, 1, exec, {kSteady, kSteady, slower});
  EXPECT_EQ(at, 4u);
  EXPECT_EQ(skip.steps, 14u);
  EXPECT_EQ(exec.votes, (std::vector<bool>{false, false, true}));
}

// Noise keeps every step's cost different: nothing is skipped, and only the last two periods
// are held (not one delta per step of the epoch), while the decision still sees them: a steady
// run after 1,000 noisy steps skips once its last two periods agree.
TEST(FastForward, HoldsTwoPeriodsOfAnUnsteadyEpoch) {
  VotingExecutor exec;
  FastForward ff(FastForward::Use::kOn);
  const std::vector<PlannedStep> steps = steps_of(1200, 32);
  std::vector<StepDelta> deltas(1000, kSteady);
  for (size_t k = 0; k < deltas.size(); ++k) deltas[k].comm += 1e-3 * static_cast<double>(k);
  size_t k = 0;
  for (; k < deltas.size(); ++k) {
    ASSERT_EQ(ff.after_step(deltas[k], k, steps, 4, exec).steps, 0u) << k;
    EXPECT_LE(ff.held(), 8u) << k;
  }
  Skip skip;
  for (; k < steps.size() && skip.steps == 0; ++k) skip = ff.after_step(kSteady, k, steps, 4, exec);
  // Steady from step 1,000: periods 250 and 251 agree at step 1,007, the first power-of-two try
  // after that is period 256 (steps 1,020..1,023), then (1,199 - 1,024) / 4 = 43 periods skip.
  EXPECT_EQ(k, 1024u);
  EXPECT_EQ(skip.steps, 43u * 4u);
  EXPECT_EQ(skip.delta.sent, 43u * 400u);
  EXPECT_EQ(ff.held(), 0u);
}

TEST(FastForward, OffNeverSkips) {
  VotingExecutor exec;
  FastForward ff(FastForward::Use::kOff);
  EXPECT_EQ(run_until_skip(ff, steps_of(20, 32), 1, exec).first.steps, 0u);
  EXPECT_TRUE(exec.votes.empty());
}

TEST(EpochMeter, RowHoldsTheDifferencesPlusSkippedStepsAndTheRestAsIdle) {
  const MeterReading start{.time = 1.0,
                           .phases = {.compute_s = 0.5, .comm_s = 0.25, .idle_s = 0},
                           .counters = {.bytes_sent = 10, .bytes_recv = 20}};
  const MeterReading end{.time = 5.0,
                         .phases = {.compute_s = 1.5, .comm_s = 0.75, .idle_s = 0.25},
                         .counters = {.bytes_sent = 110, .bytes_recv = 220}};
  EpochMeter meter(start);
  meter.add_skipped({.time = 1.0, .compute = 0.5, .comm = 0.25, .idle = 0, .sent = 5, .recv = 6});
  LossTally tally;
  tally.add({.loss = 2.0, .correct = 3}, 4, 0.1);
  tally.add({.loss = 1.0, .correct = 1}, 4, 0.05);
  tally.add({}, 0, 0.025);  // a step without samples: only its learning rate counts
  const EpochMetrics m = meter.finish(end, 3, 7, tally, true);
  EXPECT_EQ(m.worker, 3);
  EXPECT_EQ(m.epoch, 7);
  EXPECT_EQ(m.start_s, 1.0);
  EXPECT_EQ(m.end_s, 5.0);
  EXPECT_EQ(m.compute_s, 1.5);
  EXPECT_EQ(m.comm_s, 0.75);
  EXPECT_EQ(m.idle_s, 4.0 - 1.5 - 0.75);  // 0.25 measured + the rest of the epoch
  EXPECT_EQ(m.bytes_sent, 105u);
  EXPECT_EQ(m.bytes_recv, 206u);
  EXPECT_EQ(m.train_loss, 1.5);
  EXPECT_EQ(m.train_accuracy, 0.5);
  EXPECT_EQ(m.lr, 0.025);
  EXPECT_EQ(meter.finish(end, 3, 7, tally, false).train_accuracy, -1.0);  // regression: absent
}

}  // namespace
}  // namespace syncopate
