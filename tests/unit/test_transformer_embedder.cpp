// Issue 5: TransformerEmbedder on the small random-weight T5 and BERT fixtures, against the same models run
// directly with pooling, dense and normalisation written out here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <torch/torch.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "model/net/bert.h"
#include "model/net/t5.h"
#include "model/text/tokenizer_spm.h"
#include "model/text/tokenizer_wordpiece.h"
#include "model/release/transformer_embedder.h"

using namespace daei;
namespace fs = std::filesystem;

namespace {

const std::string kModels = std::string(DAEI_FIXTURES) + "/models";

struct Dir {
  fs::path p;
  explicit Dir(const std::string& tag) {
    p = fs::temp_directory_path() / ("daei-te-" + tag + "-" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
  }
  ~Dir() { fs::remove_all(p); }
};

void put(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

// A BERT model dir: the fixture's weights + a 120-token vocabulary.
void make_bert_dir(const fs::path& d) {
  fs::copy_file(kModels + "/bert/config.json", d / "config.json");
  fs::copy_file(kModels + "/bert/model.safetensors", d / "model.safetensors");
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  const char* words[] = {"the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", ".", ","};
  for (auto* w : words) vocab += std::string(w) + "\n";
  for (int i = 5 + 12; i < 120; ++i) vocab += "w" + std::to_string(i) + "\n";
  put(d / "vocab.txt", vocab);
}

const std::vector<std::string> kTexts = {"the cat sat on the mat.", "a dog", "the dog ran far away , far far away"};

at::Tensor mean_pool(const at::Tensor& h, const at::Tensor& mask) {
  at::Tensor out = torch::zeros({h.size(0), h.size(2)});
  for (int64_t b = 0; b < h.size(0); ++b) {
    int64_t n = 0;
    for (int64_t t = 0; t < h.size(1); ++t)
      if (mask[b][t].item<int64_t>()) {
        out[b] += h[b][t];
        ++n;
      }
    out[b] /= double(n);
  }
  return out;
}

struct BertRef {
  at::Tensor hidden, mask;
};
// The fixture BERT run directly on the texts (no embedder code).
BertRef bert_reference(const fs::path& d) {
  WordPieceTokenizer tok((d / "vocab.txt").string());
  auto bert = BertModelImpl::from_pretrained(d.string());
  bert->eval();
  torch::NoGradGuard ng;
  auto batch = tok.encode_batch(kTexts, 16);
  return {bert->forward(batch.input_ids, batch.attention_mask).last_hidden_state, batch.attention_mask};
}

}  // namespace

TEST(TransformerEmbedder, BertMeanDenseTanhNormalizeMatchesManualComputation) {
  Dir d("bert");
  make_bert_dir(d.p);
  put(d.p / "modules.json",
      R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
          {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
          {"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"},
          {"idx":3,"name":"3","path":"3_Normalize","type":"sentence_transformers.models.Normalize"}])");
  put(d.p / "1_Pooling/config.json", R"({"word_embedding_dimension": 32, "pooling_mode_cls_token": false,
      "pooling_mode_mean_tokens": true})");
  put(d.p / "2_Dense/config.json", R"({"in_features": 32, "out_features": 6, "bias": true,
      "activation_function": "torch.nn.modules.activation.Tanh"})");
  torch::manual_seed(3);
  at::Tensor W = torch::randn({6, 32}), bvec = torch::randn({6});
  save_safetensors((d.p / "2_Dense/model.safetensors").string(), {{"linear.weight", W}, {"linear.bias", bvec}});
  TransformerEmbedder te({d.p.string(), "bert", "", 16, 2});
  EXPECT_EQ(te.dim(), 6);
  EXPECT_TRUE(te.has_dense());
  EXPECT_TRUE(te.normalize());
  at::Tensor got = te.embed(kTexts);

  auto ref = bert_reference(d.p);
  at::Tensor e = torch::tanh(torch::matmul(mean_pool(ref.hidden, ref.mask), W.t()) + bvec);
  e = e / e.norm(2, 1, true);
  EXPECT_TRUE(torch::allclose(got, e, 1e-5, 1e-6)) << got << e;
  // batch size 2 inside the embedder vs. all at once here; one text alone gives the same row (padding masked)
  EXPECT_TRUE(torch::allclose(te.embed({kTexts[1]})[0], got[1], 1e-5, 1e-6));
  EXPECT_EQ(te.id().rfind("bert:", 0), 0u);
  EXPECT_NE(te.id().find("mean+dense+l2"), std::string::npos) << te.id();
}

TEST(TransformerEmbedder, BertClsPoolingAndGtePreset) {
  Dir d("bert-cls");
  make_bert_dir(d.p);
  TransformerEmbedder gte({d.p.string(), "bert", "gte-base", 16, 8});  // no modules.json: preset
  at::Tensor g = gte.embed(kTexts);
  EXPECT_TRUE(torch::allclose(g.norm(2, 1), torch::ones({3}), 1e-5, 1e-6));
  put(d.p / "modules.json", R"([{"path":"","type":"sentence_transformers.models.Transformer"},
                                {"path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])");
  put(d.p / "1_Pooling/config.json", R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false})");
  TransformerEmbedder cls({d.p.string(), "bert", "", 16, 8});
  auto ref = bert_reference(d.p);
  EXPECT_TRUE(torch::allclose(cls.embed(kTexts), ref.hidden.select(1, 0), 1e-5, 1e-6));
  at::Tensor m = mean_pool(ref.hidden, ref.mask);
  EXPECT_TRUE(torch::allclose(g, m / m.norm(2, 1, true), 1e-5, 1e-6));
}

TEST(TransformerEmbedder, GtrPresetIsT5EncoderMeanPoolingWithoutNormalisation) {
  Dir d("t5");
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(kModels + "/t5_v11/" + f, d.p / f);
  {
    std::ofstream out(d.p / "corpus.txt");
    const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "from", "home"};
    for (int i = 0; i < 300; ++i)
      for (int k = 0; k < 8; ++k) out << words[(i * 5 + k * 3 + k * k) % 12] << (k < 7 ? " " : "\n");
  }
  SpmTokenizer::train((d.p / "corpus.txt").string(), 40, (d.p / "spiece").string());
  TransformerEmbedder gtr({d.p.string(), "t5", "gtr-t5-base", 16, 2});
  EXPECT_EQ(gtr.dim(), 32);
  EXPECT_FALSE(gtr.normalize());
  at::Tensor got = gtr.embed(kTexts);
  SpmTokenizer tok((d.p / "spiece.model").string());
  auto enc = T5EncoderModelImpl::from_pretrained(d.p.string());
  enc->eval();
  torch::NoGradGuard ng;
  auto batch = tok.encode_batch(kTexts, 16);
  at::Tensor want = mean_pool(enc->forward(batch.input_ids, batch.attention_mask), batch.attention_mask);
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6));
  EXPECT_GT((got.norm(2, 1) - 1).abs().max().item<double>(), 1e-3);  // not normalised
}

TEST(TransformerEmbedder, ClearErrors) {
  Dir d("err");
  make_bert_dir(d.p);
  auto msg = [&](const TransformerEmbedderSpec& s) {
    try {
      TransformerEmbedder te(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg({d.p.string(), "bert", "", 16, 8}).find("set embedder.preset"), std::string::npos);
  EXPECT_NE(msg({d.p.string(), "t5", "gtr-t5-base", 16, 8}).find("model_type is 'bert' but embedder.kind is 't5'"),
            std::string::npos);
  EXPECT_NE(msg({(d.p / "nope").string(), "bert", "gte-base", 16, 8}).find("is not a directory"), std::string::npos);
}
