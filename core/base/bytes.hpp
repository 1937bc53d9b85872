#pragma once
// A little-endian byte stream of numbers, vectors and strings (checkpoints), and its reader.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate {

class ByteWriter {
 public:
  template <typename T>
  requires std::is_arithmetic_v<T>
  void put(T value) {
    const auto* p = reinterpret_cast<const char*>(&value);
    bytes_.append(p, sizeof(T));
  }
  template <typename T>
  void put_span(std::span<const T> values) {
    put<uint64_t>(values.size());
    bytes_.append(reinterpret_cast<const char*>(values.data()), values.size_bytes());
  }
  void put_string(std::string_view text) {
    put<uint64_t>(text.size());
    bytes_.append(text);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Reads what a ByteWriter wrote; reading past the end throws UserError naming `what`.
class ByteReader {
 public:
  ByteReader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  template <typename T>
  requires std::is_arithmetic_v<T> T get() {
    T value{};
    std::memcpy(&value, take(sizeof(T)).data(), sizeof(T));
    return value;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const auto n = get<uint64_t>();
    if (n > bytes_.size() / sizeof(T)) fail();
    std::vector<T> values(n);
    const std::string_view raw = take(n * sizeof(T));
    if (n > 0) std::memcpy(values.data(), raw.data(), raw.size());
    return values;
  }
  // Fills `out`, whose size must be the stored one.
  template <typename T>
  void get_into(std::span<T> out) {
    const std::vector<T> values = get_vector<T>();
    if (values.size() != out.size())
      throw UserError(what_ + ": holds " + std::to_string(values.size()) + " values where " +
                      std::to_string(out.size()) + " are expected");
    std::copy(values.begin(), values.end(), out.begin());
  }
  std::string get_string() {
    const auto n = get<uint64_t>();
    return std::string(take(n));
  }
  bool done() const { return bytes_.empty(); }

 private:
  std::string_view take(size_t n) {
    if (n > bytes_.size()) fail();
    const std::string_view out = bytes_.substr(0, n);
    bytes_.remove_prefix(n);
    return out;
  }
  [[noreturn]] void fail() const { throw UserError(what_ + ": truncated (ends inside a record)"); }

  std::string_view bytes_;
  std::string what_;
};

}  // namespace syncopate
