// The IDX reader: plain or gzip files, streamed and compared with the header as they inflate.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#include "core/base/check.hpp"
#include "core/data/data.hpp"

namespace syncopate {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr size_t kReadChunk = size_t{1} << 22;
constexpr int64_t kMaxTrailingCounted = int64_t{1} << 20;  // trailing bytes counted, at most

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// A plain or gzip file read in order; offsets count bytes of the uncompressed content.
class IdxStream {
 public:
  explicit IdxStream(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw UserError(path + ": file not found (or not a regular file)");
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_) throw UserError(path + ": cannot open: " + std::strerror(errno));
    // A large buffer for the large files; small ones need none (it costs 3x its size).
    const auto size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
    gzbuffer(file_.get(), static_cast<unsigned>(std::clamp<int64_t>(size, 8 << 10, 1 << 20)));
  }
  // Reads up to `n` bytes into `out`; fewer only at the end of the data.
  size_t read(uint8_t* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      const auto want = static_cast<unsigned>(std::min(n - done, kReadChunk));
      const int got = gzread(file_.get(), out + done, want);
      if (got < 0) corrupt(static_cast<int64_t>(done));
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    offset_ += static_cast<int64_t>(done);
    int code = Z_OK;
    gzerror(file_.get(), &code);
    if (code != Z_OK && code != Z_STREAM_END) corrupt(0);
    return done;
  }
  int64_t offset() const { return offset_; }

 private:
  [[noreturn]] void corrupt(int64_t pending) {
    int code = Z_OK;
    std::string message = gzerror(file_.get(), &code);
    if (message.starts_with(path_ + ": ")) message.erase(0, path_.size() + 2);
    idx_error(path_, offset_ + pending,
              "corrupt or truncated gzip data (offset counted in decompressed bytes): " + message);
  }

  std::string path_;
  GzHandle file_;
  int64_t offset_ = 0;
};

// The header's dimensions; checks the magic number.
std::vector<int64_t> read_header(IdxStream& in, const std::string& path) {
  uint8_t magic_bytes[4];
  if (in.read(magic_bytes, 4) < 4)
    idx_error(path, in.offset(),
              "truncated: the file ends inside the 4-byte header (magic number)");
  const uint32_t magic = big_endian_u32(magic_bytes);
  if (magic_bytes[0] != 0 || magic_bytes[1] != 0) {
    idx_error(path, 0,
              "bad magic number " + hex32(magic) +
                  "; expected 0x000008NN (e.g. 0x00000803 images, 0x00000801 labels)");
  }
  if (magic_bytes[2] != 0x08) {
    idx_error(path, 2,
              "unsupported data type " + hex32(magic_bytes[2]) + " in magic number " +
                  hex32(magic) + "; allowed: 0x08 (unsigned byte)");
  }
  const int ndims = magic_bytes[3];
  if (ndims == 0) idx_error(path, 3, "zero dimensions in magic number " + hex32(magic));
  std::vector<uint8_t> dim_bytes(4 * static_cast<size_t>(ndims));
  if (in.read(dim_bytes.data(), dim_bytes.size()) < dim_bytes.size()) {
    idx_error(path, in.offset(),
              "truncated: the file ends inside the header of " + std::to_string(ndims) +
                  " dimensions (" + std::to_string(4 + 4 * ndims) + " bytes)");
  }
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (int i = 0; i < ndims; ++i) {
    const int64_t dim = big_endian_u32(dim_bytes.data() + 4 * i);
    if (dim == 0) idx_error(path, 4 + 4 * i, "dimension " + std::to_string(i) + " is 0");
    if (dim > kMaxElements / count)  // count * dim > 2^40, without the overflow
      idx_error(path, 4 + 4 * i, "declared dimensions exceed 2^40 elements");
    count *= dim;
    dims.push_back(dim);
  }
  return dims;
}

}  // namespace

[[noreturn]] void idx_error(const std::string& path, int64_t offset, const std::string& what) {
  std::ostringstream out;
  out << path << ": byte offset " << offset << ": " << what;
  throw UserError(out.str());
}

std::string hex32(uint32_t v) {
  std::ostringstream out;
  out << "0x" << std::hex;
  out.width(8);
  out.fill('0');
  out << v;
  return out.str();
}

IdxFile read_idx(const std::string& path) {
  IdxStream in(path);
  IdxFile idx;
  idx.path = path;
  idx.dims = read_header(in, path);
  const int64_t header = in.offset(), count = numel(idx.dims);
  // Grown as the data arrives (not sized by the header): a short file costs what it holds.
  while (static_cast<int64_t>(idx.data.size()) < count) {
    const size_t old = idx.data.size();
    const size_t want = std::min(kReadChunk, static_cast<size_t>(count) - old);
    idx.data.resize(old + want);
    const size_t got = in.read(idx.data.data() + old, want);
    idx.data.resize(old + got);
    if (got < want) break;
  }
  if (static_cast<int64_t>(idx.data.size()) < count) {
    idx_error(path, in.offset(),
              "truncated: the dimensions " + to_string(idx.dims) + " declare " +
                  std::to_string(count) + " data bytes from offset " + std::to_string(header) +
                  " to " + std::to_string(header + count) + ", but the file ends here");
  }
  // Bytes after the data: counted up to a limit, never kept (a gzip bomb stops here).
  std::vector<uint8_t> rest(64 * 1024);
  int64_t trailing = 0;
  while (trailing <= kMaxTrailingCounted) {
    const size_t got = in.read(rest.data(), rest.size());
    trailing += static_cast<int64_t>(got);
    if (got < rest.size()) break;
  }
  if (trailing > 0) {
    const std::string how_many = trailing > kMaxTrailingCounted
                                     ? "more than " + std::to_string(kMaxTrailingCounted)
                                     : std::to_string(trailing);
    idx_error(path, header + count,
              how_many + " unexpected bytes after the data declared by the dimensions " +
                  to_string(idx.dims));
  }
  return idx;
}

}  // namespace syncopate
