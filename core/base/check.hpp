#pragma once
// Always-on invariant checks and the project's error types.
//
// SYNC_CHECK guards programming invariants (a violated one is a bug in Syncopate): it throws
// InternalError with file:line and the failed condition. User mistakes (bad scenario, missing
// file) are reported with UserError, whose message names the file, line and field.
#include <sstream>
#include <stdexcept>
#include <string>

namespace syncopate {

// A problem with the user's input: bad scenario, missing or corrupt file, impossible request.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A violated internal invariant: a bug.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const std::string& message);
}  // namespace detail

}  // namespace syncopate

#define SYNC_CHECK(cond, ...)                                                                 \
  do {                                                                                        \
    if (!(cond)) [[unlikely]] {                                                               \
      std::ostringstream sync_check_stream_;                                                  \
      sync_check_stream_ << "" __VA_OPT__(<<) __VA_ARGS__;                                    \
      ::syncopate::detail::check_failed(__FILE__, __LINE__, #cond, sync_check_stream_.str()); \
    }                                                                                         \
  } while (false)
