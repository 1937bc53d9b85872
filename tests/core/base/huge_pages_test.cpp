// advise_huge_pages: the contents survive, and a reported collapse shows in /proc/self/smaps.
#include "core/base/huge_pages.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace syncopate {
namespace {

// AnonHugePages (bytes) of the mapping of /proc/self/smaps that holds `address`; -1 if none.
int64_t anon_huge_bytes_at(const void* address) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0)
      return std::stoll(line.substr(14)) * 1024;  // "AnonHugePages:  4096 kB"
  }
  return -1;
}

TEST(HugePages, KeepTheContentsAndShowInSmapsWhenCollapsed) {
  const size_t n = size_t{12} << 20 >> 2;  // 12 MiB of floats: at least 4 whole huge pages
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i % 1000003) * 0.5f;
  const bool collapsed = advise_huge_pages(data.data(), n * sizeof(float));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(data[i], static_cast<float>(i % 1000003) * 0.5f) << i;
  const int64_t huge = anon_huge_bytes_at(data.data() + n / 2);
  ASSERT_GE(huge, 0) << "the buffer's mapping is not in /proc/self/smaps";
  if (collapsed) {
    EXPECT_GE(huge, int64_t{8} << 20);  // the 4 whole 2 MiB pages inside, or more
  }
  // Less than one whole huge page, or nothing at all: nothing to collapse.
  EXPECT_FALSE(advise_huge_pages(data.data(), size_t{1} << 20));
  EXPECT_FALSE(advise_huge_pages(nullptr, n * sizeof(float)));
}

}  // namespace
}  // namespace syncopate
