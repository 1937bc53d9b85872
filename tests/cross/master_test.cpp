// epoch_sync with strategy.aggregation = "master" on mn5-acc, through the binary: the averages
// run through the platform's master host on its 25 GbE link (every worker's model up, the sum
// on the master, the average down), at every fidelity, and each worker sends and receives its
// model once per average.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/run_command.hpp"

namespace master_test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct Averages {
  std::vector<double> seconds;  // worker 0's, from the trace
  double bytes_sent_per_worker_epoch = 0;
};

// The NFNet cost-only, epoch_sync on 8 workers (2 nodes) of mn5-acc.
Averages run(const std::string& aggregation, const std::string& fidelity) {
  const fs::path out = syncopate::scratch_folder("master") / (aggregation + "-" + fidelity);
  fs::remove_all(out);
  std::string log;
  EXPECT_EQ(syncopate::run_command(
                "cd " + std::string(SYNCOPATE_SOURCE_DIR) + " && " + SYNCOPATE_BIN +
                    " run scenarios/ci/epoch-sync-nfnet-16.toml --workers 8 --set data.blocks=16"
                    " --set strategy.aggregation=" +
                    aggregation + " --set sim.fidelity=" + fidelity +
                    " --set trace.steps=0 --quiet --out " + out.string(),
                &log),
            0)
      << log;
  Averages a;
  const json trace = json::parse(syncopate::read_text(out / "trace.json"));
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("pid") == 0 && e.at("name") == "average")
      a.seconds.push_back(e.at("dur").get<double>() / 1e6);
  const json summary = json::parse(syncopate::read_text(out / "summary.json"));
  a.bytes_sent_per_worker_epoch =
      summary.at("bytes_sent").get<double>() / (8.0 * summary.at("epochs").get<double>());
  return a;
}

TEST(MasterAggregation, AveragesCrossTheMastersEthernetLink) {
  const Averages analytic = run("master", "analytic");
  ASSERT_EQ(analytic.seconds.size(), 2u);  // one per epoch
  // 8 models of M bytes up the master's 25 GbE (3.125 GB/s), then 8 down: 2 x 8 M / B, plus
  // latencies and the master's sum (both well under 1% here).
  const double model_bytes = analytic.bytes_sent_per_worker_epoch;
  const double closed_form = 2 * 8 * model_bytes / 3.125e9;
  for (double s : analytic.seconds) {
    EXPECT_GE(s, closed_form);
    EXPECT_NEAR(s, closed_form, 0.01 * closed_form);
  }
  // Flows share the master's link fairly: the same time; messages run the same flows.
  for (const char* fidelity : {"flow", "message"}) {
    const Averages other = run("master", fidelity);
    ASSERT_EQ(other.seconds.size(), 2u) << fidelity;
    EXPECT_NEAR(other.seconds[0], analytic.seconds[0], 0.01 * analytic.seconds[0]) << fidelity;
    EXPECT_EQ(other.bytes_sent_per_worker_epoch, model_bytes) << fidelity;
  }
  // An allreduce over the NDR200 fabric and NVLink is more than ten times faster.
  const Averages allreduce = run("allreduce", "analytic");
  ASSERT_EQ(allreduce.seconds.size(), 2u);
  EXPECT_LT(allreduce.seconds[0], analytic.seconds[0] / 10);
}

}  // namespace
}  // namespace master_test
