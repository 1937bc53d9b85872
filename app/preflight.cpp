// Checks made before training starts: the run directory, the model against the data.
#include "app/preflight.hpp"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/base/check.hpp"
#include "core/nn/model.hpp"

namespace syncopate::app {
namespace {

namespace fs = std::filesystem;

// Room the run directory may add to its last name: "-NN" for a fresh name, ".partial".
constexpr size_t kSuffixRoom = 16;

std::string dims_text(const Shape& shape) {
  std::string out;
  for (const int64_t d : shape) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
}

}  // namespace

void check_run_dir(const std::string& dir, const std::string& what) {
  const fs::path path = fs::absolute(fs::path(dir));
  if (path.string().size() + kSuffixRoom >= PATH_MAX)
    throw UserError(what + " " + dir + ": the path is " + std::to_string(path.string().size()) +
                    " characters; the file system allows " + std::to_string(PATH_MAX - 1));
  for (const fs::path& part : path) {
    if (part.string().size() + kSuffixRoom > NAME_MAX)
      throw UserError(what + " " + dir + ": the name '" + part.string().substr(0, 32) + "...' is " +
                      std::to_string(part.string().size()) + " characters; at most " +
                      std::to_string(NAME_MAX - kSuffixRoom) + " are allowed");
  }
  fs::path existing = path.parent_path();
  std::error_code error;
  while (!fs::exists(existing, error) && existing.has_parent_path() &&
         existing != existing.parent_path())
    existing = existing.parent_path();
  if (!fs::is_directory(existing, error))
    throw UserError(what + " " + dir + ": " + existing.string() +
                    " is a file, not a folder: the run directory cannot be made under it");
  if (access(existing.c_str(), W_OK | X_OK) != 0)
    throw UserError(what + " " + dir + ": " + existing.string() +
                    " is not writable: " + std::strerror(errno));
}

void check_model_and_data(const Scenario& s) {
  if (s.backend == BackendKind::kSim && s.sim.mode == SimMode::kCostOnly) return;
  const auto model = make_model(s.model.name, Storage::kShapeOnly);
  const Shape& sample = model->sample_shape();
  const std::string real_run =
      s.backend == BackendKind::kSim
          ? "sim.mode is \"emulation\""
          : "backend \"" + std::string(to_string(s.backend)) + "\" trains for real";
  if (s.data.dataset == DatasetKind::kFashionMnist && sample != Shape{1, 28, 28})
    throw UserError(s.source + ": model.name: " + s.model.name + " takes samples of " +
                    dims_text(sample) + ", data.dataset = \"fashion-mnist\" has 1x28x28 (" +
                    real_run +
                    "); run it cost-only (backend = \"sim\", sim.mode = "
                    "\"cost_only\") or on a synthetic dataset");
  if (s.data.dataset != DatasetKind::kSynthetic &&
      s.data.dataset != DatasetKind::kSyntheticRegression)
    return;
  const double n = static_cast<double>(s.data.train_samples > 0 ? s.data.train_samples : 10000);
  const double nt = s.data.test_samples > 0 ? static_cast<double>(s.data.test_samples) : n / 5;
  // One draw of train + test samples, then the two copies split from it.
  const double bytes = 2 * (n + nt) * static_cast<double>(numel(sample) + 1) * sizeof(float);
  const double memory = physical_memory_bytes();
  if (memory > 0 && bytes > memory)
    throw UserError(s.source + ": data.train_samples: " + std::to_string(int64_t(n)) +
                    " synthetic samples of " + dims_text(sample) + " floats need " +
                    std::to_string(int64_t(bytes / 1e9)) + " GB; this machine has " +
                    std::to_string(int64_t(memory / 1e9)) + " GB (" + real_run + ")");
}

}  // namespace syncopate::app
