// analysis/validation/validate.sh end to end, reduced: every pair simulated, measured under
// mpirun and compared, and validation.md written with its rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/common/run_command.hpp"

namespace {
namespace fs = std::filesystem;

const std::string kBin = SYNCOPATE_BIN;

fs::path scratch() { return syncopate::scratch_folder("validation"); }

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// 2,048 samples, one epoch, serial and epoch_sync at 1 and 2 workers (serial at 1 only), each
// measured twice, on the committed loopback platform. No error target is asserted: the errors
// are timings of a shared machine, which validation.md states against the targets.
TEST(Validation, ScriptComparesEveryPairAndWritesTheTable) {
  const fs::path runs = scratch() / "runs";
  const fs::path md = scratch() / "validation.md";
  std::string log;
  ASSERT_EQ(syncopate::run_command(std::string(SYNCOPATE_SOURCE_DIR) +
                                       "/analysis/validation/validate.sh --epochs 1 --workers "
                                       "'1 2' --strategies 'serial epoch_sync' --measured-runs 2 "
                                       "--platform loopback --set data.train_samples=2048 --bin " +
                                       kBin + " --out " + runs.string() + " --md " + md.string(),
                                   &log),
            0)
      << log;
  const std::string text = syncopate::read_text(md);
  for (const char* row :
       {"| serial | 1 | 1 | ", "| epoch_sync | 1 | 1 | ", "| epoch_sync | 2 | 1 | "})
    EXPECT_EQ(count_of(text, row), 1u) << row << "\n" << text;
  EXPECT_EQ(count_of(text, "| serial | 2 |"), 0u) << text;
  EXPECT_EQ(count_of(text, ", 2 runs) |"), 3u) << text;  // each pair's two measured runs
  EXPECT_EQ(count_of(text, "| yes |"), 3u) << text;      // bytes equal in every pair
  EXPECT_NE(text.find("- per pair (whole run): median "), std::string::npos) << text;
  EXPECT_NE(text.find("settings: --set data.train_samples=2048 --epochs 1"), std::string::npos)
      << text;
  EXPECT_TRUE(fs::exists(runs / "compare" / "epoch_sync-w2-m2"));
}

}  // namespace
