// The SYNC_CHECK failure path: an InternalError naming file, line, condition and values.
#include "core/base/check.hpp"

namespace syncopate::detail {

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  std::ostringstream out;
  out << file << ":" << line << ": check failed: " << condition;
  if (!message.empty()) out << " (" << message << ")";
  throw InternalError(out.str());
}

}  // namespace syncopate::detail
