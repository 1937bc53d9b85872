#pragma once
// Tests: two runs' metrics rows agree field by field (everything but the time columns).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/train/recorder.hpp"

namespace syncopate {

inline void expect_same_training_rows(const std::vector<EpochMetrics>& x,
                                      const std::vector<EpochMetrics>& y) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    EXPECT_EQ(x[i].worker, y[i].worker);
    EXPECT_EQ(x[i].epoch, y[i].epoch);
    EXPECT_EQ(x[i].train_loss, y[i].train_loss);
    EXPECT_EQ(x[i].train_accuracy, y[i].train_accuracy);
    EXPECT_EQ(x[i].test_accuracy, y[i].test_accuracy);
    EXPECT_EQ(x[i].lr, y[i].lr);
    EXPECT_EQ(x[i].bytes_sent, y[i].bytes_sent);
    EXPECT_EQ(x[i].bytes_recv, y[i].bytes_recv);
  }
}

}  // namespace syncopate
