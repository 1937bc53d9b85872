// `syncopate sweep`, driven through the binary: grid expansion, skipping finished points, a sweep
// killed mid-way that resumes to the same sweep.csv, the Slurm script, and bad command lines.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/run_command.hpp"

namespace sweep_test {
namespace {
namespace fs = std::filesystem;

const std::string kBin = SYNCOPATE_BIN;
// A cost-only simulated mlp: each point takes a fraction of a second.
const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/scenarios/fmnist-mlp.toml";
const std::string kFast =
    " --set backend=sim --set sim.mode=cost_only --set sim.fidelity=analytic --set epochs=2"
    " --set data.train_samples=6000 --set eval_every_epoch=false --set sim.platform=mn5-acc"
    " --set sim.platform_params.nodes=2";

fs::path fresh_dir(const std::string& name) {
  const fs::path d = syncopate::scratch_folder("sweep") / name;
  fs::remove_all(d);
  return d;
}

int run(const std::string& cmd, std::string* output = nullptr) {
  return syncopate::run_command(cmd, output);
}

std::vector<std::vector<std::string>> read_csv(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

// sweep.csv without the columns that hold wall-clock time (they differ run to run).
std::vector<std::vector<std::string>> deterministic_part(const fs::path& path) {
  auto rows = read_csv(path);
  std::vector<size_t> keep;
  for (size_t k = 0; k < rows.at(0).size(); ++k)
    if (rows[0][k].find("wall_seconds") == std::string::npos) keep.push_back(k);
  for (auto& row : rows) {
    std::vector<std::string> kept;
    for (size_t k : keep) kept.push_back(k < row.size() ? row[k] : "");
    row = kept;
  }
  return rows;
}

std::string sweep_cmd(const fs::path& dir, const std::string& grid) {
  return kBin + " sweep " + kScenario + kFast + " " + grid + " --jobs 2 --out " + dir.string();
}

TEST(Sweep, ExpandsTheGridIntoOneRowPerPoint) {
  const fs::path dir = fresh_dir("grid");
  std::string out;
  ASSERT_EQ(
      run(sweep_cmd(dir, "--strategy ddp,epoch_sync --workers 2,4 --set batch_size=32,64"), &out),
      0)
      << out;
  const auto rows = read_csv(dir / "sweep.csv");
  ASSERT_EQ(rows.size(), 1u + 8u);
  EXPECT_EQ(rows[0][0], "strategy");
  EXPECT_EQ(rows[0][1], "workers");
  EXPECT_EQ(rows[0][2], "batch_size");
  // The first axis varies slowest.
  EXPECT_EQ((std::vector<std::string>{rows[1][0], rows[1][1], rows[1][2]}),
            (std::vector<std::string>{"ddp", "2", "32"}));
  EXPECT_EQ((std::vector<std::string>{rows[8][0], rows[8][1], rows[8][2]}),
            (std::vector<std::string>{"epoch_sync", "4", "64"}));
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][4], "done");
    EXPECT_TRUE(fs::exists(dir / rows[i][3] / "summary.json")) << rows[i][3];
  }
  // Each point really ran with its values: the run's summary names its strategy and workers.
  std::stringstream summary;
  summary << std::ifstream(dir / rows[8][3] / "summary.json").rdbuf();
  EXPECT_NE(summary.str().find("\"strategy\": \"epoch_sync\""), std::string::npos);
  EXPECT_NE(summary.str().find("\"workers\": 4"), std::string::npos);
}

TEST(Sweep, RerunningSkipsFinishedPoints) {
  const fs::path dir = fresh_dir("skip");
  const std::string cmd = sweep_cmd(dir, "--strategy ddp,epoch_sync --workers 2");
  ASSERT_EQ(run(cmd), 0);
  const fs::path summary = dir / "runs" / "0000_ddp_w2" / "summary.json";
  const auto written = fs::last_write_time(summary);
  std::string out;
  ASSERT_EQ(run(cmd, &out), 0) << out;
  EXPECT_NE(out.find("2 of 2 points already finished"), std::string::npos) << out;
  EXPECT_EQ(fs::last_write_time(summary), written);
}

TEST(Sweep, KilledMidwayResumesToTheSameCsv) {
  const std::string grid = "--strategy ddp,epoch_sync,epoch_async --workers 2,4";
  const fs::path whole = fresh_dir("whole"), cut = fresh_dir("cut");
  ASSERT_EQ(run(sweep_cmd(whole, grid)), 0);

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = sweep_cmd(cut, grid) + " --quiet";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    _exit(127);
  }
  // Kill it once the first point has finished, while others remain.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(cut / "runs" / "0000_ddp_w2" / "summary.json") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(fs::exists(cut / "runs" / "0000_ddp_w2" / "summary.json"));
  const auto partial = read_csv(cut / "sweep.csv");
  size_t done = 0;
  for (size_t i = 1; i < partial.size(); ++i) done += partial[i][3] == "done";
  EXPECT_GE(done, 1u);
  if (done < 6) {
    EXPECT_NE(WEXITSTATUS(status), 0);
  }

  std::string out;
  ASSERT_EQ(run(sweep_cmd(cut, grid), &out), 0) << out;
  EXPECT_EQ(deterministic_part(cut / "sweep.csv"), deterministic_part(whole / "sweep.csv"));
}

TEST(Sweep, MpiPointsRunUnderMpirun) {
  const fs::path dir = fresh_dir("mpi");
  std::string out;
  ASSERT_EQ(run(kBin + " sweep " + kScenario +
                    " --set backend=mpi --set epochs=1 --set data.train_samples=1000"
                    " --set data.test_samples=200 --strategy ddp --workers 1,2 --jobs 1 --out " +
                    dir.string(),
                &out),
            0)
      << out;
  const auto rows = read_csv(dir / "sweep.csv");
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::string summary = syncopate::read_text(dir / rows[i][2] / "summary.json");
    EXPECT_NE(summary.find("\"backend\": \"mpi\""), std::string::npos) << summary;
    EXPECT_NE(summary.find("\"workers\": " + rows[i][1]), std::string::npos) << summary;
  }
}

TEST(Sweep, EmitsASlurmArrayWithSrunForMpiPoints) {
  const fs::path dir = fresh_dir("slurm");
  std::string out;
  ASSERT_EQ(run(kBin + " sweep " + kScenario + " --set backend=mpi --workers 2,4 --emit slurm" +
                    " --out " + dir.string(),
                &out),
            0)
      << out;
  std::stringstream script;
  script << std::ifstream(dir / "sweep.sbatch").rdbuf();
  EXPECT_NE(script.str().find("#SBATCH --array=0,1"), std::string::npos) << script.str();
  EXPECT_NE(script.str().find("#SBATCH --ntasks=4"), std::string::npos);
  EXPECT_NE(script.str().find("'srun' '--ntasks=2'"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "runs" / "0000_w2"));  // nothing ran
  // --collect on it: no point finished yet.
  ASSERT_EQ(run(kBin + " sweep --collect " + dir.string(), &out), 1) << out;
  EXPECT_EQ(read_csv(dir / "sweep.csv").size(), 3u);
}

TEST(Sweep, BadCommandLinesExitWith2AndSayWhy) {
  const fs::path dir = fresh_dir("bad");
  std::string out;
  EXPECT_EQ(run(sweep_cmd(dir, "--strategy ddp,nonsense"), &out), 2);
  EXPECT_NE(out.find("nonsense"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "runs"));  // nothing started
  EXPECT_EQ(run(sweep_cmd(dir, ""), &out), 2);
  EXPECT_NE(out.find("empty grid"), std::string::npos) << out;
  EXPECT_EQ(run(sweep_cmd(dir, "--workers 2,,4"), &out), 2);
  EXPECT_NE(out.find("empty value"), std::string::npos) << out;
  EXPECT_EQ(run(kBin + " sweep --collect " + fresh_dir("empty").string(), &out), 2);
  EXPECT_NE(out.find("holds no sweep"), std::string::npos) << out;
  // Another sweep in the same directory is refused, not mixed in.
  ASSERT_EQ(run(sweep_cmd(dir, "--workers 2")), 0);
  // A damaged summary.json is named, and the sweep.csv already written stays as it was.
  const std::string csv_before = syncopate::read_text(dir / "sweep.csv");
  const fs::path summary = dir / "runs" / "0000_w2" / "summary.json";
  ASSERT_TRUE(fs::exists(summary));
  std::ofstream(summary) << "{\"total_time_s\": 1.5,";
  EXPECT_EQ(run(kBin + " sweep --collect " + dir.string(), &out), 2);
  EXPECT_NE(out.find(summary.string() + ": not a run summary"), std::string::npos) << out;
  EXPECT_EQ(syncopate::read_text(dir / "sweep.csv"), csv_before);
  std::ofstream(summary) << "[1, 2]";
  EXPECT_EQ(run(kBin + " sweep --collect " + dir.string(), &out), 2);
  EXPECT_NE(out.find("not a JSON object"), std::string::npos) << out;
  EXPECT_EQ(run(sweep_cmd(dir, "--workers 4"), &out), 2);
  EXPECT_NE(out.find("holds another sweep"), std::string::npos) << out;
  EXPECT_EQ(run(kBin + " run --no-such-flag", &out), 2);
  // An --out that cannot be made (a file in the way) is the user's error, not an internal one.
  const fs::path file = fresh_dir("a-file");
  std::ofstream(file) << "x";
  EXPECT_EQ(run(sweep_cmd(file / "sweep", "--workers 2"), &out), 1) << out;
  EXPECT_NE(out.find(file.string()), std::string::npos) << out;
}

}  // namespace
}  // namespace sweep_test
