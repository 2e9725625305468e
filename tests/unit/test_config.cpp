#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

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

// A layer that gives a real key an integer (a saved run config with "naturalness: 0") or a string key a number must
// not change the key's kind for the layers after it: --set zsinvert.naturalness=0.01 was refused as "must be an
// integer" over such a file.
TEST(Config, KeysKeepTheirDeclaredKindAcrossLayers) {
  auto f = write_tmp("kinds.yaml", "zsinvert:\n  naturalness: 0\nrun:\n  name: 123\n");
  auto c = Config::load(f, {"zsinvert.naturalness=0.01", "run.name=later"});
  EXPECT_DOUBLE_EQ(c.real("zsinvert.naturalness"), 0.01);
  EXPECT_EQ(c.str("run.name"), "later");
  auto d = Config::load(f, {});
  EXPECT_DOUBLE_EQ(d.real("zsinvert.naturalness"), 0.0);
  EXPECT_EQ(d.str("run.name"), "123");
  d.set("zsinvert.naturalness=0.5", "test");
  EXPECT_DOUBLE_EQ(d.real("zsinvert.naturalness"), 0.5);
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

// A follow-up config extends the run's config with `base:` (issue 26 item 2): the base's keys, then its own.
TEST(Config, BaseFileIsMergedFirstRelativeToTheFile) {
  const std::string dir = ::testing::TempDir() + "base_chain/";
  std::filesystem::create_directories(dir + "sub");
  std::ofstream(dir + "root.yaml") << "run:\n  name: rootrun\n  seed: 5\nstage1:\n  steps: 77\n";
  std::ofstream(dir + "sub/follow.yaml") << "base: ../root.yaml\nrun:\n  seed: 6\n";
  auto c = Config::load(dir + "sub/follow.yaml", {});
  EXPECT_EQ(c.str("run.name"), "rootrun");    // from the base
  EXPECT_EQ(c.integer("stage1.steps"), 77);   // from the base
  EXPECT_EQ(c.integer("run.seed"), 6);        // the follow-up wins
  EXPECT_FALSE(c.has("base"));                // not a config key of the run
}

TEST(Config, BaseErrorsNameTheFile) {
  const std::string dir = ::testing::TempDir() + "base_bad/";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "a.yaml") << "base: b.yaml\n";
  std::ofstream(dir + "b.yaml") << "base: a.yaml\n";
  std::ofstream(dir + "missing.yaml") << "base: nowhere.yaml\n";
  std::ofstream(dir + "list.yaml") << "base: [a.yaml]\n";
  auto message = [](const std::string& f) {
    try {
      Config::load(f, {});
    } catch (const daei::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(dir + "a.yaml").find("base configs form a cycle"), std::string::npos) << message(dir + "a.yaml");
  EXPECT_NE(message(dir + "missing.yaml").find("base config 'nowhere.yaml' not found"), std::string::npos);
  EXPECT_NE(message(dir + "list.yaml").find("'base' must name a config file"), std::string::npos);
}

// configs/sigma-sweep.yaml follows the quickstart run: it resolves to the quickstart's config plus the sweep.
TEST(Config, SigmaSweepExtendsQuickstart) {
  const auto q = Config::load(DAEI_FIXTURES "/../../configs/quickstart.yaml", {});
  const auto s = Config::load(DAEI_FIXTURES "/../../configs/sigma-sweep.yaml", {});
  for (const auto& k : Config::diff(q, s)) EXPECT_EQ(k.rfind("eval.", 0), 0u) << k << " differs";
  EXPECT_TRUE(s.flag("eval.sweep"));
}

// A Config is a value (issue 68). yaml-cpp's Node copies share one tree, and its operator= redirects the tree the
// assigned handle held: before, `Config b = a; b.set(...)` set the key on `a` too, and `b = a` made every config
// that shared b's tree read a's values.
TEST(Config, CopyIsAValue) {
  const Config a = Config::load("", {"run.name=original"});
  const int64_t probes = a.integer("stage1.sure.probes");
  Config b = a;
  b.set("run.name=copy", "test");
  b.set("stage1.sure.probes=" + std::to_string(probes + 1), "test");  // a nested key
  EXPECT_EQ(b.str("run.name"), "copy");
  EXPECT_EQ(b.integer("stage1.sure.probes"), probes + 1);
  EXPECT_EQ(a.str("run.name"), "original");
  EXPECT_EQ(a.integer("stage1.sure.probes"), probes);
  EXPECT_TRUE(Config::diff(a, Config::load("", {"run.name=original"})).empty());
  // The copy's out-of-range value and its origin stay the copy's.
  b.set("stage1.sure.probes=0", "the copy's --set");
  EXPECT_THROW(b.validate(), daei::UsageError);
  EXPECT_NO_THROW(a.validate());
}

TEST(Config, CopyAssignmentIsAValue) {
  Config a = Config::load("", {"run.seed=5"});
  const Config defaults = Config::defaults();
  Config c = Config::defaults();
  Config b = c;
  b = a;
  EXPECT_EQ(b.integer("run.seed"), 5);
  EXPECT_EQ(c.integer("run.seed"), defaults.integer("run.seed"));  // c is not redirected to a's tree
  b.set("run.seed=6", "test");
  b.set("stage1.sigma.max_factor=3.5", "test");  // a nested key
  EXPECT_EQ(a.integer("run.seed"), 5);
  EXPECT_DOUBLE_EQ(a.real("stage1.sigma.max_factor"), defaults.real("stage1.sigma.max_factor"));
  EXPECT_DOUBLE_EQ(b.real("stage1.sigma.max_factor"), 3.5);
  a.set("run.seed=7", "test");  // and the original's later changes stay out of the copy
  EXPECT_EQ(b.integer("run.seed"), 6);
  EXPECT_EQ(c.integer("run.seed"), defaults.integer("run.seed"));
}

TEST(Config, MoveTakesTheTree) {
  Config a = Config::load("", {"run.name=moved"});
  Config b = std::move(a);
  EXPECT_EQ(b.str("run.name"), "moved");
  Config c = Config::defaults();
  c = std::move(b);
  EXPECT_EQ(c.str("run.name"), "moved");
  c.set("run.name=after", "test");
  EXPECT_EQ(c.str("run.name"), "after");
}
