#pragma once
// Runs a piece of a test in a forked child process.
//
// Why: SimGrid lets a process create its Engine once and cannot reset it, so every test that
// builds an engine (and a platform, actors, ...) must do so in a child of its own.
//
// How: the child runs `body`; GoogleTest assertions inside it work as usual and print their
// messages (from the child); the child's exit status then says what happened:
//   0 = body returned and no assertion failed, 1 = an EXPECT_/ASSERT_ failed,
//   2 = body threw (the message is printed to stderr and returned in ChildResult::error),
//   128 + n = the child died of signal n (e.g. 139 = segfault).
// The parent asserts on the status:
//
//   EXPECT_EQ(run_in_child([] {
//     simgrid::s4u::Engine engine = make_engine();   // whatever the test needs
//     EXPECT_EQ(...);
//   }), 0);
//
//   ChildResult result = run_in_child_output([] { ...; return std::string("text"); });
//   EXPECT_EQ(result.status, 0) << result.error;
//   EXPECT_EQ(result.output, "text");
//
// Status 1 counts only the assertions that failed in the child, not earlier ones of the parent.
// The child ends with _exit: no destructors, atexit handlers or GoogleTest teardown run there.
#include <gtest/gtest.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <string>

namespace syncopate::testing {

struct ChildResult {
  int status = -1;     // as described above
  std::string output;  // what body returned (run_in_child_output), if status is 0 or 1
  std::string error;   // the exception message, if status is 2
};

namespace detail {

inline void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Failed assertions of the running test so far (0 outside a test).
inline int failed_parts() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return 0;
  const ::testing::TestResult* result = info->result();
  int failed = 0;
  for (int i = 0; i < result->total_part_count(); ++i) {
    if (result->GetTestPartResult(i).failed()) ++failed;
  }
  return failed;
}

inline std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace detail

// Runs body in a child; returns the child's status, its returned text and any exception message.
// The pipe carries one tag byte ('O' output, 'E' error) followed by the text.
inline ChildResult run_in_child_output(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return {-1, "", "pipe() failed"};
  std::fflush(nullptr);  // do not let the child repeat the parent's buffered output
  const int failed_before = detail::failed_parts();
  const pid_t pid = ::fork();
  if (pid < 0) return {-1, "", "fork() failed"};
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    try {
      const std::string output = body();
      detail::write_all(fds[1], "O" + output);
      code = detail::failed_parts() > failed_before ? 1 : 0;
    } catch (const std::exception& error) {
      std::cerr << "run_in_child: the child threw: " << error.what() << std::endl;
      detail::write_all(fds[1], std::string("E") + error.what());
      code = 2;
    } catch (...) {
      std::cerr << "run_in_child: the child threw a non-std exception" << std::endl;
      detail::write_all(fds[1], "Enon-std exception");
      code = 2;
    }
    std::fflush(nullptr);
    std::cout.flush();
    std::cerr.flush();
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  const std::string text = detail::read_all(fds[0]);
  ::close(fds[0]);
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return {-1, "", "waitpid() failed"};
  }
  ChildResult result;
  if (WIFEXITED(wait_status)) {
    result.status = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    result.status = 128 + WTERMSIG(wait_status);
  }
  if (!text.empty() && text[0] == 'O') result.output = text.substr(1);
  if (!text.empty() && text[0] == 'E') result.error = text.substr(1);
  return result;
}

// Runs body in a child and returns its status (0 = success).
inline int run_in_child(const std::function<void()>& body) {
  return run_in_child_output([&body] {
           body();
           return std::string();
         })
      .status;
}

}  // namespace syncopate::testing
