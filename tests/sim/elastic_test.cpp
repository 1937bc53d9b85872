// Elastic epoch_sync and epoch_async on the simulator: a worker lost to a host failure (or to a
// failure of its NIC) leaves the job, and the survivors average among themselves and go on.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "backends/sim/sim_backend.hpp"
#include "core/train/trainer.hpp"
#include "tests/common/serial_defaults.hpp"
#include "tests/sim/sim_test_util.hpp"

namespace syncopate::sim {
namespace {

using testing::decode;
using testing::encode;
using testing::run_in_child;

SimFault host_failure(int worker, double at) {
  SimFault f;
  f.kind = FaultKind::kHostFailure;
  f.worker = worker;
  f.at_s = at;
  f.where = "f.toml:3";
  return f;
}

SimFault nic_failure(int worker, double from, double until) {
  SimFault f;
  f.kind = FaultKind::kLinkFailure;
  f.worker = worker;
  f.from_s = from;
  f.until_s = until;
  f.where = "f.toml:5";
  return f;
}

// 4 workers, one per node (each with its NIC); worker w holds w + 1 everywhere and computes
// `compute_s[w]` seconds before one averaging allreduce and a barrier. Returns, per worker, the
// first value of its buffer and its communicator's size afterwards (the lost one: -1, -1), then
// each loss's worker and date.
std::vector<double> average_after(Fidelity fidelity, const std::vector<double>& compute_s,
                                  const SimFault& fault) {
  const testing::ChildResult result = run_in_child([&] {
    const Platform platform =
        testing::make_test_platform({.gpus = 4, .gpus_per_node = 1, .gemm_flops = 1e12});
    SimOptions options;
    options.workers = 4;
    options.fidelity = fidelity;
    options.faults = {fault};
    options.elastic = true;
    std::vector<double> out(8, -1);
    const SimStats stats =
        run_on_platform(platform, options, [&](Communicator& comm, Executor& exec) {
          const int worker = comm.rank();
          exec.compute({.flops = 1e12 * compute_s[static_cast<size_t>(worker)]}, [] {});
          std::vector<float> data(1000, static_cast<float>(worker + 1));
          comm.allreduce(data, {.op = ReduceOp::kAvg, .algorithm = Algorithm::kRing});
          comm.barrier();
          out[static_cast<size_t>(2 * worker)] = data[0];
          out[static_cast<size_t>(2 * worker + 1)] = comm.size();
        });
    for (const WorkerLoss& loss : stats.losses) {
      out.push_back(loss.worker);
      out.push_back(loss.at_s);
    }
    return encode(out);
  });
  return decode(result.output);
}

TEST(SimElastic, SurvivorsAverageOverTheLiveReplicas) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow, Fidelity::kAnalytic}) {
    // Worker 2 dies at 1 s while computing; the others reach the average at 2 s.
    const std::vector<double> out = average_after(fidelity, {2, 2, 5, 2}, host_failure(2, 1.0));
    ASSERT_EQ(out.size(), 10u) << to_string(fidelity);
    const double mean = (1.0 + 2.0 + 4.0) / 3.0;
    for (int w : {0, 1, 3}) {
      EXPECT_FLOAT_EQ(out[static_cast<size_t>(2 * w)], mean) << to_string(fidelity) << " " << w;
      EXPECT_EQ(out[static_cast<size_t>(2 * w + 1)], 3) << "the survivors' communicator";
    }
    EXPECT_EQ(out[4], -1) << "the lost worker never returns";
    EXPECT_EQ(out[8], 2);
    EXPECT_DOUBLE_EQ(out[9], 1.0) << "lost at the failure's date";
  }
}

// At message fidelity worker 0's helper actor is inside the ring's steps (waiting for worker 3,
// which waits for worker 2): the loss stops every member's part, and the survivors all retry
// from their input.
TEST(SimElastic, ASurvivorWaitingInTheCollectiveRetriesOnTheLiveMembers) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow}) {
    // Worker 0 waits in the allreduce from 0.5 s when worker 1's host fails at 1 s.
    const std::vector<double> out = average_after(fidelity, {0.5, 5, 2, 2}, host_failure(1, 1.0));
    ASSERT_EQ(out.size(), 10u) << to_string(fidelity);
    const double mean = (1.0 + 3.0 + 4.0) / 3.0;
    for (int w : {0, 2, 3})
      EXPECT_FLOAT_EQ(out[static_cast<size_t>(2 * w)], mean) << to_string(fidelity) << " " << w;
    EXPECT_EQ(out[2], -1);
  }
}

// Every worker enters the ring at 0.5 s; its 6 rounds take about 2.1 us each (2 us of route
// latency, 1,000 B at 10 GB/s), and worker 1 fails 7 us in, after the reduce-scatter: the
// survivors hold partial sums with worker 1's segments in them. At message fidelity they retry
// from their input, so the average is still the live replicas'.
TEST(SimElastic, MembersInsideTheStepsRetryFromTheirInput) {
  const std::vector<double> out =
      average_after(Fidelity::kMessage, {0.5, 0.5, 0.5, 0.5}, host_failure(1, 0.500007));
  ASSERT_EQ(out.size(), 10u);
  const double mean = (1.0 + 3.0 + 4.0) / 3.0;
  for (int w : {0, 2, 3}) EXPECT_FLOAT_EQ(out[static_cast<size_t>(2 * w)], mean) << w;
  EXPECT_EQ(out[2], -1);
  EXPECT_EQ(out[8], 1);
}

TEST(SimElastic, AFailedNicCutsTheWorkerOff) {
  for (Fidelity fidelity : {Fidelity::kMessage, Fidelity::kFlow}) {
    const std::vector<double> out =
        average_after(fidelity, {2, 2, 2, 5}, nic_failure(3, 1.0, 100.0));
    ASSERT_EQ(out.size(), 10u) << to_string(fidelity);
    const double mean = (1.0 + 2.0 + 3.0) / 3.0;
    for (int w : {0, 1, 2})
      EXPECT_FLOAT_EQ(out[static_cast<size_t>(2 * w)], mean) << to_string(fidelity) << " " << w;
    EXPECT_EQ(out[6], -1);
    EXPECT_EQ(out[8], 3);
    EXPECT_DOUBLE_EQ(out[9], 1.0);
  }
}

// The trainer on simulated GPUs of one mn5-acc node, 12 blocks of 128 samples, 3 epochs.
// (sim.fault_blocks is set here: the scenario has no [[sim.faults]], the test passes them.)
Scenario scenario(const std::string& strategy, int workers, FaultBlocks blocks) {
  Scenario s = parse_scenario(
      default_scenario_text(), "<test>",
      serial_defaults(
          {"backend=sim", "workers=" + std::to_string(workers), "strategy.name=" + strategy,
           "data.dataset=synthetic", "data.train_samples=1536", "data.test_samples=64",
           "data.blocks=12", "epochs=3", "batch_size=16", "sim.platform=mn5-acc",
           "sim.platform_params.nodes=1", "sim.fidelity=flow", "eval_every_epoch=false"}));
  s.sim.fault_blocks = blocks;
  return s;
}

struct WorkerRun {
  int epochs = 0;
  uint64_t steps = 0;
  std::vector<double> start_s, end_s, bytes_sent;  // per epoch
  std::vector<float> params;                       // final (empty: lost)
};

struct ElasticRun {
  std::vector<WorkerRun> workers;
  std::vector<WorkerLoss> losses;
  std::string text;  // everything, for the determinism check
};

std::string describe(const WorkerReport& r) {
  std::ostringstream out;
  out.precision(17);
  out << r.epochs.size() << ' ' << r.steps;
  for (const EpochMetrics& e : r.epochs)
    out << ' ' << e.start_s << ' ' << e.end_s << ' ' << e.bytes_sent;
  out << " ;";
  for (float v : r.final_params) out << ' ' << v;
  return out.str();
}

WorkerRun parse_worker(const std::string& line) {
  std::istringstream in(line);
  WorkerRun w;
  in >> w.epochs >> w.steps;
  for (int e = 0; e < w.epochs; ++e) {
    double start = 0, end = 0, bytes = 0;
    in >> start >> end >> bytes;
    w.start_s.push_back(start);
    w.end_s.push_back(end);
    w.bytes_sent.push_back(bytes);
  }
  std::string separator;
  in >> separator;
  for (float v; in >> v;) w.params.push_back(v);
  return w;
}

// Runs s through the trainer in a child (elastic as `syncopate run` makes it with faults); its
// output has one line per worker (describe), then "loss worker at_s kind" per loss.
ElasticRun train(const Scenario& s, const std::vector<SimFault>& faults) {
  const testing::ChildResult child = run_in_child([&] {
    SimOptions options;
    options.platform = s.sim.platform;
    options.platform_overrides = s.sim.platform_params;
    options.workers = s.workers;
    options.fidelity = s.sim.fidelity;
    options.faults = faults;
    options.elastic = !faults.empty();
    const TrainData data = prepare_data(s, false);
    std::vector<WorkerReport> reports(static_cast<size_t>(s.workers));
    const SimStats stats = run_simulation(options, [&](Communicator& comm, Executor& exec) {
      WorkerReport& report = reports[static_cast<size_t>(comm.rank())];
      report = train_worker(s, data, comm, exec, {}, {}, {}, &report);
    });
    std::ostringstream out;
    out.precision(17);
    for (const WorkerReport& r : reports) out << describe(r) << '\n';
    for (const WorkerLoss& loss : stats.losses)
      out << "loss " << loss.worker << ' ' << loss.at_s << ' ' << loss.kind << '\n';
    return out.str();
  });
  ElasticRun run;
  run.text = child.output;
  std::istringstream lines(child.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("loss ", 0) != 0) {
      run.workers.push_back(parse_worker(line));
      continue;
    }
    std::istringstream in(line);
    WorkerLoss loss;
    std::string word;
    in >> word >> loss.worker >> loss.at_s >> loss.kind;
    run.losses.push_back(loss);
  }
  return run;
}

class ElasticStrategies : public ::testing::TestWithParam<const char*> {};

// Worker 2's host fails in the middle of epoch 1: its metrics end with epoch 0, the survivors
// finish the 3 epochs and agree; from the first average after the failure on, they send what 3
// workers send; "redeal" deals its 3 blocks among them from epoch 2 on (12 blocks of 8 steps:
// 4 each), "drop" leaves them out.
TEST_P(ElasticStrategies, SurvivorsFinishAgreeAndShareTheDeadWorkersBlocks) {
  const ElasticRun clean = train(scenario(GetParam(), 4, FaultBlocks::kRedeal), {});
  const ElasticRun three = train(scenario(GetParam(), 3, FaultBlocks::kRedeal), {});
  ASSERT_EQ(clean.workers.size(), 4u) << clean.text;
  ASSERT_EQ(three.workers.size(), 3u) << three.text;
  const WorkerRun& before = clean.workers[2];
  ASSERT_EQ(before.epochs, 3) << clean.text;
  const double at = (before.start_s[1] + before.end_s[1]) / 2;
  const ElasticRun redeal =
      train(scenario(GetParam(), 4, FaultBlocks::kRedeal), {host_failure(2, at)});
  const ElasticRun drop = train(scenario(GetParam(), 4, FaultBlocks::kDrop), {host_failure(2, at)});
  for (const ElasticRun* run : {&redeal, &drop}) {
    ASSERT_EQ(run->workers.size(), 4u) << run->text;
    ASSERT_EQ(run->losses.size(), 1u) << run->text;
    EXPECT_EQ(run->losses[0].worker, 2);
    EXPECT_DOUBLE_EQ(run->losses[0].at_s, at);
    EXPECT_EQ(run->losses[0].kind, "host_failure");
    EXPECT_EQ(run->workers[2].epochs, 1) << "the lost worker's metrics end at its failure";
    EXPECT_LT(run->workers[2].end_s[0], at);
    EXPECT_TRUE(run->workers[2].params.empty());
    for (int w : {0, 1, 3}) {
      const WorkerRun& survivor = run->workers[static_cast<size_t>(w)];
      ASSERT_EQ(survivor.epochs, 3) << run->text;
      EXPECT_EQ(survivor.params, run->workers[0].params) << "the survivors agree: worker " << w;
      EXPECT_EQ(survivor.bytes_sent[0], clean.workers[static_cast<size_t>(w)].bytes_sent[0]);
      EXPECT_EQ(survivor.bytes_sent[2], three.workers[0].bytes_sent[2]) << "3 workers' figure";
    }
    EXPECT_FALSE(run->workers[0].params.empty());
    EXPECT_NE(run->workers[0].params, clean.workers[0].params);
  }
  if (std::string(GetParam()) == "epoch_sync") {  // the average that followed the failure
    EXPECT_EQ(redeal.workers[0].bytes_sent[1], three.workers[0].bytes_sent[1]);
  }
  uint64_t redealt = 0, dropped = 0;
  for (int w : {0, 1, 3}) {
    redealt += redeal.workers[static_cast<size_t>(w)].steps;
    dropped += drop.workers[static_cast<size_t>(w)].steps;
    EXPECT_EQ(clean.workers[static_cast<size_t>(w)].steps, 3u * 24u);
  }
  EXPECT_EQ(redealt, 2u * 3u * 24u + 4u * 24u) << "epoch 2 keeps the 96 steps of 4 workers";
  EXPECT_EQ(dropped, 3u * 3u * 24u) << "epoch 2 loses worker 2's 24 steps";
  EXPECT_EQ(train(scenario(GetParam(), 4, FaultBlocks::kRedeal), {host_failure(2, at)}).text,
            redeal.text)
      << "same scenario, same results";
}

TEST_P(ElasticStrategies, AFaultAfterTheEndChangesNothing) {
  const ElasticRun clean = train(scenario(GetParam(), 4, FaultBlocks::kRedeal), {});
  const ElasticRun late =
      train(scenario(GetParam(), 4, FaultBlocks::kRedeal), {host_failure(2, 1e9)});
  EXPECT_EQ(late.text, clean.text);
}

INSTANTIATE_TEST_SUITE_P(Sim, ElasticStrategies, ::testing::Values("epoch_sync", "epoch_async"));

// At message fidelity too the survivors go on: worker 2 fails in the middle of epoch 1.
// epoch_sync's arithmetic does not depend on the fidelity (the same schedules, the same losses at
// the same epoch), so its survivors end with the flow-fidelity run's model bit for bit;
// epoch_async's merges follow the arrival order, which does, so there the survivors agree.
TEST(ElasticAtMessageFidelity, SurvivorsFinishAsAtFlowFidelity) {
  for (const std::string strategy : {"epoch_sync", "epoch_async"}) {
    SCOPED_TRACE(strategy);
    Scenario flow = scenario(strategy, 4, FaultBlocks::kRedeal);
    Scenario message = flow;
    message.sim.fidelity = Fidelity::kMessage;
    const ElasticRun clean = train(message, {});
    ASSERT_EQ(clean.workers.size(), 4u) << clean.text;
    const WorkerRun& before = clean.workers[2];
    ASSERT_EQ(before.epochs, 3) << clean.text;
    const double at = (before.start_s[1] + before.end_s[1]) / 2;
    const ElasticRun lost = train(message, {host_failure(2, at)});
    ASSERT_EQ(lost.workers.size(), 4u) << lost.text;
    ASSERT_EQ(lost.losses.size(), 1u) << lost.text;
    EXPECT_EQ(lost.workers[2].epochs, 1) << lost.text;
    for (int w : {0, 1, 3}) {
      const WorkerRun& survivor = lost.workers[static_cast<size_t>(w)];
      ASSERT_EQ(survivor.epochs, 3) << lost.text;
      EXPECT_EQ(survivor.params, lost.workers[0].params) << "worker " << w;
    }
    EXPECT_NE(lost.workers[0].params, clean.workers[0].params);
    if (strategy == "epoch_sync") {
      EXPECT_EQ(lost.workers[0].params, train(flow, {host_failure(2, at)}).workers[0].params);
    }
    EXPECT_EQ(train(message, {host_failure(2, at)}).text, lost.text) << "same scenario, same run";
  }
}

}  // namespace
}  // namespace syncopate::sim
