// The fuzz targets' entry functions (see fuzz_targets.hpp).
#include "tests/fuzz/fuzz_targets.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "backends/sim/platform/platform.hpp"
#include "backends/sim/platform/platform_recipe.hpp"
#include "backends/sim/platform/xml_check.hpp"
#include "core/base/bytes.hpp"
#include "core/base/check.hpp"
#include "core/data/data.hpp"
#include "core/scenario/scenario.hpp"
#include "core/train/checkpoint.hpp"

namespace syncopate::fuzz {
namespace {

namespace fs = std::filesystem;

std::string text_of(std::span<const uint8_t> input) {
  return std::string(reinterpret_cast<const char*>(input.data()), input.size());
}

// The text before the line `marker`, and the lines after it.
std::pair<std::string, std::vector<std::string>> split_at(const std::string& text,
                                                          const std::string& marker) {
  const size_t at = text.find("\n" + marker + "\n");
  if (at == std::string::npos) return {text, {}};
  std::vector<std::string> lines;
  size_t start = at + marker.size() + 2;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return {text.substr(0, at + 1), lines};
}

// <tmp>/syncopate-fuzz-<pid>/, removed when the fuzzer exits (at -max_total_time; a crash keeps
// it, and a forked child never removes its parent's).
const fs::path& scratch_dir() {
  struct Dir {
    fs::path path = fs::temp_directory_path() / ("syncopate-fuzz-" + std::to_string(getpid()));
    pid_t owner = getpid();
    ~Dir() {
      std::error_code ignored;
      if (getpid() == owner) fs::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// `content` written to scratch_dir()/<name>; returns the path.
std::string scratch_file(const std::string& name, const std::string& content) {
  fs::create_directories(scratch_dir());
  const fs::path path = scratch_dir() / name;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) throw std::runtime_error("cannot write " + path.string());
  const size_t written = std::fwrite(content.data(), 1, content.size(), file);
  std::fclose(file);
  if (written != content.size()) throw std::runtime_error("cannot write " + path.string());
  return path.string();
}

// Runs `read`; a UserError is the accepted outcome of a bad input.
template <typename Read>
Outcome outcome_of(Read read) {
  try {
    read();
    return "";
  } catch (const UserError& error) {
    return error.what();
  }
}

// Loads an XML platform that check_simgrid_xml accepted in a child (SimGrid cannot be reset,
// and it aborts on what it cannot handle); throws if the child died of a signal.
void load_in_child(const std::string& path) {
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    if (std::getenv("SYNCOPATE_FUZZ_VERBOSE") == nullptr) std::freopen("/dev/null", "w", stderr);
    alarm(60);
    int code = 0;
    try {
      sim::EngineArgs args("fuzz", "critical");
      simgrid::s4u::Engine engine(args.argc(), args.argv());
      sim::configure_engine(engine);
      const sim::Platform platform = sim::load_platform(engine, path, {}, 1);
      const size_t n = std::min<size_t>(platform.gpus.size(), 16);
      for (size_t a = 0; a < n; ++a)
        for (size_t b = 0; b < n; ++b)  // as the run does: between distinct hosts
          if (a != b) sim::route_model(platform.gpus[a], platform.gpus[b]);
      if (platform.master != nullptr) sim::route_model(platform.gpus[0], platform.master);
    } catch (const UserError&) {
      code = 1;
    } catch (const std::exception&) {
      code = 2;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (WIFSIGNALED(status))
    throw std::logic_error("SimGrid died of signal " + std::to_string(WTERMSIG(status)) +
                           " on a platform that check_simgrid_xml accepted");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
    throw std::logic_error(
        "loading a platform that check_simgrid_xml accepted threw an error "
        "other than UserError");
}

// A worker's checkpoint file around `payload`, of `scenario` and with the right CRC-32: the
// payload's reader is reached (checkpoint.hpp).
std::string framed_checkpoint(std::string_view payload, const Scenario& scenario) {
  ByteWriter w;
  w.put<uint32_t>(kCheckpointVersion);
  w.put<uint64_t>(scenario_hash(scenario));
  w.put<uint64_t>(payload.size());
  std::string bytes = "SYNCCKPT" + w.bytes() + std::string(payload);
  const auto crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0),
                                               reinterpret_cast<const Bytef*>(bytes.data()),
                                               static_cast<uInt>(bytes.size())));
  bytes.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  return bytes;
}

void write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) throw std::runtime_error("cannot write " + path.string());
  const size_t written = std::fwrite(content.data(), 1, content.size(), file);
  std::fclose(file);
  if (written != content.size()) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

Outcome scenario(std::span<const uint8_t> input) {
  const auto parts = split_at(text_of(input), "### --set");  // text, overrides
  return outcome_of([&] {
    const Scenario s = parse_scenario(parts.first, "fuzz.toml", parts.second);
    try {  // the resolved scenario loads back
      parse_scenario(s.resolved_toml, "resolved.toml");
    } catch (const UserError& error) {
      throw std::logic_error(std::string("the resolved scenario does not load: ") + error.what());
    }
  });
}

Outcome platform_recipe(std::span<const uint8_t> input) {
  const auto parts = split_at(text_of(input), "### overrides");  // text, override lines
  std::map<std::string, std::string> overrides;
  for (const std::string& line : parts.second) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos && eq > 0) overrides[line.substr(0, eq)] = line.substr(eq + 1);
  }
  const std::string path = scratch_file("recipe.toml", parts.first);
  return outcome_of([&] { sim::detail::parse_recipe(path, overrides); });
}

Outcome simgrid_xml(std::span<const uint8_t> input) {
  const std::string text = text_of(input);
  int64_t hosts = 0;
  Outcome outcome = outcome_of([&] { hosts = sim::detail::check_simgrid_xml(text, "fuzz.xml"); });
  // Large platforms only cost time in SimGrid; the check is what is fuzzed.
  if (outcome.empty() && hosts <= 256) load_in_child(scratch_file("platform.xml", text));
  return outcome;
}

Outcome idx(std::span<const uint8_t> input) {
  const std::string path = scratch_file("input.idx", text_of(input));
  return outcome_of([&] { read_idx(path); });
}

Outcome csv(std::span<const uint8_t> input) {
  const std::string text = text_of(input);
  const size_t newline = text.find('\n');
  std::vector<std::string> targets;
  const std::string names = text.substr(0, newline);
  for (size_t start = 0; start <= names.size();) {
    size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    targets.push_back(names.substr(start, comma - start));
    start = comma + 1;
  }
  const std::string path =
      scratch_file("input.csv", newline == std::string::npos ? "" : text.substr(newline + 1));
  return outcome_of([&] { load_csv_regression(path, targets); });
}

Outcome checkpoint(std::span<const uint8_t> input) {
  static const Scenario kScenario =
      parse_scenario(default_scenario_text(), "<fuzz>", {"workers=1"});
  if (input.empty()) return "";
  const fs::path run = scratch_dir() / "checkpoint-run";
  fs::remove_all(run);
  const std::string rest = text_of(input.subspan(1));
  constexpr std::string_view kRecord = "SYNC|REC";
  switch (input[0] % 4) {
    case 0:
      write_file(checkpoint_path(run.string(), 0), framed_checkpoint(rest, kScenario));
      break;
    case 1:
      write_file(checkpoint_path(run.string(), 0), rest);
      break;
    case 2: {
      ByteWriter header;
      header.put<uint32_t>(kCheckpointSetVersion);
      std::string set = "SYNCCSET" + header.bytes();
      for (size_t start = 0; start <= rest.size();) {
        size_t end = rest.find(kRecord, start);
        if (end == std::string::npos) end = rest.size();
        const std::string record =
            framed_checkpoint(std::string_view(rest).substr(start, end - start), kScenario);
        ByteWriter length;
        length.put<uint64_t>(record.size());
        set += length.bytes() + record;
        start = end + kRecord.size();
      }
      write_file(checkpoint_set_path(run.string()), set);
      break;
    }
    default:
      write_file(checkpoint_set_path(run.string()), rest);
  }
  return outcome_of([&] { read_resume_set(run.string(), kScenario); });
}

Entry entry_of(std::string_view target) {
  static const std::map<std::string_view, Entry> kEntries = {{"scenario", scenario},
                                                             {"platform_recipe", platform_recipe},
                                                             {"simgrid_xml", simgrid_xml},
                                                             {"idx", idx},
                                                             {"csv", csv},
                                                             {"checkpoint", checkpoint}};
  const auto found = kEntries.find(target);
  return found == kEntries.end() ? nullptr : found->second;
}

}  // namespace syncopate::fuzz
