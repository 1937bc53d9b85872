// TomlReader: typed look-ups, positions in errors, overrides, and the refusal of unread keys.
#include "core/scenario/toml_reader.hpp"

#include <gtest/gtest.h>

#include "core/base/check.hpp"
#include "tests/common/user_error.hpp"

namespace syncopate {
namespace {

constexpr const char* kText = "top = 1\n[a]\nn = 2\nx = 0.5\n[a.map]\nanything = \"goes\"\n";

TEST(TomlReader, ReadsTypedValuesWithFallbacks) {
  TomlReader r(parse_toml_text(kText, "f.toml"), "f.toml");
  EXPECT_EQ(r.integer("top", std::nullopt, 0, 10), 1);
  EXPECT_DOUBLE_EQ(r.number("a.x", std::nullopt, 0, 1), 0.5);
  EXPECT_DOUBLE_EQ(r.number("a.n", std::nullopt, 0, 10), 2.0);  // an integer is a number
  EXPECT_EQ(r.string("a.absent", "fallback"), "fallback");
  EXPECT_TRUE(r.table("a.map") != nullptr);
  EXPECT_NO_THROW(r.check_all_used());
}

TEST(TomlReader, ErrorsNameFileLineAndKey) {
  TomlReader r(parse_toml_text(kText, "f.toml"), "f.toml");
  EXPECT_EQ(error_of([&] { r.integer("a.n", std::nullopt, 5, 10); }),
            "f.toml:3: a.n: 2 is out of range; allowed: 5 to 10");
  EXPECT_EQ(error_of([&] { r.boolean("a.x", std::nullopt); }),
            "f.toml:4: a.x: expected true or false, got floating-point");
  // An absent key: the line of the nearest table above it.
  EXPECT_EQ(error_of([&] { r.string("a.name", std::nullopt); }),
            "f.toml:2: a.name: required key is missing");
}

TEST(TomlReader, RefusesWhatNothingRead) {
  TomlReader r(parse_toml_text(kText, "f.toml"), "f.toml");
  r.integer("top", std::nullopt, 0, 10);
  r.integer("a.n", std::nullopt, 0, 10);
  r.table("a.map");
  const std::string e = error_of([&] { r.check_all_used(); });
  EXPECT_EQ(e.rfind("f.toml:4: a.x: unknown key", 0), 0u) << e;
  EXPECT_NE(e.find("known here: a.map, a.n"), std::string::npos) << e;  // asked for nearby
}

TEST(TomlReader, OverridesAreTomlValuesNamedInErrors) {
  TomlReader r(parse_toml_text(kText, "f.toml"), "f.toml");
  r.add_override("a.n", "7", "--set a.n=7: a.n");
  r.add_override("a.word", "bare", "--set a.word=bare: a.word");
  r.add_override("b.new", "3", "--set b.new=3: b.new");
  EXPECT_EQ(r.integer("a.n", std::nullopt, 0, 10), 7);
  EXPECT_EQ(r.string("a.word", std::nullopt), "bare");  // a bare word is a string
  EXPECT_TRUE(r.overridden("a.n"));
  EXPECT_EQ(error_of([&] { r.integer("a.n", std::nullopt, 8, 10); }),
            "--set a.n=7: a.n: 7 is out of range; allowed: 8 to 10");
  r.number("a.x", std::nullopt, 0, 1);
  r.node("top");
  r.table("a.map");
  EXPECT_EQ(error_of([&] { r.check_all_used(); }).rfind("--set b.new=3: b.new: unknown", 0), 0u);
  EXPECT_EQ(error_of([&] { r.add_override("top.x", "1", "--set top.x=1"); }),
            "--set top.x=1: top is not a table");
}

}  // namespace
}  // namespace syncopate
