// Value rules of the config (configs/defaults/*.yaml comments) and the bad inputs of issue 14.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "core/error.h"

using daei::Config;
using daei::ConfigRule;

namespace {

std::string write_tmp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// The message of the UsageError that loading throws ("" when it loads).
std::string refusal(const std::string& file, const std::vector<std::string>& sets) {
  try {
    Config::load(file, sets);
  } catch (const daei::UsageError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(ConfigRules, EveryDefaultSatisfiesItsRuleAndEveryRuleNamesAKey) {
  const auto& rules = Config::rules();
  EXPECT_GT(rules.size(), 50u);
  auto c = Config::defaults();
  for (const auto& r : rules) EXPECT_TRUE(c.has(r.key)) << r.key << ": rule for a key without default";
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigRules, ParsesTheThreeForms) {
  auto rules = daei::parse_config_rules(
      "a:\n  b: 1      # words; range: (0, 10]\n  c: x  # one of: x|y|\"\"\n  d: n   # format: name\n"
      "  e: 3  # plain comment\n");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].key, "a.b");
  EXPECT_TRUE(rules[0].lo_open);
  EXPECT_FALSE(rules[0].hi_open);
  EXPECT_EQ(rules[0].hi, 10);
  EXPECT_EQ(rules[1].options, (std::vector<std::string>{"x", "y", ""}));
  EXPECT_EQ(rules[2].kind, ConfigRule::Kind::Name);
  EXPECT_THROW(daei::parse_config_rules("a: 1  # range: [1, x]\n"), daei::Error);
  EXPECT_THROW(daei::parse_config_rules("a: 1  # range: 1..2\n"), daei::Error);
  EXPECT_THROW(daei::parse_config_rules("a: 1  # format: path\n"), daei::Error);
}

// Issue 14, "Config values": each of these is one usage error naming the key.
TEST(ConfigRules, IssueCasesAreRefusedNamingTheKey) {
  struct Case {
    std::string set, key;
  } cases[] = {
      {"stage1.batch_size=0", "stage1.batch_size"}, {"train.log_every=0", "train.log_every"},
      {"stage1.lr=-1", "stage1.lr"},                {"stage1.steps=-5", "stage1.steps"},
      {"stage1.steps=0", "stage1.steps"},           {"corpus.test_size=-5", "corpus.test_size"},
      {"log.level=loud", "log.level"},              {"server.port=70000", "server.port"},
      {"server.port=-1", "server.port"},            {"train.threads=0", "train.threads"},
      {"embedder.sigma=-0.1", "embedder.sigma"},    {"run.name=../../x", "run.name"},
      {"run.name=..", "run.name"},                  {"run.name=a/b", "run.name"},
      {"run.name=", "run.name"},                    {"dae.hidden=1000000000", "dae.hidden"},
      {"cache.dtype=float64", "cache.dtype"},       {"dae.dropout=1.0", "dae.dropout"},
      {"stage1.lr=.nan", "stage1.lr"},             {"stage1.lr=nan", "stage1.lr"},
      {"stage1.lr=inf", "stage1.lr"},
  };
  for (const auto& c : cases) {
    std::string m = refusal("", {c.set});
    EXPECT_TRUE(has(m, "'" + c.key + "'")) << c.set << " -> '" << m << "'";
    EXPECT_TRUE(has(m, "--set " + c.key)) << c.set << " -> the source is named: '" << m << "'";
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_TRUE(has(refusal("", {"server.port=70000"}), "out of range [0, 65535]"));
  EXPECT_TRUE(has(refusal("", {"log.level=loud"}), "must be one of trace, debug, info, warn, error"));
  // Boundaries that are allowed.
  for (std::string ok : {"server.port=0", "server.port=65535", "stage1.steps=1", "embedder.sigma=0",
                         "corpus.test_size=0", "run.name=my-run.2", "log.level=warn", "embedder.preset=\"\""})
    EXPECT_EQ(refusal("", {ok}), "") << ok;
}

// Issue 22's new keys (pretrain.*, stage2.wiener_inverter): each range is enforced, its boundaries allowed.
TEST(ConfigRules, PretrainAndWienerKeysHaveTheirRanges) {
  for (std::string bad : {"pretrain.noise_density=0", "pretrain.noise_density=1", "pretrain.mean_span_length=0.5",
                          "pretrain.sentinels=0", "pretrain.sentinels=5000", "pretrain.max_length=1",
                          "pretrain.steps=0", "pretrain.batch_size=0", "pretrain.lr=0", "pretrain.schedule=cosine",
                          "pretrain.enabled=maybe", "stage2.wiener_inverter=2"}) {
    const std::string key = bad.substr(0, bad.find('='));
    EXPECT_TRUE(has(refusal("", {bad}), "'" + key + "'")) << bad << " -> '" << refusal("", {bad}) << "'";
  }
  for (std::string ok : {"pretrain.noise_density=0.5", "pretrain.mean_span_length=1", "pretrain.sentinels=1",
                         "pretrain.sentinels=4096", "pretrain.max_length=2", "pretrain.enabled=true",
                         "pretrain.schedule=linear", "stage2.wiener_inverter=true"})
    EXPECT_EQ(refusal("", {ok}), "") << ok;
}

TEST(ConfigRules, FileValuesAreCheckedAndTheFileIsNamed) {
  auto f = write_tmp("rules_bad.yaml", "stage1:\n  batch_size: 0\n");
  std::string m = refusal(f, {});
  EXPECT_TRUE(has(m, f)) << m;
  EXPECT_TRUE(has(m, "'stage1.batch_size' = 0 is out of range [1, inf)")) << m;
  // A later --set that repairs the value wins: only the resolved config is checked.
  EXPECT_EQ(refusal(f, {"stage1.batch_size=8"}), "");
}

TEST(ConfigRules, DuplicateKeyIsRefused) {
  auto f = write_tmp("rules_dup.yaml", "stage1:\n  lr: 0.1\n  lr: 0.2\n");
  std::string m = refusal(f, {});
  EXPECT_TRUE(has(m, "duplicate config key 'stage1.lr'")) << m;
  EXPECT_TRUE(has(m, f)) << m;
  auto g = write_tmp("rules_dup2.yaml", "run:\n  seed: 1\nrun:\n  name: x\n");
  EXPECT_TRUE(has(refusal(g, {}), "duplicate config key 'run'"));
  EXPECT_TRUE(has(refusal("", {"run={seed: 1, seed: 2}"}), "duplicate config key 'run.seed'"));
}

TEST(ConfigRules, DirectoryAsConfigIsOneLine) {
  auto d = ::testing::TempDir() + "rules_dir";
  std::filesystem::create_directories(d);
  std::string m = refusal(d, {});
  EXPECT_TRUE(has(m, "is a directory")) << m;
}

TEST(ConfigRules, NonScalarKeyIsRefused) {
  auto f = write_tmp("rules_complex.yaml", "? [a, b]\n: 1\n");
  EXPECT_NE(refusal(f, {}), "");
}
