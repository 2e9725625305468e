// Parity of the C++ T5 (v1.0 relu/tied, v1.1 gated-gelu/untied) and BERT with an independent float64
// reference of the Hugging Face modeling math (tests/fixtures/make_t5_bert_fixtures.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "core/error.h"
#include "core/safetensors.h"
#include "model/net/bert.h"
#include "model/net/t5.h"

namespace {

const std::string kDir = std::string(DAEI_FIXTURES) + "/models/";

// max |a - b| / max |b|: the relative error the parity bound is stated in.
double rel_err(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  auto d = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  return d / std::max(1e-30, b.to(torch::kDouble).abs().max().item<double>());
}

constexpr double kTol = 1e-4;

void check_t5(const std::string& name) {
  auto model = daei::T5ModelImpl::from_pretrained(kDir + name);
  model->eval();
  auto io = daei::load_safetensors(kDir + name + "/io.safetensors");
  torch::NoGradGuard ng;
  // Buckets.
  const auto& rel = io.at("bucket.relative_position");
  const auto& cfg = model->cfg;
  EXPECT_TRUE(torch::equal(daei::t5_relative_position_bucket(rel, true, cfg.relative_attention_num_buckets,
                                                             cfg.relative_attention_max_distance),
                           io.at("bucket.bidirectional")));
  EXPECT_TRUE(torch::equal(daei::t5_relative_position_bucket(rel, false, cfg.relative_attention_num_buckets,
                                                             cfg.relative_attention_max_distance),
                           io.at("bucket.causal")));
  const auto& mask = io.at("attention_mask");
  const auto& labels = io.at("labels");
  for (const std::string tag : {"ids", "embeds"}) {
    daei::T5Output out = tag == "ids" ? model->forward_ids(io.at("input_ids"), mask, labels)
                                      : model->forward(io.at("inputs_embeds"), mask, labels);
    // Padded encoder positions are compared too (HF computes them the same way).
    double e1 = rel_err(out.encoder_hidden, io.at(tag + ".encoder_hidden"));
    double e2 = rel_err(out.decoder_hidden, io.at(tag + ".decoder_hidden"));
    double e3 = rel_err(out.logits, io.at(tag + ".logits"));
    double e4 = rel_err(out.loss, io.at(tag + ".loss"));
    std::printf("[parity] %s/%s rel err: encoder %.2e decoder %.2e logits %.2e loss %.2e\n", name.c_str(),
                tag.c_str(), e1, e2, e3, e4);
    EXPECT_LT(e1, kTol) << name << " " << tag;
    EXPECT_LT(e2, kTol) << name << " " << tag;
    EXPECT_LT(e3, kTol) << name << " " << tag;
    EXPECT_LT(e4, kTol) << name << " " << tag;
  }
}

}  // namespace

TEST(T5Parity, V10ReluTied) { check_t5("t5_v10"); }
TEST(T5Parity, V11GatedGeluUntied) { check_t5("t5_v11"); }

TEST(T5Parity, NamesMatchHuggingFace) {
  auto m = daei::T5ModelImpl::from_pretrained(kDir + "t5_v11");
  auto st = daei::module_state(*m);
  auto file = daei::load_safetensors(kDir + "t5_v11/model.safetensors");
  ASSERT_EQ(st.size(), file.size());
  for (const auto& [n, t] : file) EXPECT_TRUE(st.count(n)) << n;
  EXPECT_TRUE(st.count("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"));
  EXPECT_FALSE(st.count("decoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"));
  EXPECT_TRUE(st.count("decoder.block.2.layer.1.EncDecAttention.q.weight"));
  EXPECT_TRUE(st.count("encoder.block.1.layer.1.DenseReluDense.wi_1.weight"));
  EXPECT_TRUE(st.count("lm_head.weight"));
}

TEST(T5Parity, SaveLoadRoundTripAndEncoderOnly) {
  auto m = daei::T5ModelImpl::from_pretrained(kDir + "t5_v10");
  m->eval();
  const auto dir = (std::filesystem::temp_directory_path() / ("daei_t5_" + std::to_string(::getpid()))).string();
  m->save_pretrained(dir);
  auto m2 = daei::T5ModelImpl::from_pretrained(dir);
  m2->eval();
  auto io = daei::load_safetensors(kDir + "t5_v10/io.safetensors");
  torch::NoGradGuard ng;
  auto a = m->forward_ids(io.at("input_ids"), io.at("attention_mask"), io.at("labels"));
  auto b = m2->forward_ids(io.at("input_ids"), io.at("attention_mask"), io.at("labels"));
  EXPECT_TRUE(torch::equal(a.logits, b.logits));
  // The encoder-only model loads the encoder half of the full checkpoint.
  auto enc = daei::T5EncoderModelImpl::from_pretrained(kDir + "t5_v10");
  enc->eval();
  EXPECT_LT(rel_err(enc->forward(io.at("input_ids"), io.at("attention_mask")), io.at("ids.encoder_hidden")), kTol);
  std::filesystem::remove_all(dir);
}

TEST(T5Parity, ConfigRoundTripAndErrors) {
  daei::T5Config c;
  c.d_model = 48;
  c.feed_forward_proj = "gated-gelu";
  c.num_decoder_layers = 3;
  auto c2 = daei::T5Config::from_json_text(c.to_json_text());
  EXPECT_EQ(c2.d_model, 48);
  EXPECT_EQ(c2.num_decoder_layers, 3);
  EXPECT_TRUE(c2.gated());
  // num_decoder_layers defaults to num_layers as in HF.
  auto c3 = daei::T5Config::from_json_text(R"({"num_layers": 4})");
  EXPECT_EQ(c3.num_decoder_layers, 4);
  EXPECT_THROW(daei::T5Config::from_json_text(R"({"feed_forward_proj": "swish-ish"})"), daei::Error);
  EXPECT_THROW(daei::T5Config::from_json_text("{"), daei::Error);
}

TEST(BertParity, MatchesReference) {
  auto m = daei::BertModelImpl::from_pretrained(kDir + "bert");
  m->eval();
  auto io = daei::load_safetensors(kDir + "bert/io.safetensors");
  torch::NoGradGuard ng;
  auto out = m->forward(io.at("input_ids"), io.at("attention_mask"), io.at("token_type_ids"));
  // Inference on a padded batch runs the layers on the real tokens only: those positions match Hugging Face's, the
  // padded ones (whose values nothing reads) are 0. The padded forward (pack_padding off) matches everywhere.
  const auto real = io.at("attention_mask").to(torch::kBool).unsqueeze(-1);
  ASSERT_FALSE(real.all().item<bool>()) << "the fixture's batch has padding";
  EXPECT_EQ(out.last_hidden_state.masked_select(real.logical_not()).abs().max().item<float>(), 0.0f);
  double e1 = rel_err(out.last_hidden_state * real, io.at("last_hidden_state") * real);
  m->pack_padding = false;
  const auto padded = m->forward(io.at("input_ids"), io.at("attention_mask"), io.at("token_type_ids"));
  m->pack_padding = true;
  const double e_padded = rel_err(padded.last_hidden_state, io.at("last_hidden_state"));
  std::printf("[parity] bert rel err: padded forward last_hidden %.2e\n", e_padded);
  EXPECT_LT(e_padded, kTol);
  EXPECT_LT((padded.last_hidden_state * real - out.last_hidden_state).abs().max().item<float>(), 1e-5);
  double e2 = rel_err(out.pooler_output, io.at("pooler_output"));
  std::printf("[parity] bert rel err: last_hidden %.2e pooler %.2e\n", e1, e2);
  EXPECT_LT(e1, kTol);
  EXPECT_LT(e2, kTol);
  auto st = daei::module_state(*m);
  EXPECT_TRUE(st.count("encoder.layer.1.attention.self.query.weight"));
  EXPECT_TRUE(st.count("encoder.layer.0.attention.output.LayerNorm.bias"));
  EXPECT_TRUE(st.count("pooler.dense.weight"));
  // Saved without the "bert." prefix and reloaded: same outputs.
  const auto dir = (std::filesystem::temp_directory_path() / ("daei_bert_" + std::to_string(::getpid()))).string();
  m->save_pretrained(dir);
  auto m2 = daei::BertModelImpl::from_pretrained(dir);
  m2->eval();
  auto out2 = m2->forward(io.at("input_ids"), io.at("attention_mask"), io.at("token_type_ids"));
  EXPECT_TRUE(torch::equal(out2.last_hidden_state, out.last_hidden_state));
  std::filesystem::remove_all(dir);
  // Masked mean pooling ignores padded positions.
  auto pooled = daei::masked_mean_pool(out.last_hidden_state, io.at("attention_mask"));
  auto manual = out.last_hidden_state[2].slice(0, 0, 4).mean(0);
  EXPECT_TRUE(torch::allclose(pooled[2], manual, 1e-5, 1e-6));
}
