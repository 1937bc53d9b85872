// metrics.csv read back as written, and a WorkerReport through its text form and back.
#include "core/train/run_files.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/base/check.hpp"
#include "tests/common/scratch.hpp"

namespace syncopate {
namespace {

EpochMetrics row(int worker, int epoch, double scale) {
  EpochMetrics e;
  e.worker = worker;
  e.epoch = epoch;
  e.start_s = 0.1 * scale;
  e.end_s = 1.0 / 3.0 * scale;  // no short decimal form: exercises the round trip
  e.compute_s = 0.2 * scale;
  e.comm_s = std::nextafter(0.05, 1.0) * scale;
  e.idle_s = 0;
  e.bytes_sent = (uint64_t{1} << 40) + static_cast<uint64_t>(worker);
  e.bytes_recv = 12345;
  e.train_loss = 2.302585092994046 * scale;
  e.train_accuracy = 0.125;
  e.test_accuracy = epoch == 0 ? -1 : 0.875;  // -1: not evaluated (an empty cell)
  e.lr = 1e-3;
  if (worker == 1 && epoch > 0) e.test_errors = {1.0 / 3.0, 0.5, -0.25, 0.875};  // regression
  return e;
}

void expect_same(const EpochMetrics& a, const EpochMetrics& b) {
  EXPECT_EQ(a.worker, b.worker);
  EXPECT_EQ(a.epoch, b.epoch);
  for (auto field :
       {&EpochMetrics::start_s, &EpochMetrics::end_s, &EpochMetrics::compute_s,
        &EpochMetrics::comm_s, &EpochMetrics::idle_s, &EpochMetrics::train_loss,
        &EpochMetrics::train_accuracy, &EpochMetrics::test_accuracy, &EpochMetrics::lr}) {
    EXPECT_EQ(a.*field, b.*field);
  }
  EXPECT_EQ(a.bytes_sent, b.bytes_sent);
  EXPECT_EQ(a.bytes_recv, b.bytes_recv);
  for (auto field : {&RegressionMetrics::mse, &RegressionMetrics::mae, &RegressionMetrics::r2,
                     &RegressionMetrics::pearson}) {
    EXPECT_EQ(std::isnan(a.test_errors.*field), std::isnan(b.test_errors.*field));
    if (!std::isnan(a.test_errors.*field)) {
      EXPECT_EQ(a.test_errors.*field, b.test_errors.*field);
    }
  }
}

std::vector<WorkerReport> two_worker_reports() {
  std::vector<WorkerReport> reports(2);
  for (int w = 0; w < 2; ++w) {
    reports[w].worker = w;
    for (int epoch = 0; epoch < 3; ++epoch) reports[w].epochs.push_back(row(w, epoch, w + 1.5));
  }
  return reports;
}

TEST(RunFiles, MetricsCsvReadsBackExactlyWhatWasWritten) {
  const std::vector<WorkerReport> reports = two_worker_reports();
  const std::vector<EpochMetrics> rows = parse_metrics_csv(metrics_csv(reports), "test");
  ASSERT_EQ(rows.size(), 6u);
  // metrics_csv orders by epoch, then worker.
  for (size_t i = 0; i < rows.size(); ++i) {
    expect_same(rows[i], reports[i % 2].epochs[i / 2]);
  }
}

TEST(RunFiles, ReadMetricsCsvFromAFileAndRejectsMalformedOnes) {
  const auto path = scratch_folder("metrics") / "metrics.csv";
  std::ofstream(path) << metrics_csv(two_worker_reports());
  EXPECT_EQ(read_metrics_csv(path.string()).size(), 6u);
  std::filesystem::remove(path);
  EXPECT_THROW(read_metrics_csv(path.string()), UserError);  // gone
  const std::string header = metrics_csv({});
  EXPECT_TRUE(parse_metrics_csv(header, "empty").empty());
  EXPECT_THROW(parse_metrics_csv("worker,epoch\n", "short header"), UserError);
  try {
    parse_metrics_csv(header + "0,0,0,1,0,0,0,x,0,1,0,,0.1,0,,,,\n", "bad.csv");
    FAIL() << "a non-number was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:2: bytes_sent"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_metrics_csv(header + "0,0,0,1\n", "cells"), UserError);
}

TEST(RunFiles, RegressionColumnsComeLastEmptyForClassificationAndOldFilesStillRead) {
  const std::string text = metrics_csv(two_worker_reports());
  const std::string header = text.substr(0, text.find('\n'));
  const std::string old_header = header.substr(0, header.find(",test_mse"));
  EXPECT_EQ(header, old_header + ",test_mse,test_mae,test_r2,test_pearson");
  EXPECT_TRUE(old_header.ends_with(",comm_total_s"));
  // Worker 0 (classification-like rows): four empty cells; worker 1 from epoch 1: the errors.
  const std::vector<EpochMetrics> rows = parse_metrics_csv(text, "test");
  EXPECT_TRUE(std::isnan(rows[0].test_errors.r2));
  EXPECT_EQ(rows[3].test_errors.mse, 1.0 / 3.0);
  EXPECT_EQ(rows[3].test_errors.r2, -0.25);
  EXPECT_NE(text.find(",0,,,,\n"), std::string::npos);
  // A metrics.csv of before the regression columns.
  const std::vector<EpochMetrics> old =
      parse_metrics_csv(old_header + "\n0,0,0,1,0,0,0,5,0,1,0,,0.1,0\n", "old.csv");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].bytes_sent, 5u);
  EXPECT_TRUE(std::isnan(old[0].test_errors.mse));
  EXPECT_THROW(parse_metrics_csv(header + "\n0,0,0,1,0,0,0,5,0,1,0,,0.1,0\n", "x"), UserError);
}

TEST(RunFiles, ReportRoundTripsThroughItsTextForm) {
  WorkerReport r = two_worker_reports()[1];
  r.final_test_accuracy = 0.8765432109876543;
  r.final_test_loss = std::numeric_limits<double>::min();
  r.steps = 938;
  r.resident_param_bytes = 940'584;
  r.resident_grad_bytes = 524'288;
  r.final_test_errors = {2.5, 1.0 / 7.0, std::numeric_limits<double>::quiet_NaN(), 0.75};
  r.trace.push_back({"epoch 0", "epoch", 1, 0.0, 1.0 / 7.0, TraceEvent::Kind::kSpan, 0, ""});
  r.trace.push_back({"merge into global", "sync", 1, 2.5, 1e-9, TraceEvent::Kind::kSpan, 0, ""});
  r.trace.push_back(
      {"allreduce", "comm", 1, 0.5, 0.25, TraceEvent::Kind::kFlight, 1u << 20, "ring"});
  r.final_params = {1.0f, 2.0f};  // not carried
  const WorkerReport back = deserialize_report(serialize_report(r));
  EXPECT_EQ(back.worker, r.worker);
  EXPECT_EQ(back.final_test_accuracy, r.final_test_accuracy);
  EXPECT_EQ(back.final_test_loss, r.final_test_loss);
  EXPECT_EQ(back.steps, r.steps);
  EXPECT_EQ(back.resident_param_bytes, 940'584u);
  EXPECT_EQ(back.resident_grad_bytes, 524'288u);
  EXPECT_EQ(back.final_test_errors.mse, 2.5);
  EXPECT_EQ(back.final_test_errors.mae, 1.0 / 7.0);
  EXPECT_TRUE(std::isnan(back.final_test_errors.r2));
  EXPECT_EQ(back.final_test_errors.pearson, 0.75);
  ASSERT_EQ(back.epochs.size(), r.epochs.size());
  for (size_t i = 0; i < r.epochs.size(); ++i) expect_same(back.epochs[i], r.epochs[i]);
  ASSERT_EQ(back.trace.size(), r.trace.size());
  for (size_t i = 0; i < r.trace.size(); ++i) {
    EXPECT_EQ(back.trace[i].name, r.trace[i].name);
    EXPECT_EQ(back.trace[i].category, r.trace[i].category);
    EXPECT_EQ(back.trace[i].worker, r.trace[i].worker);
    EXPECT_EQ(back.trace[i].start_s, r.trace[i].start_s);
    EXPECT_EQ(back.trace[i].duration_s, r.trace[i].duration_s);
    EXPECT_EQ(back.trace[i].kind, r.trace[i].kind);
    EXPECT_EQ(back.trace[i].bytes, r.trace[i].bytes);
    EXPECT_EQ(back.trace[i].algorithm, r.trace[i].algorithm);
  }
  EXPECT_TRUE(back.final_params.empty());
  // A checkpoint's report of before the measured residency: none measured.
  std::string earlier = serialize_report(r);
  earlier.erase(earlier.find("M 940584\n"), 9);
  earlier.erase(earlier.find("G 524288\n"), 9);
  EXPECT_EQ(deserialize_report(earlier).resident_param_bytes, 0u);
  EXPECT_EQ(deserialize_report(earlier).resident_grad_bytes, 0u);
  EXPECT_EQ(deserialize_report(earlier).steps, 938u);
  EXPECT_THROW(deserialize_report("X 1 2 3\n"), InternalError);
  EXPECT_THROW(deserialize_report("E 0 zero\n"), InternalError);
}

}  // namespace
}  // namespace syncopate
