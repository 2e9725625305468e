// all-MiniLM-L6-v2 through daei's own embedder factory (embedder.kind bert, embedder.model = the asset cache's
// sentence-transformers folder) against sentence-transformers' encode at pinned versions
// (tests/fixtures/minilm/make_fixtures.sh): token ids identical, embeddings within 1e-5 in fp32.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "model/release/embedder.h"
#include "model/release/transformer_embedder.h"

TEST(MiniLM, MatchesSentenceTransformers) {
  const std::string fx = std::string(DAEI_FIXTURES) + "/minilm/";
  daei::Config cfg = daei::Config::defaults();
  const std::string dir = daei::asset_dir(cfg) + "/all-MiniLM-L6-v2";
  // CI always runs launch/setup.sh, so a missing asset is a failure, never a skip.
  ASSERT_TRUE(daei::file_exists(dir + "/modules.json") && daei::file_exists(dir + "/model.safetensors"))
      << dir << " is missing: run launch/setup.sh (it unpacks all-MiniLM-L6-v2 into the asset cache)";
  cfg.set("embedder.kind=bert");
  cfg.set("embedder.model=" + dir);
  // embedder.max_length caps the folder's max_seq_length (256) only when lower; the default (128) is.
  cfg.set("embedder.max_length=512");
  auto emb = daei::make_clean_embedder(cfg);
  auto* te = dynamic_cast<daei::TransformerEmbedder*>(emb.get());
  ASSERT_NE(te, nullptr);
  // From 1_Pooling/config.json, modules.json (Normalize) and sentence_bert_config.json, not hard-coded.
  EXPECT_EQ(te->pooling(), "mean");
  EXPECT_TRUE(te->normalize());
  EXPECT_FALSE(te->has_dense());
  EXPECT_EQ(te->max_length(), 256);
  EXPECT_EQ(emb->dim(), 384);

  std::ifstream in(fx + "texts.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto meta = nlohmann::json::parse(line).at("meta");
  std::vector<std::string> texts;
  int bad_ids = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    texts.push_back(j["text"].get<std::string>());
    const auto want = j["ids"].get<std::vector<int64_t>>();
    const auto got = te->token_ids(texts.back());
    if (got != want && ++bad_ids <= 5)
      ADD_FAILURE() << "text " << texts.size() - 1 << " token ids differ (" << got.size() << " vs " << want.size()
                    << " ids): " << texts.back().substr(0, 200);
  }
  EXPECT_EQ(bad_ids, 0);
  ASSERT_EQ(static_cast<int64_t>(texts.size()), meta.at("n").get<int64_t>());
  ASSERT_GE(texts.size(), 500u);

  const at::Tensor want = daei::load_safetensors(fx + "embeddings.safetensors").at("embeddings");
  const at::Tensor got = emb->embed(texts);
  ASSERT_EQ(got.sizes(), want.sizes());
  const at::Tensor diff = (got - want).abs();
  const double max_diff = diff.max().item<double>();
  const int64_t worst = diff.amax(1).argmax().item<int64_t>();
  std::cout << "MiniLM parity: " << texts.size() << " texts, max |daei - sentence-transformers " +
                   meta.at("sentence_transformers").get<std::string>() + "| = "
            << max_diff << " (worst text " << worst << ")\n";
  RecordProperty("max_abs_diff", std::to_string(max_diff));
  EXPECT_LE(max_diff, 1e-5) << "worst text " << worst << ": " << texts[worst].substr(0, 200);
}
