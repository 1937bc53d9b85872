// User errors of `syncopate run` found before training starts, driven through the binary: each
// is exit 1 with a message naming the option, file or key, instead of an internal error (exit 3)
// after the run (an unwritable --out), or of a crash or a silent wrong result.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/run_command.hpp"
#include "tests/common/user_error.hpp"

namespace preflight_test {
namespace {
namespace fs = std::filesystem;
using syncopate::has;

const std::string kBin = SYNCOPATE_BIN;

fs::path scratch() { return syncopate::scratch_folder("preflight-test"); }

// `syncopate run ARGS` in the scratch folder (quiet); the exit code, the output in *output.
int run(const std::string& args, std::string* output) {
  return syncopate::run_command("cd " + scratch().string() + " && " + kBin + " run --quiet " + args,
                                output);
}

// A run that would take long: the errors must come before it starts.
const std::string kLongRun = "--set epochs=50 ";

TEST(Preflight, OutUnderAFileIsAUserErrorBeforeTraining) {
  std::ofstream(scratch() / "a-file") << "x";
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run(kLongRun + "--out a-file/run", &out), 1) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_TRUE(has(out, "syncopate: error: --out a-file/run: " + (scratch() / "a-file").string() +
                           " is a file, not a folder"))
      << out;
  EXPECT_FALSE(has(out, "training time")) << out;
}

TEST(Preflight, OutNameTooLongIsAUserError) {
  std::string out;
  const std::string name(300, 'o');
  EXPECT_EQ(run(kLongRun + "--out " + name, &out), 1) << out;
  EXPECT_TRUE(has(out, "--out " + name + ": the name 'oooo")) << out;
  EXPECT_TRUE(has(out, "is 300 characters; at most 239 are allowed")) << out;
}

TEST(Preflight, ReadOnlyOutIsAUserError) {
  if (geteuid() == 0) GTEST_SKIP() << "root may write into a read-only folder";
  const fs::path locked = scratch() / "locked";
  fs::create_directories(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  std::string out;
  EXPECT_EQ(run(kLongRun + "--out locked/run", &out), 1) << out;
  EXPECT_TRUE(has(out, "is not writable")) << out;
  fs::permissions(locked, fs::perms::owner_all);
}

TEST(Preflight, ScenarioNameThatLeavesRunsOrIsTooLong) {
  std::ofstream(scratch() / "escape.toml") << "name = \"../../x\"\nbackend = \"sim\"\n";
  std::string out;
  EXPECT_EQ(run("escape.toml", &out), 1) << out;
  EXPECT_TRUE(has(out, "escape.toml:1: name: '../../x' is not a plain folder name")) << out;
  EXPECT_EQ(run("--set name=" + std::string(250, 'n'), &out), 1) << out;
  EXPECT_TRUE(has(out, ": name: 250 characters; at most 200")) << out;
}

TEST(Preflight, ADirectoryIsNotAScenario) {
  fs::create_directories(scratch() / "folder.toml");
  std::string out;
  EXPECT_EQ(run("folder.toml", &out), 1) << out;
  EXPECT_TRUE(has(out, "folder.toml: scenario file is not a regular file")) << out;
}

TEST(Preflight, CostOnlyModelInEmulationIsAUserError) {
  std::string out;
  EXPECT_EQ(run("--set model.name=resnet50", &out), 1) << out;
  EXPECT_TRUE(has(out,
                  "model.name: resnet50 takes samples of 3x224x224, data.dataset = "
                  "\"fashion-mnist\" has 1x28x28 (sim.mode is \"emulation\")"))
      << out;
}

TEST(Preflight, SyntheticSetThatCannotFitInMemoryIsAUserError) {
  std::string out;
  EXPECT_EQ(run("--set data.dataset=synthetic --set data.train_samples=10000000000", &out), 1)
      << out;
  EXPECT_TRUE(has(out, "data.train_samples: 10000000000 synthetic samples of 1x28x28 floats need"))
      << out;
}

TEST(Preflight, CostOnlySampleCountsThatCannotBePlanned) {
  std::string out;
  const std::string cost_only = "--set sim.mode=cost_only --set sim.cost_only_train_samples=";
  EXPECT_EQ(run(cost_only + "9223372036854775000", &out), 1) << out;
  EXPECT_TRUE(has(out, "sim.cost_only_train_samples: 9223372036854775000 samples make")) << out;
  EXPECT_EQ(run(cost_only + "1000000000000000", &out), 1) << out;
  EXPECT_TRUE(has(out, "at most 10000000 steps are planned")) << out;
}

TEST(Preflight, SimGridXmlThatSimGridWouldAbortOnIsAUserError) {
  std::ofstream(scratch() / "noroute.xml")
      << "<?xml version='1.0'?>\n<platform version=\"4.1\">\n<zone id=\"z\" routing=\"Full\">\n"
         "<host id=\"a\" speed=\"1Gf\"/>\n<host id=\"b\" speed=\"1Gf\"/>\n</zone>\n</platform>\n";
  std::ofstream(scratch() / "on-xml.toml")
      << "name = \"on-xml\"\nbackend = \"sim\"\nworkers = 2\n[sim]\nplatform = \"noroute.xml\"\n";
  std::string out;
  EXPECT_EQ(run("on-xml.toml", &out), 1) << out;
  EXPECT_TRUE(has(out,
                  "noroute.xml:3: <zone id=\"z\">: routing=\"Full\" with 2 hosts, routers or zones "
                  "and no route"))
      << out;
}

TEST(Preflight, UnknownGemmKernelIsAUserErrorBeforeTraining) {
  std::string out;
  EXPECT_EQ(
      syncopate::run_command("cd " + scratch().string() + " && SYNCOPATE_GEMM_KERNEL=avx1024 " +
                                 kBin + " run --quiet " + kLongRun + "--out gemm-run",
                             &out),
      1)
      << out;
  EXPECT_TRUE(has(out, "SYNCOPATE_GEMM_KERNEL = \"avx1024\": unknown kernel")) << out;
  EXPECT_FALSE(fs::exists(scratch() / "gemm-run")) << "a refused run wrote its folder";
}

TEST(Preflight, SummaryNamesTheGemmKernelThatRan) {
  std::string out;
  ASSERT_EQ(syncopate::run_command("cd " + scratch().string() +
                                       " && SYNCOPATE_GEMM_KERNEL=generic " + kBin +
                                       " run --quiet --set epochs=1 --set data.train_samples=640 " +
                                       "--backend local --workers 1 --out generic-run",
                                   &out),
            0)
      << out;
  EXPECT_TRUE(has(syncopate::read_text(scratch() / "generic-run" / "summary.json"),
                  "\"gemm_kernel\": \"generic\""));
}

// The MPI backend's settings in the environment: text that is not a value is refused, naming
// the variable, before the run writes its folder (read with atoi, "5ms" had been 5 and "soon"
// 0). Every rank refuses, but mpirun may end a rank before it prints once another has failed.
TEST(Preflight, BadMpiEnvironmentSettingsAreRefused) {
  const struct {
    const char* assignment;
    const char* message;
  } cases[] = {
      {"SYNCOPATE_MPI_HELPER_POLL_US=5ms",
       "SYNCOPATE_MPI_HELPER_POLL_US: '5ms' is not a number of microseconds"},
      {"SYNCOPATE_MPI_HELPER_POLL_US=-1", "SYNCOPATE_MPI_HELPER_POLL_US: '-1' is not a number"},
      {"SYNCOPATE_MPI_HELPER_POLL_US=2000000",
       "SYNCOPATE_MPI_HELPER_POLL_US: '2000000' is not a number"},
      {"SYNCOPATE_MPI_WATCHDOG_S=soon", "SYNCOPATE_MPI_WATCHDOG_S: 'soon' is not a number"},
      {"SYNCOPATE_MPI_THREADS=many", "SYNCOPATE_MPI_THREADS: 'many' is unknown"},
      // Read when the communicator is made ("error on rank N"). 2^32 + 2 had been taken as 2:
      // pretend nodes of two ranks.
      {"SYNCOPATE_MPI_RANKS_PER_NODE=4294967298",
       "SYNCOPATE_MPI_RANKS_PER_NODE: '4294967298' is not a rank count"},
  };
  int k = 0;
  for (const auto& c : cases) {
    const std::string name = "mpi-env-" + std::to_string(k++);
    std::string out;
    EXPECT_NE(syncopate::run_command("cd " + scratch().string() + " && " + c.assignment + " " +
                                         syncopate::mpirun(2) + " " + kBin + " run --quiet " +
                                         kLongRun + "--backend mpi --workers 2 --out " + name,
                                     &out),
              0)
        << c.assignment << "\n"
        << out;
    EXPECT_TRUE(has(out, std::string("environment: ") + c.message)) << c.assignment << "\n" << out;
    EXPECT_FALSE(fs::exists(scratch() / name))
        << c.assignment << ": a refused run wrote its folder";
  }
}

}  // namespace
}  // namespace preflight_test
