#pragma once
// Scratch folders of a test process: <tmp>/syncopate-<name>-<pid>/, removed when the process
// exits. A test suite runs each test in a process of its own, hundreds of them per run, and
// their runs, logs and files would otherwise pile up in the temporary directory (about 350 MB a
// run of the suite).
//
// Kept, with a line on stderr naming them, where a test of the process failed (they are its
// evidence: the runs it compared, the files it wrote) or SYNCOPATE_KEEP_SCRATCH is set. A
// process killed or crashed removes nothing; a forked child (a death test, run_in_child) never
// removes its parent's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <system_error>

namespace syncopate {

namespace detail {

class ScratchFolders {
 public:
  static ScratchFolders& instance() {
    // Made at the first scratch folder, after GoogleTest's UnitTest (the tests register at
    // start-up), and so destroyed before it: the destructor may ask whether a test failed.
    static ScratchFolders folders;
    return folders;
  }

  // <tmp>/syncopate-<name>-<pid>/, emptied on its first use in this process: pids wrap, and a
  // folder an earlier process with the same pid left behind (its runs made by another build or
  // calibration) must not stand in for this process's own runs.
  std::filesystem::path make(const std::string& name) {
    namespace fs = std::filesystem;
    const fs::path dir =
        fs::temp_directory_path() / ("syncopate-" + name + "-" + std::to_string(getpid()));
    const std::lock_guard lock(mutex_);
    if (made_.insert(dir).second) fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
  }

  ~ScratchFolders() {
    if (getpid() != owner_ || made_.empty()) return;
    const bool failed = ::testing::UnitTest::GetInstance()->Failed();
    if (failed || std::getenv("SYNCOPATE_KEEP_SCRATCH") != nullptr) {
      for (const std::filesystem::path& dir : made_)
        std::fprintf(stderr, "scratch folder kept%s: %s\n", failed ? " (a test failed)" : "",
                     dir.c_str());
      return;
    }
    std::error_code ignored;  // a folder a test removed itself, or cannot remove: nothing to do
    for (const std::filesystem::path& dir : made_) std::filesystem::remove_all(dir, ignored);
  }

 private:
  ScratchFolders() = default;
  const pid_t owner_ = getpid();
  std::mutex mutex_;
  std::set<std::filesystem::path> made_;
};

}  // namespace detail

inline std::filesystem::path scratch_folder(const std::string& name) {
  return detail::ScratchFolders::instance().make(name);
}

}  // namespace syncopate
