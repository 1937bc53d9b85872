#pragma once
// Training on the simulator in emulation, in a child process (SimGrid makes one engine per
// process), and serially in this one: what the strategy tests compare.
#include <sstream>
#include <string>
#include <vector>

#include "backends/sim/sim_backend.hpp"
#include "core/comm/local_backend.hpp"
#include "core/train/run_files.hpp"
#include "core/train/trainer.hpp"
#include "tests/common/serial_defaults.hpp"
#include "tests/sim/fork_util.hpp"

namespace syncopate::testing {

// The strategy tests' base: 768 synthetic samples (128 to test) of batch 16, 2 epochs at a
// constant lr of 0.02 on mn5-acc, no evaluation between epochs; then `sets`.
inline Scenario small_scenario(const std::vector<std::string>& sets) {
  std::vector<std::string> all = {"data.dataset=synthetic", "data.train_samples=768",
                                  "data.test_samples=128",  "epochs=2",
                                  "batch_size=16",          "schedule.lr=0.02",
                                  "schedule.kind=constant", "sim.platform=mn5-acc",
                                  "eval_every_epoch=false"};
  all.insert(all.end(), sets.begin(), sets.end());
  return parse_scenario(default_scenario_text(), "<test>", serial_defaults(all));
}

struct SimRun {
  std::string metrics;                     // metrics.csv text, every worker's rows
  std::vector<EpochMetrics> epochs;        // the same rows, parsed
  std::vector<std::vector<float>> params;  // per worker, after training
  std::vector<TraceEvent> syncs;           // the workers' "sync" trace events (merge, average, ...)
  std::string error;                       // why the child failed, if it did
};

namespace detail {

// What a child returns: the csv, then per worker its params, then the sync trace events.
inline std::string encode_run(const std::vector<WorkerReport>& reports) {
  std::ostringstream out;
  const std::string csv = metrics_csv(reports);
  out << csv.size() << ' ' << csv << reports.size() << ' ';
  for (const auto& r : reports) {
    out << r.final_params.size() << ' ';
    out.write(reinterpret_cast<const char*>(r.final_params.data()),
              static_cast<std::streamsize>(r.final_params.size() * sizeof(float)));
  }
  for (const auto& r : reports)
    for (const auto& t : r.trace)
      if (t.category == "sync") {
        out.precision(17);
        out << ' ' << t.name << ' ' << t.worker << ' ' << t.start_s << ' ' << t.duration_s;
      }
  return out.str();
}

inline SimRun decode_run(const std::string& text) {
  SimRun run;
  std::istringstream in(text);
  size_t length = 0, workers = 0;
  in >> length;
  in.get();
  run.metrics.resize(length);
  in.read(run.metrics.data(), static_cast<std::streamsize>(length));
  run.epochs = parse_metrics_csv(run.metrics, "metrics.csv");
  in >> workers;
  for (size_t w = 0; w < workers; ++w) {
    size_t n = 0;
    in >> n;
    in.get();
    std::vector<float> params(n);
    in.read(reinterpret_cast<char*>(params.data()),
            static_cast<std::streamsize>(n * sizeof(float)));
    run.params.push_back(std::move(params));
  }
  TraceEvent t;
  while (in >> t.name >> t.worker >> t.start_s >> t.duration_s) run.syncs.push_back(t);
  return run;
}

}  // namespace detail

// Every worker of `s` trained on the simulator (its platform, fidelity, slowdowns and mode).
inline SimRun simulate(const Scenario& s) {
  const ChildResult child = run_in_child_output([&] {
    sim::SimOptions options;
    options.platform = s.sim.platform;
    options.platform_overrides = s.sim.platform_params;
    options.workers = s.workers;
    options.fidelity = s.sim.fidelity;
    options.slowdown = s.sim.slowdown;
    options.cost_only = s.sim.mode == SimMode::kCostOnly;
    const TrainData data = prepare_data(s, options.cost_only);
    std::vector<WorkerReport> reports(static_cast<size_t>(s.workers));
    sim::run_simulation(options, [&](Communicator& comm, Executor& exec) {
      reports[static_cast<size_t>(comm.rank())] = train_worker(s, data, comm, exec);
    });
    return detail::encode_run(reports);
  });
  if (child.status != 0) {
    SimRun failed;
    failed.error = "child status " + std::to_string(child.status) + ": " + child.error;
    return failed;
  }
  return detail::decode_run(child.output);
}

// One worker of `s` trained here, on the in-process communicator and the wall clock.
inline WorkerReport serial(const Scenario& s) {
  const TrainData data = prepare_data(s, false);
  LocalCommunicator comm;
  WallClockExecutor exec;
  return train_worker(s, data, comm, exec);
}

}  // namespace syncopate::testing
