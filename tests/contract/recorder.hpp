#pragma once
// The contract suite's record of failures: one rank's messages, never a throw.
#include <cstring>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace syncopate::contract::detail {

class Recorder {
 public:
  explicit Recorder(int rank) : rank_(rank) {}
  // Compares got[i] with want[i] bit for bit; records at most a few mismatches per check.
  void expect_equal(const std::string& what, std::span<const float> got,
                    std::span<const float> want) {
    if (got.size() != want.size()) {
      fail(what, "size " + std::to_string(got.size()) + " != " + std::to_string(want.size()));
      return;
    }
    int shown = 0;
    for (size_t i = 0; i < got.size() && shown < 3; ++i)
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
        std::ostringstream out;
        out << "[" << i << "] = " << got[i] << ", expected " << want[i];
        fail(what, out.str());
        ++shown;
      }
  }
  void expect(bool ok, const std::string& what, const std::string& detail_text) {
    if (!ok) fail(what, detail_text);
  }
  std::vector<std::string> take() { return std::move(failures_); }

 private:
  void fail(const std::string& what, const std::string& detail_text) {
    failures_.push_back("rank " + std::to_string(rank_) + ": " + what + ": " + detail_text);
  }
  int rank_;
  std::vector<std::string> failures_;
};

}  // namespace syncopate::contract::detail
