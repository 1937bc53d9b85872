// madvise(MADV_HUGEPAGE) and madvise(MADV_COLLAPSE) on the aligned part of a buffer.
#include "core/base/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>

namespace syncopate {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
#ifdef MADV_COLLAPSE
constexpr int kCollapse = MADV_COLLAPSE;
#else
constexpr int kCollapse = 25;  // Linux 6.1's value; older headers lack it
#endif

}  // namespace

bool advise_huge_pages(const void* data, size_t bytes) {
#ifdef __linux__
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t last = (begin + bytes) / kHugePage * kHugePage;
  if (data == nullptr || last <= first) return false;
  void* range = reinterpret_cast<void*>(first);
  const size_t length = last - first;
  if (madvise(range, length, MADV_HUGEPAGE) != 0) return false;
  return madvise(range, length, kCollapse) == 0;
#else
  (void)data;
  (void)bytes;
  return false;
#endif
}

}  // namespace syncopate
