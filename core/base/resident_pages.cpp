// madvise(MADV_DONTNEED) on the whole pages of a range; mincore over the pages that hold one.
#include "core/base/resident_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

uintptr_t page_size() {
  static const auto size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

size_t release_pages(void* data, size_t bytes) {
#ifdef __linux__
  const uintptr_t page = page_size();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + bytes) / page * page;
  if (data == nullptr || last <= first) return 0;
  SYNC_CHECK(madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) == 0,
             "madvise(MADV_DONTNEED) of " << last - first << " bytes failed");
  return last - first;
#else
  (void)data;
  (void)bytes;
  return 0;
#endif
}

void clear_pages(void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return;
  auto* begin = static_cast<unsigned char*>(data);
  const uintptr_t page = page_size();
  const uintptr_t address = reinterpret_cast<uintptr_t>(data);
  const size_t head = std::min<size_t>(bytes, (page - address % page) % page);
  const size_t released = release_pages(data, bytes);
  if (released == 0) {
    std::memset(begin, 0, bytes);
    return;
  }
  std::memset(begin, 0, head);
  std::memset(begin + head + released, 0, bytes - head - released);
}

size_t resident_bytes(const void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return 0;
  const uintptr_t page = page_size();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = begin + bytes;
  const uintptr_t first = begin / page * page;
  std::vector<unsigned char> present((end - first + page - 1) / page);
  SYNC_CHECK(mincore(reinterpret_cast<void*>(first), end - first, present.data()) == 0,
             "mincore of " << end - first << " bytes failed");
  size_t resident = 0;
  for (size_t k = 0; k < present.size(); ++k) {
    if ((present[k] & 1) == 0) continue;
    const uintptr_t lo = std::max(begin, first + k * page);
    const uintptr_t hi = std::min(end, first + (k + 1) * page);
    resident += hi - lo;
  }
  return resident;
}

}  // namespace syncopate
