// The shipped-data lookup: $SYNCOPATE_DATA_DIR first, else ../share/syncopate next to the
// running executable (in the build tree: links to the source folders).
#include "core/base/data_dir.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/base/check.hpp"
#include "tests/common/scratch.hpp"

namespace syncopate {
namespace {
namespace fs = std::filesystem;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_.empty() ? unsetenv(name_) : setenv(name_, old_.c_str(), 1); }

 private:
  const char* name_;
  std::string old_;
};

TEST(DataDir, NextToTheExecutableFindsTheShippedFiles) {
  unsetenv("SYNCOPATE_DATA_DIR");
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  EXPECT_EQ(fs::path(data_dir()), (exe.parent_path() / "../share/syncopate").lexically_normal());
  const fs::path mlp = find_scenario("fmnist-mlp");
  EXPECT_EQ(mlp.filename(), "fmnist-mlp.toml");
  EXPECT_TRUE(fs::exists(mlp));
  EXPECT_TRUE(fs::exists(fs::path(data_path("platforms")) / "mn5-acc.toml"));
}

TEST(DataDir, TheEnvironmentWinsAndPathsPassThrough) {
  const fs::path dir = scratch_folder("data-dir");
  fs::create_directories(dir / "scenarios");
  std::ofstream(dir / "scenarios" / "mine.toml") << "name = \"mine\"\n";
  {
    const ScopedEnv env("SYNCOPATE_DATA_DIR", dir.string());
    EXPECT_EQ(data_dir(), dir.string());
    EXPECT_EQ(find_scenario("mine"), (dir / "scenarios" / "mine.toml").string());
    EXPECT_EQ(find_scenario("some/where.toml"), "some/where.toml");  // a path: unchanged
    try {
      find_scenario("fmnist-mlp");  // not in this data folder
      FAIL() << "an unknown scenario name was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("shipped: mine"), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
  const ScopedEnv gone("SYNCOPATE_DATA_DIR", dir.string());
  EXPECT_THROW(data_dir(), UserError);
}

}  // namespace
}  // namespace syncopate
