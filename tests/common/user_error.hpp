#pragma once
// The message of the UserError that a call throws, and what it names: what the tests of refused
// input check.
#include <string>

#include "core/base/check.hpp"

namespace syncopate {

// The UserError message of f(), or "" when it does not throw one.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// Whether `text` contains `part`.
inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace syncopate
