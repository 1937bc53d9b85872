#pragma once
// Child processes of the commands that run other runs (sweep, check): start one with its output
// in a log file, or run one to completion.
#include <sys/types.h>

#include <string>
#include <vector>

namespace syncopate::app {

// This program's own path (/proc/self/exe; argv0 if that cannot be read).
std::string self_executable(const char* argv0);

// Starts `cmd` (searched in PATH) with stdout and stderr in `log` and no stdin; returns its pid.
// Throws UserError when it cannot start.
pid_t spawn(const std::vector<std::string>& cmd, const std::string& log);

// Runs `cmd` to completion; returns its exit code (128 + signal if a signal ended it).
int run_to_completion(const std::vector<std::string>& cmd, const std::string& log);

}  // namespace syncopate::app
