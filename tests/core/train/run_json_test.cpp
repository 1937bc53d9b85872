// summary.json and trace.json: valid JSON with the documented schema (README, "The run
// directory"), absent figures as null.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/scenario/scenario.hpp"
#include "core/train/recorder.hpp"
#include "tests/common/serial_defaults.hpp"

namespace syncopate {
namespace {

WorkerReport one_worker() {
  WorkerReport r;
  EpochMetrics e;
  e.end_s = 2.5;
  e.compute_s = 2.0;
  e.comm_s = 0.5;
  e.bytes_sent = 1024;
  e.test_accuracy = 0.86;
  r.epochs = {e};
  r.trace = {{"epoch 0", "epoch", 0, 0.0, 2.5, TraceEvent::Kind::kSpan, 0, ""},
             {"average", "sync", 0, 2.0, 0.5, TraceEvent::Kind::kSpan, 0, ""},
             {"allreduce", "comm", 0, 2.0, 0.25, TraceEvent::Kind::kFlight, 400, "ring"},
             {"allreduce", "comm", 0, 2.1, 0.25, TraceEvent::Kind::kFlight, 100, ""}};
  r.final_test_accuracy = 0.86;
  return r;
}

TEST(RunJson, SummaryHasTheDocumentedFieldsAndTypes) {
  const Scenario s = parse_scenario(default_scenario_text(), "<test>", serial_defaults({}));
  RunInfo info;
  info.wall_seconds = 3.0;
  info.extra = {{"simulated_comms", 12}, {"simulated_seconds", 2.5}};
  const std::vector<WorkerReport> reports = {one_worker()};
  const auto j = nlohmann::json::parse(summary_json(s, summarize(s, reports, info), info));
  for (const char* key : {"name", "backend", "strategy", "platform"})
    EXPECT_TRUE(j.at(key).is_string()) << key;
  for (const char* key : {"workers", "epochs", "seed", "parameters", "bytes_sent", "bytes_recv"})
    EXPECT_TRUE(j.at(key).is_number_integer()) << key;
  EXPECT_EQ(j["parameters"].get<int64_t>(), 235146);  // the mlp: 784*256+256 + 256*128+128 + 1290
  for (const char* key : {"total_time_s", "compute_time_s", "comm_time_s", "idle_time_s",
                          "wall_seconds", "final_test_accuracy"})
    EXPECT_TRUE(j.at(key).is_number()) << key;
  EXPECT_DOUBLE_EQ(j["total_time_s"].get<double>(), 2.5);
  EXPECT_EQ(j["bytes_sent"].get<uint64_t>(), 1024u);
  EXPECT_DOUBLE_EQ(j["time_to_accuracy"]["0.85"].get<double>(), 2.5);  // reached at epoch 0
  EXPECT_TRUE(j["time_to_accuracy"]["0.9"].is_null());                 // never reached
  EXPECT_TRUE(j["backend_stats"]["simulated_comms"].is_number_integer());
  EXPECT_TRUE(j["scenario"].is_object());
  EXPECT_EQ(j["scenario"]["strategy"]["name"], "serial");
}

TEST(RunJson, AbsentAccuracyIsNull) {
  const Scenario s = parse_scenario(default_scenario_text(), "<test>", serial_defaults({}));
  WorkerReport r = one_worker();
  r.final_test_accuracy = -1;  // cost-only: nothing evaluated
  r.epochs[0].test_accuracy = -1;
  const auto j = nlohmann::json::parse(summary_json(s, summarize(s, {r}, {}), {}));
  EXPECT_TRUE(j.at("final_test_accuracy").is_null());
  EXPECT_TRUE(j["time_to_accuracy"]["0.8"].is_null());
}

TEST(RunJson, TraceIsChromeTraceEventsInMicroseconds) {
  const auto j = nlohmann::json::parse(trace_json({one_worker()}));
  const auto& events = j.at("traceEvents");
  // process and thread names, two spans, two flights (begin, end), four counter values
  ASSERT_EQ(events.size(), 2u + 2u + 4u + 4u);
  EXPECT_EQ(events[0]["ph"], "M");
  EXPECT_EQ(events[0]["args"]["name"], "worker 0");
  EXPECT_EQ(events[3]["name"], "average");
  EXPECT_EQ(events[3]["ph"], "X");
  EXPECT_EQ(events[3]["pid"], 0);
  EXPECT_DOUBLE_EQ(events[3]["ts"].get<double>(), 2.0e6);
  EXPECT_DOUBLE_EQ(events[3]["dur"].get<double>(), 0.5e6);
  EXPECT_EQ(events[4]["ph"], "b");
  EXPECT_EQ(events[4]["args"]["bytes"], 400);
  EXPECT_EQ(events[4]["args"]["algorithm"], "ring");
  EXPECT_EQ(events[5]["ph"], "e");
  EXPECT_EQ(events[5]["id"], events[4]["id"]);
  EXPECT_DOUBLE_EQ(events[5]["ts"].get<double>(), 2.25e6);
  EXPECT_FALSE(events[6]["args"].contains("algorithm"));
  // bytes in flight: 400 from 2.0 s, 500 from 2.1 s, 100 from 2.25 s, 0 from 2.35 s
  std::vector<int64_t> counter;
  for (size_t i = 8; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["ph"], "C");
    counter.push_back(events[i]["args"]["bytes"].get<int64_t>());
  }
  EXPECT_EQ(counter, (std::vector<int64_t>{400, 500, 100, 0}));
}

}  // namespace
}  // namespace syncopate
