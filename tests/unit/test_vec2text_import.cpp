// Issue 49: vec2text's own InversionModel and CorrectorEncoderModel (tests/fixtures/vec2text, made by
// make_fixtures.py with vec2text's classes) load as daei's inverter and corrector, decode the same tokens and give
// the same logits; damaged or mismatched directories are refused in one line naming the key.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "../support/error_of.h"
#include "../support/temp_dir.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "model/net/generate.h"
#include "model/attack/vec2text_import.h"

namespace fs = std::filesystem;
using namespace daei;

namespace {

const std::string kDir = std::string(DAEI_FIXTURES) + "/vec2text";

const TensorMap& io() {
  static const TensorMap t = load_safetensors(kDir + "/io.safetensors");
  return t;
}

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>() /
         b.to(torch::kDouble).abs().max().item<double>();
}

GenerateOptions greedy() {
  GenerateOptions g;
  g.max_length = 8;  // vec2text's max_seq_length in the fixture
  g.min_length = 1;
  g.num_beams = 1;
  return g;
}

// A copy of a fixture model directory whose tensors and config `edit` may change.
std::string damaged_copy(const TempDir& tmp, const std::string& which,
                         const std::function<void(TensorMap&, nlohmann::json&)>& edit) {
  const std::string dir = tmp.str() + "/" + which;
  fs::create_directories(dir);
  TensorMap t = load_safetensors(kDir + "/" + which + "/model.safetensors");
  auto cfg = nlohmann::json::parse(read_file(kDir + "/" + which + "/config.json"));
  edit(t, cfg);
  save_safetensors(dir + "/model.safetensors", t, {{"format", "pt"}});
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  return dir;
}

template <class F>
std::string refusal(F&& f) {
  return test::error_of(f);
}

}  // namespace

TEST(Vec2TextImport, InverterLoadsEveryTensorAndDecodesAsVec2Text) {
  auto inv = load_vec2text_inverter(kDir + "/inverter");  // strict: 0 missing, 0 unexpected, or it throws
  EXPECT_EQ(inv->cfg.dim, 24);
  EXPECT_EQ(inv->cfg.repeat, 4);
  EXPECT_EQ(inv->cfg.t5.vocab_size, 40);
  EXPECT_EQ(inv->cfg.t5.d_model, 32);
  EXPECT_EQ(inv->cfg.t5.num_heads, 2);
  EXPECT_EQ(inv->cfg.t5.num_layers, 2);
  EXPECT_EQ(inv->cfg.t5.num_decoder_layers, 2);
  EXPECT_TRUE(inv->cfg.t5.tie_word_embeddings);
  // Every daei tensor came from the file: the file's tensors less the embedder's and the tied copies.
  const TensorMap file = load_safetensors(kDir + "/inverter/model.safetensors");
  size_t used = 0;
  for (const auto& [k, v] : file) used += k.rfind("embedder.", 0) != 0;
  EXPECT_EQ(module_state(*inv).size(), used);

  const at::Tensor ids = inv->generate(io().at("inverter.embedding"), greedy());
  const at::Tensor want = io().at("inverter.greedy_ids");
  ASSERT_EQ(ids.sizes(), want.sizes()) << ids << want;
  EXPECT_TRUE(torch::equal(ids, want)) << ids << want;

  torch::NoGradGuard ng;
  const at::Tensor x = inv->project(io().at("inverter.embedding"));
  const at::Tensor mask = torch::ones({x.size(0), x.size(1)}, torch::kLong);
  const auto out = inv->t5->forward(x, mask, io().at("labels"));
  EXPECT_LE(rel_err(out.logits, io().at("inverter.logits")), 1e-5);
}

TEST(Vec2TextImport, CorrectorStepMatchesVec2Text) {
  auto cor = load_vec2text_corrector(kDir + "/corrector");
  EXPECT_EQ(cor->cfg.dim, 768);
  EXPECT_EQ(cor->cfg.repeat, 4);
  torch::NoGradGuard ng;
  const at::Tensor e = io().at("corrector.embedding"), h = io().at("corrector.hypothesis_embedding");
  const at::Tensor hyp = io().at("corrector.hypothesis_ids");
  auto [x, mask] = cor->encoder_inputs(e, h, hyp);
  EXPECT_TRUE(torch::equal(mask, io().at("corrector.encoder_mask")));
  EXPECT_LE(rel_err(x, io().at("corrector.encoder_inputs")), 1e-5);
  const auto out = cor->t5->forward(x, mask, io().at("labels"));
  const double err = rel_err(out.logits, io().at("corrector.logits"));
  EXPECT_LE(err, 1e-5);
  RecordProperty("corrector_logits_rel_err", std::to_string(err));
  const at::Tensor ids = cor->generate(e, h, hyp, greedy()).sequences;
  const at::Tensor want = io().at("corrector.greedy_ids");
  ASSERT_EQ(ids.sizes(), want.sizes()) << ids << want;
  EXPECT_TRUE(torch::equal(ids, want)) << ids << want;
}

TEST(Vec2TextImport, OlderTransformNamingLoads) {
  TempDir tmp("v2t-old");
  const std::string dir = damaged_copy(tmp, "inverter", [](TensorMap& t, nlohmann::json&) {
    for (const char* p : {"weight", "bias"}) {
      t[std::string("embedding_transform.2.") + p] = t.at(std::string("embedding_transform.3.") + p);
      t.erase(std::string("embedding_transform.3.") + p);
    }
  });
  auto inv = load_vec2text_inverter(dir);
  EXPECT_TRUE(torch::equal(inv->generate(io().at("inverter.embedding"), greedy()), io().at("inverter.greedy_ids")));
}

TEST(Vec2TextImport, DamagedDirectoriesAreRefusedInOneLineNamingTheKey) {
  TempDir tmp("v2t-bad");
  auto one_line_with = [](const std::string& msg, const std::string& word) {
    EXPECT_NE(msg, "") << "not refused";
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(word), std::string::npos) << msg;
  };
  const std::string wo = "encoder_decoder.decoder.block.1.layer.2.DenseReluDense.wo.weight";
  auto missing = damaged_copy(tmp, "inverter", [&](TensorMap& t, nlohmann::json&) { t.erase(wo); });
  one_line_with(refusal([&] { load_vec2text_inverter(missing); }), wo);

  fs::remove_all(tmp.p / "inverter");
  auto shape = damaged_copy(tmp, "inverter", [&](TensorMap& t, nlohmann::json&) { t[wo] = torch::zeros({32, 63}); });
  one_line_with(refusal([&] { load_vec2text_inverter(shape); }), wo);

  fs::remove_all(tmp.p / "inverter");
  auto extra = damaged_copy(tmp, "inverter", [](TensorMap& t, nlohmann::json&) { t["pooler.weight"] = torch::zeros({2}); });
  one_line_with(refusal([&] { load_vec2text_inverter(extra); }), "pooler.weight");

  fs::remove_all(tmp.p / "inverter");
  auto repeat = damaged_copy(tmp, "inverter", [](TensorMap&, nlohmann::json& c) { c["num_repeat_tokens"] = 16; });
  one_line_with(refusal([&] { load_vec2text_inverter(repeat); }), "num_repeat_tokens");

  const std::string ln = "layernorm.bias";
  auto cor = damaged_copy(tmp, "corrector", [&](TensorMap& t, nlohmann::json&) { t.erase(ln); });
  one_line_with(refusal([&] { load_vec2text_corrector(cor); }), ln);

  const std::string pickle = tmp.str() + "/pickle";
  fs::create_directories(pickle);
  fs::copy_file(kDir + "/inverter/config.json", pickle + "/config.json");
  std::ofstream(pickle + "/pytorch_model.bin") << "not read";
  one_line_with(refusal([&] { load_vec2text_inverter(pickle); }), "pytorch_model.bin");
}

TEST(Vec2TextImport, ImportedFoldersLoadAsDaeisOwn) {  // what `daei import vec2text` writes
  TempDir tmp("v2t-save");
  load_vec2text_inverter(kDir + "/inverter")->save(tmp.str() + "/inverter");
  load_vec2text_corrector(kDir + "/corrector")->save(tmp.str() + "/corrector");
  auto inv = InverterImpl::load(tmp.str() + "/inverter");
  EXPECT_TRUE(torch::equal(inv->generate(io().at("inverter.embedding"), greedy()), io().at("inverter.greedy_ids")));
  auto cor = CorrectorImpl::load(tmp.str() + "/corrector");
  const at::Tensor ids = cor->generate(io().at("corrector.embedding"), io().at("corrector.hypothesis_embedding"),
                                       io().at("corrector.hypothesis_ids"), greedy()).sequences;
  EXPECT_TRUE(torch::equal(ids, io().at("corrector.greedy_ids")));
}
