// release_pages, clear_pages and resident_bytes against the kernel: pages given back leave the
// resident bytes, read as zeros and come back when written; the partial pages at the ends are
// kept (release_pages) or written with zeros (clear_pages).
#include "core/base/resident_pages.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace syncopate {
namespace {

TEST(ResidentPages, ReleasedPagesLeaveTheResidentBytesAndReadAsZeros) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n = 64 * page / sizeof(float);
  std::vector<float> data(n, 1.5f);
  const size_t all = n * sizeof(float);
  ASSERT_EQ(resident_bytes(data.data(), all), all);

  // From a float inside the fifth page to one inside the 41st: the whole pages between go.
  const uintptr_t base = reinterpret_cast<uintptr_t>(data.data());
  const size_t from = (4 * page + 100) / sizeof(float), to = (40 * page + 100) / sizeof(float);
  const uintptr_t first = (base + from * sizeof(float) + page - 1) / page * page;
  const uintptr_t last = (base + to * sizeof(float)) / page * page;
  const size_t released = release_pages(data.data() + from, (to - from) * sizeof(float));
  ASSERT_EQ(released, last - first);
  ASSERT_GE(released, 35 * page);
  EXPECT_EQ(resident_bytes(data.data(), all), all - released);
  EXPECT_EQ(resident_bytes(reinterpret_cast<const void*>(first), released), 0u);

  // Outside the whole pages the values are kept; inside they read as zeros.
  for (size_t i = 0; i < n; ++i) {
    const uintptr_t at = base + i * sizeof(float);
    ASSERT_EQ(data[i], at >= first && at < last ? 0.0f : 1.5f) << i;
  }
  // The reads above mapped the kernel's page of zeros: resident again. So are writes.
  EXPECT_EQ(resident_bytes(data.data(), all), all);
  release_pages(data.data() + from, (to - from) * sizeof(float));
  data[from + page / sizeof(float)] = 2.0f;
  EXPECT_EQ(resident_bytes(data.data(), all), all - released + page);
}

TEST(ResidentPages, RangesWithoutAWholePageReleaseNothing) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<float> data(4 * page / sizeof(float), 3.0f);
  // Less than a page, however placed, and a null or empty range.
  EXPECT_EQ(release_pages(data.data() + 1, page - 2 * sizeof(float)), 0u);
  EXPECT_EQ(release_pages(nullptr, 4 * page), 0u);
  EXPECT_EQ(release_pages(data.data(), 0), 0u);
  for (float v : data) ASSERT_EQ(v, 3.0f);
  EXPECT_EQ(resident_bytes(data.data(), 0), 0u);
  // A part of a resident page counts for the bytes in range only.
  EXPECT_EQ(resident_bytes(data.data() + 3, 40), 40u);
}

// clear_pages zeroes exactly its range: the whole pages inside go back, the partial ones at the
// ends are written; the values around the range are kept. A range inside one page is written.
TEST(ResidentPages, ClearedRangesReadAsZerosAndKeepOnlyTheirPartialPages) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n = 16 * page / sizeof(float);
  std::vector<float> data(n, 2.5f);
  const size_t all = n * sizeof(float);
  const size_t from = (2 * page + 12) / sizeof(float), to = (10 * page + 40) / sizeof(float);
  clear_pages(data.data() + from, (to - from) * sizeof(float));
  // At most the two partial pages of the range stay in memory, and at least 7 of its pages go.
  EXPECT_LE(resident_bytes(data.data(), all), all - 7 * page);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(data[i], i >= from && i < to ? 0.0f : 2.5f) << i;

  std::vector<float> small(8, 4.0f);
  clear_pages(small.data() + 2, 3 * sizeof(float));
  EXPECT_EQ(small, (std::vector<float>{4, 4, 0, 0, 0, 4, 4, 4}));
  clear_pages(nullptr, 64);  // nothing to do
}

}  // namespace
}  // namespace syncopate
