// The shipped-data lookup: $SYNCOPATE_DATA_DIR, else ../share/syncopate next to the executable.
#include "core/base/data_dir.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate {
namespace fs = std::filesystem;

std::string data_dir() {
  if (const char* dir = std::getenv("SYNCOPATE_DATA_DIR"); dir != nullptr && *dir != '\0') {
    if (!fs::is_directory(dir)) {
      throw UserError(std::string("SYNCOPATE_DATA_DIR=") + dir + ": no such folder");
    }
    return dir;
  }
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) throw UserError("cannot read /proc/self/exe: " + error.message());
  const fs::path dir = (exe.parent_path() / ".." / "share" / "syncopate").lexically_normal();
  if (!fs::is_directory(dir)) {
    throw UserError("no data folder: " + dir.string() +
                    " does not exist (an installed syncopate has <prefix>/share/syncopate next "
                    "to <prefix>/bin); set SYNCOPATE_DATA_DIR to the folder holding platforms/ "
                    "and scenarios/");
  }
  return dir.string();
}

std::string data_path(const std::string& folder) {
  return (fs::path(data_dir()) / folder).string();
}

std::string find_scenario(const std::string& name_or_path) {
  const fs::path given(name_or_path);
  if (given.has_parent_path() || given.has_extension() || fs::exists(given)) return name_or_path;
  const fs::path folder = data_path("scenarios");
  const fs::path file = folder / (name_or_path + ".toml");
  if (fs::exists(file)) return file.string();
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  std::string allowed;
  for (const auto& n : names) allowed += (allowed.empty() ? "" : ", ") + n;
  throw UserError("scenario '" + name_or_path +
                  "': no such file, and no shipped scenario of that " + "name in " +
                  folder.string() + " (shipped: " + allowed + ")");
}

}  // namespace syncopate
