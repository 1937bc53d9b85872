#pragma once
// A run of the syncopate binary and what it wrote (metrics.csv's rows, model.bin's floats), and
// the bit-for-bit comparison of two such runs.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/train/run_files.hpp"
#include "tests/common/run_command.hpp"

namespace syncopate::testing {

struct RunResult {
  std::vector<EpochMetrics> rows;
  std::vector<float> model;
};

// `launcher syncopate run SOURCE/scenario --out <scratch folder `scratch`>/tag args`; the run
// must succeed. What it did not write stays empty.
inline RunResult run_binary(const std::string& scratch, const std::string& tag,
                            const std::string& args, const std::string& launcher = "",
                            const std::string& scenario = "/tests/cross/small.toml") {
  const std::filesystem::path out = scratch_folder(scratch) / tag;
  std::string log;
  const std::string cmd = launcher + " " + SYNCOPATE_BIN + " run " + SYNCOPATE_SOURCE_DIR +
                          scenario + " --out " + out.string() + " " + args;
  EXPECT_EQ(run_command(cmd, &log), 0) << cmd << "\n" << log;
  RunResult r;
  if (!std::filesystem::exists(out / "metrics.csv")) return r;
  r.rows = read_metrics_csv((out / "metrics.csv").string());
  if (!std::filesystem::exists(out / "model.bin")) return r;  // cost-only runs write none
  const std::string bytes = read_text(out / "model.bin");
  r.model.resize(bytes.size() / sizeof(float));
  std::memcpy(r.model.data(), bytes.data(), r.model.size() * sizeof(float));
  return r;
}

// Same losses, same bytes per worker and epoch, same final weights, bit for bit.
inline void expect_same(const RunResult& a, const RunResult& b, const std::string& what) {
  ASSERT_FALSE(a.rows.empty()) << what;
  ASSERT_EQ(a.rows.size(), b.rows.size()) << what;
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].train_loss, b.rows[i].train_loss) << what << " row " << i;
    EXPECT_EQ(a.rows[i].bytes_sent, b.rows[i].bytes_sent) << what << " row " << i;
  }
  ASSERT_EQ(a.model.size(), b.model.size()) << what;
  EXPECT_EQ(std::memcmp(a.model.data(), b.model.data(), a.model.size() * sizeof(float)), 0) << what;
}

}  // namespace syncopate::testing
