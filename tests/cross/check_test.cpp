// `syncopate check`, driven through the binary: the shipped CI scenarios pass at their baseline,
// an injected regression fails and is named, --update accepts it, and a file that is not a
// baseline is refused naming the file and line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/run_command.hpp"

namespace check_test {
namespace {
namespace fs = std::filesystem;

const std::string kBin = SYNCOPATE_BIN;
const std::string kSource = SYNCOPATE_SOURCE_DIR;
const std::string kDdp = "scenarios/ci/ddp-resnet50-64.toml";

fs::path scratch() { return syncopate::scratch_folder("check-test"); }

// Runs `syncopate check ARGS` from the source tree; returns the exit code and the output.
int check(const std::string& args, std::string* output) {
  return syncopate::run_command("cd " + kSource + " && " + kBin + " check " + args, output);
}

std::string copy_of_shipped_baseline() {
  const fs::path copy = scratch() / "baseline.toml";
  fs::copy_file(kSource + "/scenarios/ci/baseline/comm-costs.toml", copy,
                fs::copy_options::overwrite_existing);
  return copy.string();
}

TEST(Check, ShippedCiScenariosPassAtTheirBaseline) {
  std::string out;
  EXPECT_EQ(check("scenarios/ci/*.toml --baseline scenarios/ci/baseline/comm-costs.toml", &out), 0)
      << out;
  EXPECT_NE(out.find("no figure moved beyond the tolerance"), std::string::npos) << out;
  EXPECT_EQ(out.find("REGRESSION"), std::string::npos) << out;
}

TEST(Check, InjectedRegressionFailsNamesItAndUpdateAcceptsIt) {
  const std::string baseline = copy_of_shipped_baseline();
  std::string out;
  // NDR200 NICs at a fifth of their bandwidth: every cross-node allreduce takes longer.
  const std::string worse =
      kDdp + " --baseline " + baseline + " --set sim.platform_params.nic.bandwidth=5GBps";
  ASSERT_EQ(check(worse, &out), 1) << out;
  for (const char* figure :
       {"epoch time (s)", "exposed comm per worker-epoch (s)", "total comm per worker-epoch (s)"}) {
    const size_t line = out.find(figure);
    ASSERT_NE(line, std::string::npos) << figure << "\n" << out;
    EXPECT_NE(out.substr(line, out.find('\n', line) - line).find("REGRESSION"), std::string::npos)
        << figure << "\n"
        << out;
  }
  EXPECT_NE(out.find("regressed"), std::string::npos) << out;
  ASSERT_EQ(check(worse + " --update", &out), 0) << out;
  EXPECT_EQ(check(worse, &out), 0) << out;
  // Back to the real NICs is now an improvement: it passes and suggests --update.
  EXPECT_EQ(check(kDdp + " --baseline " + baseline, &out), 0) << out;
  EXPECT_NE(out.find("improved: accept them with --update"), std::string::npos) << out;
}

// Buckets of 100 MiB: the whole gradient waits for the end of backward, nothing overlaps. The
// exposed communication regresses; the total falls (one allreduce in flight instead of a
// train of buckets spread over backward), so the two figures tell overlap from volume.
TEST(Check, OneBigBucketExposesCommunicationButShortensItsTotal) {
  std::string out;
  EXPECT_EQ(check(kDdp + " --baseline scenarios/ci/baseline/comm-costs.toml" +
                      " --set strategy.bucket_mb=100",
                  &out),
            1)
      << out;
  const auto line_of = [&](const std::string& figure) {
    const size_t at = out.find(figure);
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_NE(line_of("exposed comm").find("REGRESSION"), std::string::npos) << out;
  EXPECT_NE(line_of("total comm").find("improved"), std::string::npos) << out;
  EXPECT_EQ(line_of("bytes sent").find("REGRESSION"), std::string::npos) << out;
}

TEST(Check, ToleranceDecides) {
  const std::string baseline = copy_of_shipped_baseline();
  std::string out;
  const std::string worse = kDdp + " --baseline " + baseline + " --set strategy.bucket_mb=100";
  EXPECT_EQ(check(worse + " --tolerance 5000%", &out), 0) << out;
  EXPECT_EQ(check(worse + " --tolerance 1%", &out), 1) << out;
  EXPECT_EQ(check(worse + " --tolerance lots", &out), 2) << out;
  EXPECT_NE(out.find("--tolerance lots"), std::string::npos) << out;
}

TEST(Check, AFileThatIsNotABaselineIsRefusedWithItsLine) {
  const fs::path bad = scratch() / "not-a-baseline.toml";
  std::ofstream(bad) << "format = \"syncopate-check-1\"\n\n[[scenario]]\nfile = \"x.toml\"\n"
                        "epoch_time_s = \"fast\"\n";
  std::string out;
  EXPECT_EQ(check(kDdp + " --baseline " + bad.string(), &out), 1) << out;
  EXPECT_NE(out.find(bad.string() + ":5: epoch_time_s: expected a number"), std::string::npos)
      << out;
  std::ofstream(bad) << "this is [not toml\n";
  EXPECT_EQ(check(kDdp + " --baseline " + bad.string(), &out), 1) << out;
  EXPECT_NE(out.find(bad.string() + ":1:"), std::string::npos) << out;
  std::ofstream(bad) << "name = \"a scenario, not a baseline\"\n";
  EXPECT_EQ(check(kDdp + " --baseline " + bad.string(), &out), 1) << out;
  EXPECT_NE(out.find("not a check baseline"), std::string::npos) << out;
  EXPECT_EQ(check(kDdp + " --baseline " + (scratch() / "absent.toml").string(), &out), 1);
  EXPECT_NE(out.find("create it with --update"), std::string::npos) << out;
}

}  // namespace
}  // namespace check_test
