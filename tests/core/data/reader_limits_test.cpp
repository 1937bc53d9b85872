// The IDX and CSV readers on inputs that used to cost too much or crash: a gzip that inflates far
// beyond what its header declares (refused while streaming, within bounded memory), values too
// large for float, a directory given as the file.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/data/data.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/user_error.hpp"

namespace syncopate {
namespace {

namespace fs = std::filesystem;

fs::path scratch() { return scratch_folder("reader-limits"); }

long max_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(ReaderLimits, GzipBombIsRefusedAgainstTheHeaderWhileStreaming) {
  // Declares 4 data bytes, then inflates to 256 MiB more (256 KiB compressed).
  const std::string path = (scratch() / "bomb.idx.gz").string();
  gzFile file = gzopen(path.c_str(), "wb9");
  ASSERT_NE(file, nullptr);
  const std::vector<uint8_t> header = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4};
  ASSERT_EQ(gzwrite(file, header.data(), static_cast<unsigned>(header.size())), 12);
  const std::vector<uint8_t> zeros(1 << 20, 0);
  for (int i = 0; i < 256; ++i)
    ASSERT_EQ(gzwrite(file, zeros.data(), static_cast<unsigned>(zeros.size())), 1 << 20);
  gzclose(file);
  const long before = max_rss_kib();
  const std::string msg = error_of([&] { read_idx(path); });
  EXPECT_TRUE(
      has(msg, path + ": byte offset 12: more than 1048576 unexpected bytes after the data"))
      << msg;
  // Reading all of it would have cost more than 256 MiB.
  EXPECT_LT(max_rss_kib() - before, 64 * 1024) << "KiB of peak memory grew";
}

TEST(ReaderLimits, IdxTruncatedDataIsNotAllocatedFromTheHeader) {
  // Declares 32768 x 4096 bytes (128 MiB) and holds 3: no memory is reserved by the header.
  const std::string path = (scratch() / "huge.idx").string();
  std::ofstream(path, std::ios::binary)
      .write("\0\0\x08\x02\x00\x00\x80\x00\x00\x00\x10\x00\1\2\3", 15);
  const std::string msg = error_of([&] { read_idx(path); });
  EXPECT_TRUE(has(msg, path + ": byte offset 15: truncated")) << msg;
}

TEST(ReaderLimits, IdxDimensionsWhoseProductOverflowsAreRefused) {
  // Found by fuzzing: 0xfc0000fe x 0xfffffffd overflowed int64 before the 2^40 check.
  const std::string path = (scratch() / "dims.idx").string();
  std::ofstream(path, std::ios::binary)
      .write("\0\0\x08\x03\xfc\0\0\xfe\xff\xff\xff\xfd\0\0\x04\x03", 16);
  const std::string msg = error_of([&] { read_idx(path); });
  EXPECT_TRUE(has(msg, path + ": byte offset 8: declared dimensions exceed 2^40 elements")) << msg;
}

TEST(ReaderLimits, CsvValuesTooLargeForFloatAndDirectories) {
  const std::string path = (scratch() / "big.csv").string();
  std::ofstream(path) << "x,y\n1,2\n1e300,3\n";
  std::string msg = error_of([&] { load_csv_regression(path, {"y"}); });
  EXPECT_TRUE(has(msg, path + ":3: row 2, column 'x' (1): '1e300' is too large for float")) << msg;
  msg = error_of([&] { load_csv_regression(scratch().string(), {"y"}); });
  EXPECT_TRUE(has(msg, scratch().string() + ": CSV file not found (or not a regular file)")) << msg;
  msg = error_of([&] { read_idx(scratch().string()); });
  EXPECT_TRUE(has(msg, "not a regular file")) << msg;
}

}  // namespace
}  // namespace syncopate
