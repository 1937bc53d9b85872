#pragma once
// For the tests that drive the syncopate binary: a shell command run with its output captured,
// the mpirun launcher, a launcher script that logs its calls (and, from scratch.hpp, a scratch
// folder per test process).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/scratch.hpp"

namespace syncopate {

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
// The launcher of an MPI test run and its options: mpirun, oversubscribed, unbound (and allowed
// as root).
inline std::string mpirun_launcher() {
  std::string cmd = std::string(SYNCOPATE_MPIEXEC) + " --oversubscribe --bind-to none";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}

// mpirun_launcher() with `ranks` ranks.
inline std::string mpirun(int ranks) { return mpirun_launcher() + " -np " + std::to_string(ranks); }

// A launcher of the user's for the validation scripts' --mpirun: a shell script, dir/launcher.sh,
// that appends its arguments to dir/launcher.log and then runs mpirun_launcher() with them.
inline std::filesystem::path logging_launcher(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const fs::path script = dir / "launcher.sh";
  std::ofstream(script) << "#!/bin/sh\necho \"$*\" >> '" << (dir / "launcher.log").string()
                        << "'\nexec " << mpirun_launcher() << " \"$@\"\n";
  fs::permissions(script, fs::perms::owner_exec, fs::perm_options::add);
  return script;
}
#endif

}  // namespace syncopate
