#pragma once
// The contract checks' failure messages (tests/contract/communicator_contract.hpp) as test
// failures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace syncopate::contract {

inline void expect_no_failures(const std::vector<std::string>& failures) {
  for (const std::string& failure : failures) ADD_FAILURE() << failure;
  EXPECT_TRUE(failures.empty());
}

}  // namespace syncopate::contract
