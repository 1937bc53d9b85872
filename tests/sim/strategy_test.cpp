// Strategy invariants on the simulator: the Trainer and every strategy run on simulated workers
// (emulation: real tensors, simulated time).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "tests/sim/sim_training.hpp"

namespace syncopate {
namespace {

// 2 nodes of mn5-acc at flow fidelity.
Scenario two_node_scenario(const std::vector<std::string>& extra) {
  std::vector<std::string> sets = {"sim.platform_params.nodes=2", "sim.fidelity=flow"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return testing::small_scenario(sets);
}

using testing::serial;
using testing::SimRun;
using testing::simulate;

TEST(SimStrategies, OneWorkerEveryStrategyEqualsSerialSgd) {
  const WorkerReport global = serial(two_node_scenario({"data.order=global"}));
  const WorkerReport blocks = serial(two_node_scenario({"data.order=blocks"}));
  for (const std::string name : {"serial", "ddp", "local_sgd", "hierarchical", "epoch_sync"}) {
    const bool block_order = name == "epoch_sync";
    const SimRun run = simulate(two_node_scenario({"workers=1", "strategy.name=" + name}));
    ASSERT_TRUE(run.error.empty()) << name << ": " << run.error;
    EXPECT_EQ(run.params.at(0), (block_order ? blocks : global).final_params) << name;
  }
  const SimRun async = simulate(two_node_scenario(
      {"workers=1", "strategy.name=epoch_async", "strategy.merge_local_weight=1"}));
  ASSERT_TRUE(async.error.empty()) << async.error;
  EXPECT_EQ(async.params.at(0), blocks.final_params);
  // diloco's outer step with lr 1 and no momentum sets the global model to the mean: the
  // identity with one worker.
  const SimRun diloco =
      simulate(two_node_scenario({"workers=1", "strategy.name=diloco", "strategy.every=4",
                                  "strategy.outer_lr=1", "strategy.outer_momentum=0"}));
  ASSERT_TRUE(diloco.error.empty()) << diloco.error;
  EXPECT_EQ(diloco.params.at(0), global.final_params);
}

// DiLoCo leaves identical replicas (every worker applies the same outer step to the same global
// model); each fragment takes one outer step every H steps at its offset, plus one at the end if
// it trained since. 3 workers, 768 samples, batch 16: 16 steps per epoch, 32 in all.
TEST(SimStrategies, DilocoLeavesIdenticalReplicasAndSynchronisesEachFragmentEveryHSteps) {
  struct Case {
    std::string fragments;
    size_t outer_steps;
  };
  // H = 5, F = 1: steps 5, 10, ..., 30 + end; F = 5 (stagger 1): fragment f at steps with
  // (step + f) % 5 == 0: 6 or 7 each, 32 in all, plus an end step for the 4 not at step 32.
  for (const Case& c : {Case{"1", 7}, Case{"5", 36}}) {
    const SimRun run = simulate(
        two_node_scenario({"workers=3", "sim.platform_params.nodes=1", "strategy.name=diloco",
                           "strategy.every=5", "strategy.fragments=" + c.fragments}));
    ASSERT_TRUE(run.error.empty()) << run.error;
    ASSERT_EQ(run.params.size(), 3u);
    EXPECT_EQ(run.params[1], run.params[0]) << c.fragments;
    EXPECT_EQ(run.params[2], run.params[0]) << c.fragments;
    size_t outer = 0;
    for (const auto& t : run.syncs) outer += t.name == "outer_step" && t.worker == 0;
    EXPECT_EQ(outer, c.outer_steps) << c.fragments;
  }
}

// The outer update is arithmetic over three copies of the parameters, which a real run spends
// between its steps: the simulator charges it as idle time (outside the steps' compute), and it
// is the whole time diloco takes beyond local_sgd's at one worker (one rank's allreduce costs
// nothing). Each outer step of one fragment costs the same. (The paper's outer optimizer
// diverges on this scenario at one worker; lr 1 without momentum costs the same arithmetic.)
TEST(SimStrategies, DilocoChargesItsOuterUpdateAsIdleTime) {
  const std::vector<std::string> common = {"workers=1", "strategy.every=4"};
  const auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return two_node_scenario(extra);
  };
  const SimRun local = simulate(with({"strategy.name=local_sgd"}));
  const SimRun diloco =
      simulate(with({"strategy.name=diloco", "strategy.outer_lr=1", "strategy.outer_momentum=0"}));
  ASSERT_TRUE(local.error.empty()) << local.error;
  ASSERT_TRUE(diloco.error.empty()) << diloco.error;
  double outer = 0, first = -1;
  size_t steps = 0;
  for (const TraceEvent& t : diloco.syncs) {
    if (t.name != "outer_step") continue;
    if (first < 0) first = t.duration_s;
    EXPECT_NEAR(t.duration_s, first, 1e-12);
    outer += t.duration_s;
    ++steps;
  }
  ASSERT_GT(steps, 2u);
  EXPECT_GT(first, 0.0);
  ASSERT_EQ(diloco.epochs.size(), local.epochs.size());
  double extra_time = 0, extra_idle = 0;
  for (size_t i = 0; i < diloco.epochs.size(); ++i) {
    const EpochMetrics &d = diloco.epochs[i], &l = local.epochs[i];
    EXPECT_NEAR(d.compute_s, l.compute_s, 1e-9 * l.compute_s) << "epoch " << i;
    extra_time += (d.end_s - d.start_s) - (l.end_s - l.start_s);
    extra_idle += d.idle_s - l.idle_s;
  }
  EXPECT_NEAR(extra_time, outer, 1e-9 + 1e-6 * outer);
  EXPECT_NEAR(extra_idle, outer, 1e-9 + 1e-6 * outer);
}

// W workers of local batch b take the same steps as one worker of batch W*b, to rounding.
TEST(SimStrategies, DdpEqualsSerialSgdWithTheGlobalBatch) {
  const WorkerReport reference = serial(two_node_scenario({"batch_size=64"}));
  for (const char* algorithm : {"ring", "rabenseifner", "hierarchical"}) {
    const SimRun run = simulate(two_node_scenario(
        {"workers=4", "strategy.name=ddp", std::string("strategy.algorithm=") + algorithm}));
    ASSERT_TRUE(run.error.empty()) << run.error;
    ASSERT_EQ(run.params.size(), 4u);
    // Normalised error ||a - b|| / ||b|| over the whole model.
    double diff = 0, norm = 0;
    for (size_t i = 0; i < reference.final_params.size(); ++i) {
      const double a = run.params[0][i], b = reference.final_params[i];
      diff += (a - b) * (a - b);
      norm += b * b;
    }
    EXPECT_LE(std::sqrt(diff / norm), 1e-5) << algorithm;
    for (int w = 1; w < 4; ++w) EXPECT_EQ(run.params[static_cast<size_t>(w)], run.params[0]);
  }
}

TEST(SimStrategies, EpochSyncLeavesIdenticalReplicas) {
  for (const std::string extra :
       {"strategy.every=1", "strategy.every=2", "strategy.aggregation=master",
        "strategy.optimizer_state=average"}) {
    const SimRun run =
        simulate(two_node_scenario({"workers=3", "epochs=3", "strategy.name=epoch_sync", extra,
                                    "sim.platform_params.nodes=1"}));
    ASSERT_TRUE(run.error.empty()) << extra << ": " << run.error;
    ASSERT_EQ(run.params.size(), 3u);
    EXPECT_EQ(run.params[1], run.params[0]) << extra;
    EXPECT_EQ(run.params[2], run.params[0]) << extra;
    size_t averages = 0;
    for (const auto& t : run.syncs) averages += t.name == "average";
    EXPECT_EQ(averages, (extra == "strategy.every=2" ? 2u : 3u) * 3u) << extra;
  }
}

// One metrics.csv row.
struct Row {
  double start = 0, end = 0;
  uint64_t sent = 0;
};
// metrics.csv text -> rows[worker][epoch].
std::vector<std::vector<Row>> rows_of(const std::string& metrics) {
  std::vector<std::vector<Row>> rows;
  for (const EpochMetrics& e : parse_metrics_csv(metrics, "metrics.csv")) {
    const auto worker = static_cast<size_t>(e.worker), epoch = static_cast<size_t>(e.epoch);
    if (rows.size() <= worker) rows.resize(worker + 1);
    if (rows[worker].size() <= epoch) rows[worker].resize(epoch + 1);
    rows[worker][epoch] = {e.start_s, e.end_s, e.bytes_sent};
  }
  return rows;
}

// Normalised error ||a - b|| / ||b||.
double normalised_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

// 8 workers on 2 nodes of 4, 768 samples, batch 16: 6 global steps per epoch, 2 epochs. The MLP's
// gradients fit one 25 MiB bucket, so a ddp step and a weight average move the same bytes.
const std::vector<std::string> kEightOnTwoNodes = {"workers=8", "sim.platform_params.nodes=2"};

std::vector<std::string> with(std::vector<std::string> sets,
                              const std::vector<std::string>& extra) {
  sets.insert(sets.end(), extra.begin(), extra.end());
  return sets;
}

// Local SGD averages the weights after every H-th local step, counted across epochs, plus once
// at the end of training; during its ddp warm-up it averages gradients at every step. The bytes
// each worker sends per epoch count the averages: one average moves what epoch_sync's first
// epoch moves (its one average).
TEST(SimStrategies, LocalSgdAveragesEveryHStepsAndAtTheEnd) {
  const SimRun unit =
      simulate(two_node_scenario(with(kEightOnTwoNodes, {"strategy.name=epoch_sync"})));
  ASSERT_TRUE(unit.error.empty()) << unit.error;
  struct Expectation {
    std::vector<std::string> sets;
    uint64_t averages[2];  // per epoch
    size_t traced;         // "average" spans in the trace (the warm-up's ddp steps are not)
  };
  const Expectation cases[] = {
      {{"strategy.every=3"}, {2, 2 + 1}, 5},  // steps 3, 6 | 9, 12 + end
      {{"strategy.every=4"}, {1, 2 + 1}, 4},  // step 4 | 8, 12 + end
      {{"strategy.every=4", "strategy.warmup_epochs=1"}, {6, 1 + 1}, 2},  // ddp x 6 | 4 + end
      {{"strategy.every=100"}, {0, 0 + 1}, 1},                            // only the end
  };
  const auto unit_rows = rows_of(unit.metrics);
  for (const Expectation& c : cases) {
    const SimRun run = simulate(
        two_node_scenario(with(with(kEightOnTwoNodes, {"strategy.name=local_sgd"}), c.sets)));
    ASSERT_TRUE(run.error.empty()) << c.sets[0] << ": " << run.error;
    const auto rows = rows_of(run.metrics);
    ASSERT_EQ(rows.size(), 8u);
    for (size_t w = 0; w < 8; ++w) {
      const uint64_t one = unit_rows[w][0].sent;
      EXPECT_GT(one, 0u);
      for (size_t e = 0; e < 2; ++e)
        EXPECT_EQ(rows[w][e].sent, c.averages[e] * one)
            << c.sets.back() << " worker " << w << " epoch " << e;
      size_t traced = 0;
      for (const auto& t : run.syncs)
        traced += t.name == "average" && t.worker == static_cast<int>(w);
      EXPECT_EQ(traced, c.traced) << c.sets.back() << " worker " << w;
    }
    for (size_t w = 1; w < run.params.size(); ++w) EXPECT_EQ(run.params[w], run.params[0]);
  }
}

// Averaging the weights after every step with SGD (momentum is linear) takes the steps of ddp,
// to rounding; averaging only at the end does not.
TEST(SimStrategies, LocalSgdWithHOneTakesTheStepsOfDdp) {
  const SimRun ddp = simulate(two_node_scenario(with(kEightOnTwoNodes, {"strategy.name=ddp"})));
  const SimRun every_step = simulate(
      two_node_scenario(with(kEightOnTwoNodes, {"strategy.name=local_sgd", "strategy.every=1"})));
  const SimRun at_end = simulate(
      two_node_scenario(with(kEightOnTwoNodes, {"strategy.name=local_sgd", "strategy.every=100"})));
  ASSERT_TRUE(ddp.error.empty() && every_step.error.empty() && at_end.error.empty())
      << ddp.error << every_step.error << at_end.error;
  EXPECT_LE(normalised_error(every_step.params[0], ddp.params[0]), 1e-5);
  EXPECT_GT(normalised_error(at_end.params[0], ddp.params[0]), 1e-3);
}

// Hierarchical: weights across the nodes once per epoch, at its end. Each worker's one "average"
// per epoch lies inside that epoch, and each epoch's bytes are the closed form of its traffic:
// one node-local gradient allreduce per step (what a one-node ddp step sends) plus one world
// average (what epoch_sync's first epoch sends).
TEST(SimStrategies, HierarchicalAveragesAcrossNodesOnceEveryEpoch) {
  const SimRun run =
      simulate(two_node_scenario(with(kEightOnTwoNodes, {"strategy.name=hierarchical"})));
  const SimRun world =
      simulate(two_node_scenario(with(kEightOnTwoNodes, {"strategy.name=epoch_sync"})));
  // One node of four: the gradient allreduce that each of hierarchical's steps runs in a node.
  const SimRun node = simulate(
      two_node_scenario({"workers=4", "sim.platform_params.nodes=1", "strategy.name=ddp"}));
  ASSERT_TRUE(run.error.empty() && world.error.empty() && node.error.empty())
      << run.error << world.error << node.error;
  const auto rows = rows_of(run.metrics), world_rows = rows_of(world.metrics),
             node_rows = rows_of(node.metrics);
  ASSERT_EQ(rows.size(), 8u);
  // 768 samples: 12 steps of 4 x 16 on one node, 6 steps of 8 x 16 for hierarchical.
  constexpr uint64_t kNodeSteps = 12, kSteps = 6;
  for (size_t w = 0; w < 8; ++w) {
    EXPECT_GT(world_rows[w][0].sent, 0u);
    const uint64_t node_epoch = node_rows[w % 4][0].sent;
    ASSERT_EQ(node_epoch % kNodeSteps, 0u) << "every ddp step sends the same bytes";
    // Counted on both levels: 6 node-local gradient allreduces and one cross-node average.
    const uint64_t expected = node_epoch / kNodeSteps * kSteps + world_rows[w][0].sent;
    for (size_t e = 0; e < 2; ++e)
      EXPECT_EQ(rows[w][e].sent, expected) << "worker " << w << " epoch " << e;
    std::vector<double> averages;
    for (const auto& t : run.syncs)
      if (t.name == "average" && t.worker == static_cast<int>(w)) averages.push_back(t.start_s);
    ASSERT_EQ(averages.size(), 2u) << "worker " << w;
    std::sort(averages.begin(), averages.end());
    for (size_t e = 0; e < 2; ++e) {
      EXPECT_GE(averages[e], rows[w][e].start) << "worker " << w << " epoch " << e;
      EXPECT_LE(averages[e], rows[w][e].end) << "worker " << w << " epoch " << e;
    }
  }
  for (size_t w = 1; w < run.params.size(); ++w) EXPECT_EQ(run.params[w], run.params[0]);
}

// With every worker on one node the node is the world: hierarchical averages the gradients at
// every step and so takes the steps of ddp (local SGD averaging only at the end does not).
TEST(SimStrategies, HierarchicalOnOneNodeTakesTheStepsOfDdp) {
  const std::vector<std::string> one_node = {"workers=4", "sim.platform_params.nodes=1"};
  const SimRun ddp = simulate(two_node_scenario(with(one_node, {"strategy.name=ddp"})));
  const SimRun hierarchical =
      simulate(two_node_scenario(with(one_node, {"strategy.name=hierarchical"})));
  const SimRun local = simulate(
      two_node_scenario(with(one_node, {"strategy.name=local_sgd", "strategy.every=100"})));
  ASSERT_TRUE(ddp.error.empty() && hierarchical.error.empty() && local.error.empty())
      << ddp.error << hierarchical.error << local.error;
  EXPECT_LE(normalised_error(hierarchical.params[0], ddp.params[0]), 1e-6);
  EXPECT_GT(normalised_error(local.params[0], ddp.params[0]), 1e-3);
}

// Merges are exclusive and happen in simulated arrival order: with one slow worker, its merge
// of each epoch comes after the others'.
TEST(SimStrategies, EpochAsyncMergesFollowArrivalOrder) {
  const SimRun run = simulate(two_node_scenario(
      {"workers=3", "epochs=3", "strategy.name=epoch_async", "sim.slowdown.2=3.0"}));
  ASSERT_TRUE(run.error.empty()) << run.error;
  std::vector<TraceEvent> merges;
  for (const auto& t : run.syncs)
    if (t.name == "merge") merges.push_back(t);
  ASSERT_EQ(merges.size(), 9u);
  // Served one at a time in arrival order: by completion, arrivals never go backwards (ties
  // may go either way), and completions are at least one uncontended merge apart.
  std::sort(merges.begin(), merges.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.start_s + a.duration_s < b.start_s + b.duration_s;
  });
  double service = merges[0].duration_s;
  for (const auto& m : merges) service = std::min(service, m.duration_s);
  EXPECT_GT(service, 0.0);
  for (size_t i = 1; i < merges.size(); ++i) {
    EXPECT_GE(merges[i].start_s, merges[i - 1].start_s - 1e-12) << i;
    EXPECT_GE(merges[i].start_s + merges[i].duration_s,
              merges[i - 1].start_s + merges[i - 1].duration_s + service * (1 - 1e-9))
        << i;
  }
  // The slow worker arrives last in its first epoch, after both fast ones merged twice.
  int fast_before_slow = 0;
  for (const auto& m : merges) {
    if (m.worker == 2) break;
    ++fast_before_slow;
  }
  EXPECT_GE(fast_before_slow, 4);
  // Snapshots differ between workers (no barrier), but the final model is their mean: all equal.
  for (size_t w = 1; w < run.params.size(); ++w) EXPECT_EQ(run.params[w], run.params[0]);
}

// The merging workers in the order their merges completed.
std::vector<int> merge_order(const SimRun& run) {
  std::vector<TraceEvent> merges;
  for (const auto& t : run.syncs)
    if (t.name == "merge") merges.push_back(t);
  std::sort(merges.begin(), merges.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.start_s + a.duration_s < b.start_s + b.duration_s;
  });
  std::vector<int> order;
  for (const auto& m : merges) order.push_back(m.worker);
  return order;
}

// strategy.global_model = "migrating" changes where the model sits, not the arithmetic: merged in
// the same order (8 workers on 2 nodes, a straggler), the numbers are the master's bit for bit;
// its merges are faster (one fetch over a node's Ethernet or NVLink instead of the round trip
// through the master's link), and a worker receives the model only from another worker.
TEST(SimStrategies, EpochAsyncMigratingMergesAsTheMasterDoes) {
  const std::vector<std::string> sets = {"workers=8", "strategy.name=epoch_async",
                                         "sim.slowdown.5=1.5"};
  std::vector<std::string> migrating_sets = sets;
  migrating_sets.push_back("strategy.global_model=migrating");
  const SimRun master = simulate(two_node_scenario(sets));
  const SimRun migrating = simulate(two_node_scenario(migrating_sets));
  ASSERT_TRUE(master.error.empty() && migrating.error.empty()) << master.error << migrating.error;
  ASSERT_EQ(merge_order(master).size(), 16u);
  ASSERT_EQ(merge_order(migrating), merge_order(master));
  EXPECT_EQ(migrating.params, master.params);
  double master_s = 0, migrating_s = 0;
  for (const auto& t : master.syncs) master_s += t.name == "merge" ? t.duration_s : 0;
  for (const auto& t : migrating.syncs) migrating_s += t.name == "merge" ? t.duration_s : 0;
  EXPECT_LT(migrating_s, master_s);
  const std::vector<EpochMetrics> a = parse_metrics_csv(master.metrics, "metrics.csv");
  const std::vector<EpochMetrics> b = parse_metrics_csv(migrating.metrics, "metrics.csv");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].train_loss, b[i].train_loss) << i;
    if (a[i].epoch != 0) continue;  // the final average follows the last epoch
    EXPECT_EQ(b[i].bytes_sent, 0u) << i;
    EXPECT_TRUE(b[i].bytes_recv == 0 || b[i].bytes_recv == a[i].bytes_recv) << i;
  }
}

// End of `worker`'s epoch `epoch` in a metrics.csv text.
double epoch_end(const std::string& metrics, int worker, int epoch) {
  double end = 0;
  for (const EpochMetrics& e : parse_metrics_csv(metrics, "metrics.csv")) {
    if (e.worker == worker && e.epoch == epoch) end = e.end_s;
  }
  return end;
}

// A straggler delays ddp at every step (everyone waits for it) but epoch_async only at merges
// (and at the final averaging, so compare the first epoch).
TEST(SimStrategies, StragglerDelaysDdpEverywhereButEpochAsyncOnlyAtMerges) {
  for (const std::string name : {"ddp", "epoch_async"}) {
    const SimRun base = simulate(two_node_scenario({"workers=4", "strategy.name=" + name}));
    const SimRun slow =
        simulate(two_node_scenario({"workers=4", "strategy.name=" + name, "sim.slowdown.3=4.0"}));
    ASSERT_TRUE(base.error.empty() && slow.error.empty()) << base.error << slow.error;
    const double fast_ratio = epoch_end(slow.metrics, 0, 0) / epoch_end(base.metrics, 0, 0);
    const double slow_ratio = epoch_end(slow.metrics, 3, 0) / epoch_end(base.metrics, 3, 0);
    EXPECT_GT(slow_ratio, 2.5) << name;
    if (name == "ddp") {
      EXPECT_GT(fast_ratio, 2.5) << "ddp waits for the straggler at every step";
    } else {
      EXPECT_LT(fast_ratio, 1.5) << "epoch_async's fast workers do not wait";
    }
  }
}

TEST(SimStrategies, SameScenarioTwiceGivesIdenticalFiles) {
  for (const std::string name : {"ddp", "epoch_async"}) {
    const Scenario s =
        two_node_scenario({"workers=3", "strategy.name=" + name, "sim.slowdown.1=1.7"});
    const SimRun a = simulate(s), b = simulate(s);
    ASSERT_TRUE(a.error.empty() && b.error.empty()) << a.error << b.error;
    EXPECT_EQ(a.metrics, b.metrics) << name;
    EXPECT_EQ(a.params, b.params) << name;
  }
}

// Bytes that `worker` sent over the whole run, from a metrics.csv text.
uint64_t bytes_sent_by(const std::string& metrics, int worker) {
  std::istringstream in(metrics);
  std::string line;
  std::getline(in, line);
  uint64_t bytes = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (std::stoi(cells[0]) == worker) bytes += std::stoull(cells[7]);
  }
  return bytes;
}

// hierarchical's cross-node weight average runs strategy.algorithm. With one GPU per node the
// node groups are single workers, so that average is the only traffic: gathered to the master,
// worker 0 sends 3 models per average, twice as much as in a ring (1.5 models).
TEST(SimStrategies, HierarchicalCrossNodeAverageUsesTheAlgorithm) {
  const auto sent_by_0 = [](const std::string& algorithm) {
    const SimRun run = simulate(two_node_scenario(
        {"workers=4", "strategy.name=hierarchical", "sim.platform_params.gpus_per_node=1",
         "sim.platform_params.nodes=4", "strategy.algorithm=" + algorithm}));
    EXPECT_TRUE(run.error.empty()) << run.error;
    return static_cast<double>(bytes_sent_by(run.metrics, 0));
  };
  const double master = sent_by_0("master"), ring = sent_by_0("ring");
  ASSERT_GT(ring, 0);
  // Through the platform's master host each worker sends its model once (n); the ring sends
  // 2 (p - 1) / p n = 1.5 n at p = 4. The node-local groups have one member: no traffic.
  EXPECT_NEAR(master / ring, 2.0 / 3.0, 0.01) << master << " vs " << ring;
}

struct Totals {
  double end = 0;
  double comm = 0;
  uint64_t bytes = 0;
};
Totals totals(const std::string& metrics) {
  Totals t;
  for (const EpochMetrics& e : parse_metrics_csv(metrics, "metrics.csv")) {
    t.end = std::max(t.end, e.end_s);
    t.comm += e.comm_s;
    t.bytes += e.bytes_sent;
  }
  return t;
}

// Cost-only DDP training: the steady-state fast-forward and the coarse fidelities predict what
// message fidelity (every message simulated) predicts, within 2%.
TEST(SimFidelity, FastForwardAndCoarseFidelitiesAgreeWithMessageFidelity) {
  // ddp synchronises every step (workers agree on the skip); epoch_sync decides per worker and
  // must not skip over block boundaries or the blocks' shorter last steps; streaming diloco's
  // fragments synchronise at staggered steps (the skip spans whole periods of H steps).
  for (const std::string strategy : {"ddp", "epoch_sync", "diloco"}) {
    std::vector<std::string> base = {
        "workers=8", "strategy.name=" + strategy, "sim.mode=cost_only",
        "sim.cost_only_train_samples=4000", "batch_size=32", "model.name=cnn",
        // each strategy's own knob: ddp's buckets, epoch_sync's ds-tensor blocks, diloco's H
        strategy == "ddp"          ? "strategy.bucket_mb=0.5"
        : strategy == "epoch_sync" ? "data.blocks=16"
                                   : "strategy.every=8"};
    if (strategy == "diloco") base.push_back("strategy.fragments=4");
    auto with = [&](std::vector<std::string> extra) {
      extra.insert(extra.begin(), base.begin(), base.end());
      return simulate(two_node_scenario(extra));
    };
    const SimRun exact = with({"sim.fidelity=message", "sim.fast_forward=false"});
    ASSERT_TRUE(exact.error.empty()) << exact.error;
    const Totals reference = totals(exact.metrics);
    EXPECT_GT(reference.end, 0.0);
    EXPECT_GT(reference.bytes, 0u);
    for (const std::string fidelity : {"message", "flow", "analytic"}) {
      const SimRun run = with({"sim.fidelity=" + fidelity, "sim.fast_forward=true"});
      ASSERT_TRUE(run.error.empty()) << run.error;
      const Totals t = totals(run.metrics);
      EXPECT_NEAR(t.end, reference.end, 0.02 * reference.end) << strategy << " " << fidelity;
      EXPECT_NEAR(t.comm, reference.comm, 0.02 * reference.comm + 1e-9)
          << strategy << " " << fidelity;
      EXPECT_EQ(t.bytes, reference.bytes) << strategy << " " << fidelity;
    }
    // Fast-forward alone (same fidelity) changes nothing but the work done.
    const SimRun fast = with({"sim.fidelity=message", "sim.fast_forward=true"});
    EXPECT_NEAR(totals(fast.metrics).end, reference.end, 1e-9 * reference.end) << strategy;
  }
}

}  // namespace
}  // namespace syncopate
