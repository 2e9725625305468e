#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/config.h"
#include "core/error.h"

using daei::Config;

static std::string write_tmp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Config, DefaultsHaveRunSection) {
  auto c = Config::defaults();
  EXPECT_EQ(c.str("run.name"), "quickstart");
  EXPECT_EQ(c.integer("run.seed"), 1234);
  EXPECT_EQ(c.str("dist.backend"), "auto");
}

TEST(Config, LayeringFileThenSet) {
  auto f = write_tmp("layer.yaml", "run:\n  name: fromfile\n  seed: 7\n");
  auto c = Config::load(f, {"run.seed=9"});
  EXPECT_EQ(c.str("run.name"), "fromfile");  // file beats default
  EXPECT_EQ(c.integer("run.seed"), 9);       // --set beats file
  EXPECT_EQ(c.str("run.root"), "runs");      // untouched default
}

TEST(Config, UnknownKeyInSetNamesKeyAndSuggests) {
  try {
    Config::load("", {"run.sed=3"});
    FAIL() << "expected an error";
  } catch (const daei::UsageError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unknown config key 'run.sed'"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean 'run.seed'"), std::string::npos) << m;
    EXPECT_NE(m.find("--set"), std::string::npos) << m;
  }
}

TEST(Config, UnknownKeyInFileNamesFile) {
  auto f = write_tmp("bad.yaml", "dist:\n  bakend: mpi\n");
  try {
    Config::load(f, {});
    FAIL();
  } catch (const daei::UsageError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(f), std::string::npos) << m;
    EXPECT_NE(m.find("'dist.bakend'"), std::string::npos) << m;
    EXPECT_NE(m.find("'dist.backend'"), std::string::npos) << m;
  }
}

TEST(Config, WrongTypeIsError) {
  EXPECT_THROW(Config::load("", {"run.seed=abc"}), daei::UsageError);
  EXPECT_THROW(Config::load("", {"log.all_ranks=maybe"}), daei::UsageError);
  EXPECT_THROW(Config::load("", {"run=3"}), daei::UsageError);  // a section replaced by a scalar
  EXPECT_NO_THROW(Config::load("", {"log.all_ranks=true"}));
}

TEST(Config, IntegerAcceptedWhereNumberExpected) {
  auto c = Config::defaults();
  c.merge_yaml(YAML::Load("run: {seed: 5}"), "test");
  EXPECT_EQ(c.integer("run.seed"), 5);
}

TEST(Config, MalformedSetAndMissingFile) {
  EXPECT_THROW(Config::load("", {"noequals"}), daei::UsageError);
  EXPECT_THROW(Config::load("/nonexistent/x.yaml", {}), daei::UsageError);
}

TEST(Config, DumpRoundTripsAndDiff) {
  auto a = Config::load("", {"run.seed=42"});
  auto f = write_tmp("dump.yaml", a.dump());
  auto b = Config::load(f, {});
  EXPECT_TRUE(Config::diff(a, b).empty());
  auto c = Config::load(f, {"run.name=other"});
  auto d = Config::diff(a, c);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], "run.name");
}

TEST(Config, EditDistance) {
  EXPECT_EQ(daei::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(daei::edit_distance("", "abc"), 3u);
}

TEST(Config, ReadingAMissingKeyDoesNotAddIt) {
  auto c = Config::defaults();
  const std::string before = c.dump();
  EXPECT_FALSE(c.has("run.nosuch"));
  EXPECT_FALSE(c.has("nosuch.deeper"));
  EXPECT_EQ(c.dump(), before);
}
