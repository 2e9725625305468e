// The stage recipes' option structs (core/fields.h): each field reads its section's key with the getter of its type,
// so a struct holds what the string-key reads it replaced returned, and a key the defaults lack is refused as the
// getters refuse it.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "stages/loop/data_source.h"
#include "stages/recipes/hypotheses.h"
#include "stages/recipes/lm.h"
#include "stages/recipes/pretrain.h"
#include "stages/recipes/sentence_embedder.h"
#include "stages/recipes/shared_options.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/stage3.h"
#include "stages/recipes/stage4.h"

using namespace daei;

namespace {

// Every field of T equals what Config's getter of its type reads for `section.name`; returns how many were compared.
template <class T>
int expect_fields_match(const T& obj, const Config& cfg, const std::string& section) {
  int n = 0;
  T::fields(obj, [&](const char* name, const auto& field) {
    const std::string key = section + "." + name;
    using F = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<F, bool>)
      EXPECT_EQ(field, cfg.flag(key)) << key;
    else if constexpr (std::is_integral_v<F>)
      EXPECT_EQ(field, cfg.integer(key)) << key;
    else if constexpr (std::is_floating_point_v<F>)
      EXPECT_EQ(field, cfg.real(key)) << key;
    else if constexpr (std::is_same_v<F, std::vector<double>>)
      EXPECT_EQ(field, cfg.reals(key)) << key;
    else
      EXPECT_EQ(field, cfg.str(key)) << key;
    ++n;
  });
  return n;
}

Config config_with(const std::vector<std::string>& sets) {
  auto cfg = Config::defaults();
  for (const auto& s : sets) cfg.set(s, "test");
  return cfg;
}

}  // namespace

TEST(StageOptions, Stage1ReadsItsSectionAndSubsections) {
  const auto cfg = config_with({"stage1.eval_rows=7", "stage1.lr=0.25", "stage1.sure.divergence=fd",
                                "stage1.sure.probes=3", "stage1.sigma.mode=fixed", "stage1.sigma.assumed=0.05"});
  const auto o = Stage1Options::from_config(cfg);
  EXPECT_EQ(o.eval_rows, 7);
  EXPECT_EQ(o.lr, 0.25);
  EXPECT_EQ(o.sure.divergence, "fd");
  EXPECT_EQ(o.sure.probes, 3);
  EXPECT_EQ(o.sigma.mode, "fixed");
  EXPECT_EQ(o.sigma.assumed, 0.05);
  EXPECT_EQ(expect_fields_match(o, cfg, "stage1"), 3);
  EXPECT_EQ(expect_fields_match(o.sure, cfg, "stage1.sure"), 3);
  EXPECT_EQ(expect_fields_match(o.sigma, cfg, "stage1.sigma"), 4);
}

TEST(StageOptions, Stage4AndTheSharedSectionsReadTheirKeys) {
  const auto cfg = config_with({"stage4.warm_start=false", "stage4.warm_start_t2_t3=fresh", "stage4.lr=0.5",
                                "inverter.t5_dir=/t5", "inverter.max_length_eval=9", "inverter.token_init=true",
                                "train.heldout_rows=11"});
  const auto s4 = Stage4Options::from_config(cfg);
  EXPECT_FALSE(s4.warm_start);
  EXPECT_EQ(s4.warm_start_t2_t3, "fresh");
  EXPECT_EQ(s4.lr, 0.5);
  EXPECT_EQ(expect_fields_match(s4, cfg, "stage4"), 4);
  const auto inv = InverterOptions::from_config(cfg);
  EXPECT_EQ(inv.t5_dir, "/t5");
  EXPECT_EQ(inv.max_length_eval, 9);
  EXPECT_TRUE(inv.token_init);
  EXPECT_EQ(expect_fields_match(inv, cfg, "inverter"), 18);
  EXPECT_EQ(HeldoutOptions::from_config(cfg).rows, 11);
}

TEST(StageOptions, Stage3LmPretrainAndTheDataSourceReadTheirKeys) {
  const auto cfg = config_with({"stage3.lr_dae=0.125", "stage3.lambda_warmup_steps=17", "stage3.pcgrad=whole",
                                "lm.min_drop=0.3", "lm.lr=0.002", "pretrain.enabled=true", "pretrain.sentinels=9",
                                "pretrain.weight_decay=0.05", "train.synthetic_rows=40", "train.synthetic_sigma=0.2",
                                "cache.read_buffer_mb=3"});
  const auto s3 = Stage3Options::from_config(cfg);
  EXPECT_EQ(s3.lr_dae, 0.125);
  EXPECT_EQ(s3.lambda_warmup_steps, 17);
  EXPECT_EQ(s3.pcgrad, "whole");
  EXPECT_EQ(expect_fields_match(s3, cfg, "stage3"), 7);
  const auto lm = LmOptions::from_config(cfg);
  EXPECT_EQ(lm.min_drop, 0.3);
  EXPECT_EQ(expect_fields_match(lm, cfg, "lm"), 5);
  const auto pre = PretrainOptions::from_config(cfg);
  EXPECT_TRUE(pre.enabled);
  EXPECT_EQ(pre.sentinels, 9);
  EXPECT_EQ(expect_fields_match(pre, cfg, "pretrain"), 7);
  // The objectives carry their section's optimizer values to the LmStage that trains them.
  const auto lm_obj = lm_objective(cfg, 1);
  EXPECT_EQ(lm_obj.lr, 0.002);
  EXPECT_EQ(lm_obj.weight_decay, cfg.real("lm.weight_decay"));
  const auto pre_obj = pretrain_objective(cfg, 100, 1);
  EXPECT_EQ(pre_obj.lr, cfg.real("pretrain.lr"));
  EXPECT_EQ(pre_obj.weight_decay, 0.05);
  EXPECT_EQ(pre_obj.extra_vocab, 9);
  const auto data = DataSourceOptions::from_config(cfg);
  EXPECT_EQ(data.synthetic_rows, 40);
  EXPECT_EQ(data.synthetic_sigma, 0.2);
  EXPECT_EQ(data.synthetic_dim, cfg.integer("train.synthetic_dim"));
  EXPECT_EQ(data.read_buffer_mb, 3);
}

TEST(StageOptions, Stage3RefusesAnUnknownPcgradMode) {
  const auto cfg = config_with({"stage3.pcgrad=sometimes"});
  try {
    Stage3Options::from_config(cfg);
    FAIL() << "stage3.pcgrad=sometimes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stage3.pcgrad must be per_tensor, whole or off, got 'sometimes'"),
              std::string::npos)
        << e.what();
  }
}

TEST(StageOptions, EmbedderTrainReadsItsListOfSigmas) {
  const auto cfg = config_with({"embedder_train.report_sigmas=[0.5, 1]", "embedder_train.symmetric=false",
                                "embedder_train.dim=16", "embedder_train.temperature=0.2"});
  const auto o = EmbedderTrainOptions::from_config(cfg);
  EXPECT_EQ(o.report_sigmas, (std::vector<double>{0.5, 1.0}));
  EXPECT_FALSE(o.symmetric);
  EXPECT_EQ(o.dim, 16);
  EXPECT_EQ(o.temperature, 0.2);
  EXPECT_EQ(expect_fields_match(o, cfg, "embedder_train"), 9);
}

TEST(StageOptions, HypothesesReadTheCacheAndInverterKeys) {
  const auto cfg = config_with({"cache.shard_rows=5", "cache.dtype=float32", "hypotheses.batch_size=3",
                                "hypotheses.queries_per_text=2"});
  const auto o = HypothesisCacheOptions::from_config(cfg, "/r");
  EXPECT_EQ(o.shard_rows, 5);
  EXPECT_EQ(o.dtype, "float32");
  EXPECT_EQ(o.batch_size, 3);
  EXPECT_EQ(o.queries_per_text, 2);
  EXPECT_EQ(o.max_length, cfg.integer("inverter.max_length_eval"));
}

TEST(StageOptions, AKeyTheConfigLacksIsRefusedAsTheGettersRefuseIt) {
  const Config cfg(YAML::Load("stage4: {lr: 0.1, weight_decay: 0.0, warm_start: true}"));
  try {
    Stage4Options::from_config(cfg);
    FAIL() << "a missing key was skipped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'stage4.warm_start_t2_t3' is read by the code but has no default"),
              std::string::npos)
        << e.what();
  }
  const Config wrong(YAML::Load("stage4: {lr: fast}"));
  try {
    Stage4Options::from_config(wrong);
    FAIL() << "a mistyped value was read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("config key 'stage4.lr' must be a number"), std::string::npos) << e.what();
  }
}
