// Replays the fuzz corpora (tests/fuzz/corpus/<target>/: seeds and the reproducers of every
// crash found) through the targets' entry functions in the ordinary build: each input must end
// accepted or as a UserError, never as another exception or a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tests/fuzz/fuzz_targets.hpp"

namespace syncopate::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> corpus_files(const std::string& target) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(SYNCOPATE_SOURCE_DIR) / "tests" /
                                                  "fuzz" / "corpus" / target))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Replay : public ::testing::TestWithParam<std::string> {};

TEST_P(Replay, EveryInputEndsAcceptedOrAsUserError) {
  const Entry entry = entry_of(GetParam());
  ASSERT_NE(entry, nullptr);
  const std::vector<fs::path> files = corpus_files(GetParam());
  ASSERT_FALSE(files.empty()) << "no corpus for " << GetParam();
  int accepted = 0;
  for (const fs::path& file : files) {
    const std::vector<uint8_t> input = bytes_of(file);
    Outcome outcome;
    EXPECT_NO_THROW(outcome = entry(input)) << file;
    accepted += outcome.empty() ? 1 : 0;
  }
  // The seeds include valid files: a reader that refuses everything fails here.
  EXPECT_GT(accepted, 0) << GetParam() << ": no input of the corpus was accepted";
}

INSTANTIATE_TEST_SUITE_P(Corpus, Replay,
                         ::testing::Values("scenario", "platform_recipe", "simgrid_xml", "idx",
                                           "csv", "checkpoint"));

}  // namespace
}  // namespace syncopate::fuzz
