#pragma once
// The median and the 10th and 90th percentiles of repeated measurements.
#include <algorithm>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate::app {

struct Spread {
  double median = 0, p10 = 0, p90 = 0;
  size_t n = 0;
};

inline Spread spread(std::vector<double> v) {
  SYNC_CHECK(!v.empty(), "no samples");
  std::ranges::sort(v);
  auto at = [&](double q) {
    return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
  };
  const size_t m = v.size() / 2;
  const double median = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  return {median, at(0.1), at(0.9), v.size()};
}

}  // namespace syncopate::app
