#pragma once
// For the tests that drive the syncopate binary: a scratch folder per test program, and a shell
// command run with its output captured, and the mpirun launcher.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

namespace syncopate {

// <tmp>/syncopate-<name>-<pid>/, emptied on its first use in this process: pids wrap, and a
// folder an earlier process with the same pid left behind (its runs made by another build or
// calibration) must not stand in for this process's own runs.
inline std::filesystem::path scratch_folder(const std::string& name) {
  namespace fs = std::filesystem;
  static std::mutex mutex;
  static std::set<std::string> emptied;
  const fs::path dir =
      fs::temp_directory_path() / ("syncopate-" + name + "-" + std::to_string(getpid()));
  const std::lock_guard lock(mutex);
  if (emptied.insert(name).second) fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs `cmd` through the shell; returns its exit code (128 if a signal ended it) and, if
// `output` is given, its stdout and stderr together.
inline int run_command(const std::string& cmd, std::string* output = nullptr) {
  const std::filesystem::path log = scratch_folder("command") / "last.log";
  const int status = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  if (output != nullptr) {
    std::stringstream text;
    text << std::ifstream(log).rdbuf();
    *output = text.str();
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// The whole text of a file ("" if it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

#if defined(SYNCOPATE_MPIEXEC)
// The launcher of an MPI test run: mpirun with `ranks` ranks, oversubscribed, unbound (and
// allowed as root).
inline std::string mpirun(int ranks) {
  std::string cmd = std::string(SYNCOPATE_MPIEXEC) + " -np " + std::to_string(ranks) +
                    " --oversubscribe --bind-to none";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}
#endif

}  // namespace syncopate
