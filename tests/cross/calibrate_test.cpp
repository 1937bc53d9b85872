// `syncopate calibrate` under mpirun on the small MLP scenario: it writes a profile and platform
// that the simulator loads, a simulated run with them takes the measured layer times, and it
// refuses one rank, and ranks given different scenarios, with an error on every rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <regex>
#include <string>

#include "tests/common/run_command.hpp"

namespace calibrate_test {
namespace {
namespace fs = std::filesystem;

const std::string kBin = SYNCOPATE_BIN;
const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";
// 640 samples: 20 full steps of 16 per worker and epoch at 2 workers, no uneven last step.
const std::string kSets = " --set data.train_samples=640";

fs::path scratch() { return syncopate::scratch_folder("calibrate"); }

using syncopate::mpirun;

// The calibrated platform scratch()/bench.toml (made once per test program).
fs::path calibrated() {
  const fs::path platform = scratch() / "bench.toml";
  if (fs::exists(platform)) return platform;
  std::string out;
  const int rc = syncopate::run_command(mpirun(2) + " " + kBin + " calibrate " + kScenario + kSets +
                                            " --repeats 5 --out " + platform.string(),
                                        &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("dense [16, 784] fwd"), std::string::npos) << out;
  EXPECT_NE(out.find("allreduce"), std::string::npos) << out;
  return platform;
}

// Every `key = <number>` of the text, summed.
double sum_of(const std::string& text, const std::string& key) {
  const std::regex line("\n" + key + " = ([-+0-9.eE]+)");
  double sum = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it)
    sum += std::stod((*it)[1]);
  return sum;
}

TEST(Calibrate, WritesAProfileAndPlatformWithTheirProvenance) {
  const fs::path platform = calibrated();
  const std::string profile = syncopate::read_text(scratch() / "profiles" / "bench-cpu.toml");
  const std::string recipe = syncopate::read_text(platform);
  for (const std::string& text : {profile, recipe}) {
    for (const char* field :
         {"# date: ", "# host: ", "# cpu: ", "# ranks: 2", "# build: ", "# command: ", "calibrate",
          // the machine's default transport (mpi.np2.single_copy_off tests the reading off)
          "# MPI: Open MPI v", "; shared-memory single copy on (btl_vader_single_copy_mechanism)",
          // how its ranks waited: the tests run under OMPI_MCA_mpi_yield_when_idle=1
          "\n# waiting ranks yield their core (mpi_yield_when_idle on): turn_latency holds for "
          "runs that do\n"})
      EXPECT_NE(text.find(field), std::string::npos) << field << " in\n" << text;
  }
  EXPECT_NE(profile.find("[[layer]]\nkind = \"dense\"\ninput = [16, 784]\noutput = [16, 256]\n"),
            std::string::npos)
      << profile;
  EXPECT_NE(recipe.find("profile = \"bench-cpu\""), std::string::npos) << recipe;
  // The ranks' paces, whole steps for half a second on both at once, and the spread of workers'
  // speeds fitted to them, written as a comment: the simulator's workers stay equal.
  std::smatch pace;
  ASSERT_TRUE(std::regex_search(
      profile, pace,
      std::regex("\n# the ranks' paces, each running whole steps for 0.5 s, all at once: s per "
                 "step ([-+0-9.eE]+), ([-+0-9.eE]+)\n# [^\n]*\n# [^\n]*: worker_spread = "
                 "([-+0-9.eE]+)\n")))
      << profile;
  const double a = std::stod(pace[1]), b = std::stod(pace[2]);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  // Two ranks: |ln a - ln b| / sqrt(2) over c4(2) = sqrt(2 / pi), at most 0.5; within what the
  // paces' 4 digits leave (each 5e-4 of itself).
  const double spread = std::min(0.5, std::abs(std::log(a / b)) * std::sqrt(std::numbers::pi) / 2);
  EXPECT_NEAR(std::stod(pace[3]), spread, 1e-3 * spread + 1e-3) << pace[0];
  EXPECT_EQ(profile.find("\nworker_spread ="), std::string::npos) << profile;
  // The same settings as data, which a simulated run records and compare checks.
  EXPECT_NE(recipe.find("\n[calibrated_under]  # the MPI settings measured under: compare flags "
                        "a measured run under others\nshared_memory_single_copy = true  # "
                        "btl_vader_single_copy_mechanism\nmpi_yield_when_idle = true\n"),
            std::string::npos)
      << recipe;
  EXPECT_NE(recipe.find("#   allgather "), std::string::npos) << recipe;
  // The transport fit: overheads and one bandwidth factor per (channel) ping-pong size but the
  // first (16 B to 64 MiB), the last 1 (the link's bandwidth is the largest size's).
  for (const char* field :
       {"\n[network]", "\nsend_overhead = ", "\nrecv_overhead = ", "\nbandwidth_factor = [\n  [0, ",
        "\n  [47453133, 1],  # 67108864 B: ", "#   ping_pong 67108864 B: ",
        "#   send_overhead 8 B: ", "#   channel_ping_pong 67108864 B: ",
        // Exchanges through the communicator, 32 KiB to 32 MiB.
        "#   channel_exchange 32768 B: ", "#   channel_exchange 33554432 B: ",
        // The local passes, 1 KiB to 32 MiB: one speed per size, the first from 0.
        "\nreduce_bandwidth = [\n  [0, ", "\ncopy_bandwidth = [\n  [0, ",
        "],  # 33554432 B: ", "#   reduce_pass 1024 B: ", "#   copy_pass 33554432 B: ",
        // kAvg's division by 2 (a multiplication) and by 3, over the same sizes.
        "\nscale_bandwidth = [\n  [0, ", "\ndivide_bandwidth = [\n  [0, ",
        "#   scale_pass 33554432 B: ", "#   divide_pass 1024 B: ",
        // The copy with no other rank touching the buffer, a one-rank collective's.
        "\nsolo_copy_bandwidth = [\n  [0, ", "#   solo_copy_pass 33554432 B: ",
        // The 16-bit wire formats' passes, 1 KiB to 16 MiB by fours.
        "\n[network.fp16]  # ", "\n[network.bf16]  # ", "\nencode_bandwidth = [\n  [0, ",
        "\ndecode_bandwidth = [\n  [0, ", "\nround_bandwidth = [\n  [0, ",
        "],  # 16777216 B: ", "#   fp16_encode_pass 1024 B: ", "#   bf16_reduce_pass 16777216 B: ",
        "#   bf16_round_pass 4096 B: "})
    EXPECT_NE(recipe.find(field), std::string::npos) << field << " in\n" << recipe;
  // The node's cores online, which more workers than that time-share.
  EXPECT_NE(recipe.find("\ncores_per_node = " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
                        "  # cores online"),
            std::string::npos)
      << recipe;
  // The wait for a turn on a core: a round (a 2-rank allreduce of 8 B) with ranks 0 and 1 on one
  // core, less the same on two.
  std::smatch turn;
  ASSERT_TRUE(
      std::regex_search(recipe, turn,
                        std::regex("\nturn_latency = ([-+0-9.eE]+)  # s: a round of the "
                                   "communicator's 2-rank allreduce of 8 B with ranks 0 and 1 "
                                   "on one core, ([-+0-9.eE]+) s, less on two, ([-+0-9.eE]+) s: ")))
      << recipe;
  const double shared = std::stod(turn[2]), apart = std::stod(turn[3]);
  EXPECT_NEAR(std::stod(turn[1]), std::max(0.0, shared - apart), 1e-3 * shared) << turn[0];
  // What the cores copy in all: the exchanges through the communicator against its one-way
  // times, at 32 KiB to 32 MiB (11 sizes), the ratio bounded to [1, 2].
  std::smatch copies;
  ASSERT_TRUE(std::regex_search(
      recipe, copies,
      std::regex("\ncores_bandwidth = ([-+0-9.eE]+)  # B/s: cores_per_node x gpu_link.bandwidth / "
                 "([0-9.]+): an exchange took ([0-9.]+)x the one-way time \\(median over 11 "
                 "sizes from 32 KiB; ")))
      << recipe;
  std::smatch link;
  ASSERT_TRUE(std::regex_search(recipe, link, std::regex("\nbandwidth = ([-+0-9.eE]+)  # B/s")));
  const double divisor = std::stod(copies[2]);
  EXPECT_EQ(divisor, std::clamp(std::stod(copies[3]), 1.0, 2.0)) << copies[0];
  EXPECT_NEAR(std::stod(copies[1]), sysconf(_SC_NPROCESSORS_ONLN) * std::stod(link[1]) / divisor,
              1e-2 * std::stod(copies[1]))
      << copies[0];
  for (const char* field : {"#   round 8 B: ", "#   turn_round 8 B: "})
    EXPECT_NE(recipe.find(field), std::string::npos) << field << " in\n" << recipe;
  // Ranks 0 and 1 share this host: the two directions' sharing is the cores', not the port's.
  EXPECT_NE(recipe.find("\nduplex = \"split\"  # the two directions' sharing is the cores': "
                        "cores_bandwidth\n"),
            std::string::npos)
      << recipe;
}

// With every fallback speed made enormous, a simulated run's compute is the measured layer
// passes alone, scaled by compute_skew: steps x (sum of forward_s and backward_s) x compute_skew
// per worker (calibrate writes no worker_spread: equal workers). The step overhead (set to 1 ms)
// is idle time, as in a measured run: steps x 1 ms per worker.
TEST(Calibrate, TheSimulatorUsesTheMeasuredLayerTimes) {
  const fs::path platform = calibrated();
  std::string profile = syncopate::read_text(scratch() / "profiles" / "bench-cpu.toml");
  const double skew = sum_of(profile, "compute_skew");
  EXPECT_GE(skew, 0.5);
  EXPECT_LE(skew, 2.0);
  const double per_step = (sum_of(profile, "forward_s") + sum_of(profile, "backward_s")) * skew;
  ASSERT_GT(per_step, 0);
  profile = std::regex_replace(profile,
                               std::regex("\n(gemm|conv|pool|elementwise|loss|optimizer"
                                          "|memory_bandwidth) = [^\n]*"),
                               "\n$1 = 1e30");
  profile =
      std::regex_replace(profile, std::regex("\nstep_overhead = [^\n]*"), "\nstep_overhead = 1e-3");
  fs::create_directories(scratch() / "fast" / "profiles");
  std::ofstream(scratch() / "fast" / "profiles" / "bench-cpu.toml") << profile;
  fs::copy_file(platform, scratch() / "fast" / "bench.toml", fs::copy_options::overwrite_existing);
  const fs::path run = scratch() / "sim-run";
  std::string out;
  ASSERT_EQ(
      syncopate::run_command(
          kBin + " run " + kScenario + kSets + " --backend sim --strategy ddp --quiet --platform " +
              (scratch() / "fast" / "bench.toml").string() + " --out " + run.string(),
          &out),
      0)
      << out;
  const auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
  const double steps = 2 * 20;                   // epochs x steps per epoch, per worker
  const double expected = 2 * steps * per_step;  // summed over 2 workers
  EXPECT_NEAR(summary["compute_time_s"].get<double>(), expected, 1e-6 * expected) << out;
  EXPECT_NEAR(summary["idle_time_s"].get<double>(), 2 * steps * 1e-3, 1e-6) << out;
}

// Under a library whose waiting ranks spin, the header says so, and so does a note on stderr:
// turn_latency is then a time slice's wait, which runs that yield do not pay.
TEST(Calibrate, SaysWhenWaitingRanksSpin) {
  const fs::path platform = scratch() / "spinning.toml";
  std::string out;
  ASSERT_EQ(syncopate::run_command("OMPI_MCA_mpi_yield_when_idle=0 " + mpirun(2) + " " + kBin +
                                       " calibrate " + kScenario + kSets + " --repeats 3 --out " +
                                       platform.string(),
                                   &out),
            0)
      << out;
  const std::string recipe = syncopate::read_text(platform);
  EXPECT_NE(recipe.find("\n# waiting ranks spin (mpi_yield_when_idle off): turn_latency holds "
                        "for runs that do\n"),
            std::string::npos)
      << recipe;
  EXPECT_NE(recipe.find("\nmpi_yield_when_idle = false\n"), std::string::npos) << recipe;
  EXPECT_NE(out.find("calibrate: note: waiting ranks spin here (mpi_yield_when_idle off)"),
            std::string::npos)
      << out;
}

// --steady-spread 1 takes no spread as steady: the warning comes, after both files are written.
// A threshold below 1 (p90 is never below p10) is refused before anything runs.
TEST(Calibrate, WarnsOfAStepSpreadOverTheSteadyOne) {
  const fs::path platform = scratch() / "strict.toml";
  std::string out;
  ASSERT_EQ(syncopate::run_command(mpirun(2) + " " + kBin + " calibrate " + kScenario + kSets +
                                       " --repeats 3 --steady-spread 1 --out " + platform.string(),
                                   &out),
            0)
      << out;
  EXPECT_TRUE(fs::exists(platform));
  EXPECT_TRUE(fs::exists(scratch() / "profiles" / "strict-cpu.toml"));
  const std::string warning = "syncopate: calibrate: warning: a step's timed parts took ";
  ASSERT_NE(out.find(warning), std::string::npos) << out;
  EXPECT_EQ(out.find(warning), out.rfind(warning)) << out;  // rank 0's alone
  EXPECT_NE(out.find("over 1.00x"), std::string::npos) << out;
  const fs::path refused = scratch() / "refused.toml";
  for (const char* bad : {"0.9", "nan", "1.5x"}) {
    EXPECT_NE(syncopate::run_command(kBin + " calibrate " + kScenario + " --steady-spread " + bad +
                                         " --out " + refused.string(),
                                     &out),
              0);
    EXPECT_NE(out.find("--steady-spread: Value " + std::string(bad) + " is not a number from 1"),
              std::string::npos)
        << out;
    EXPECT_FALSE(fs::exists(refused));
  }
}

TEST(Calibrate, OneRankIsRefused) {
  std::string out;
  const int rc = syncopate::run_command(
      kBin + " calibrate " + kScenario + " --out " + (scratch() / "one.toml").string(), &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("need 2 ranks or more"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(scratch() / "one.toml"));
}

TEST(Calibrate, RanksWithDifferentScenariosAllFail) {
  const std::string out_file = " --out " + (scratch() / "split.toml").string();
  std::string cmd = mpirun(1) + " " + kBin + " calibrate " + kScenario + " --set seed=1" +
                    out_file + " : -np 1 " + kBin + " calibrate " + kScenario + " --set seed=2" +
                    out_file;
  std::string out;
  EXPECT_NE(syncopate::run_command(cmd, &out), 0) << out;
  EXPECT_NE(out.find("error on rank 0: calibrate:"), std::string::npos) << out;
  EXPECT_NE(out.find("error on rank 1: calibrate:"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(scratch() / "split.toml"));
}

// A GEMM kernel that one rank cannot use is refused on every rank before any timing.
TEST(Calibrate, AnUnknownGemmKernelIsRefusedOnEveryRank) {
  const std::string out_file = " --out " + (scratch() / "kernel.toml").string();
  std::string cmd = mpirun(1) + " " + kBin + " calibrate " + kScenario + out_file +
                    " : -np 1 -x SYNCOPATE_GEMM_KERNEL=avx1024 " + kBin + " calibrate " +
                    kScenario + out_file;
  std::string out;
  EXPECT_NE(syncopate::run_command(cmd, &out), 0) << out;
  EXPECT_NE(out.find("error on rank 1: SYNCOPATE_GEMM_KERNEL = \"avx1024\": unknown kernel"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find("error on rank 0: calibrate: another rank refused its scenario or its settings"),
      std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(scratch() / "kernel.toml"));
}

}  // namespace
}  // namespace calibrate_test
