#include "model/release/transformer_embedder.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "core/sha256.h"
#include "model/net/bert.h"
#include "model/release/embedder.h"
#include "model/net/precision.h"
#include "model/release/sbert_json.h"
#include "model/net/t5.h"
#include "model/text/tokenizer_spm.h"
#include "model/text/tokenizer_wordpiece.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;

struct TransformerEmbedder::Impl {
  std::shared_ptr<T5EncoderModelImpl> t5;
  std::shared_ptr<BertModelImpl> bert;
  std::unique_ptr<SpmTokenizer> spm;
  std::unique_ptr<WordPieceTokenizer> wordpiece;
};

TransformerEmbedder::~TransformerEmbedder() = default;

TransformerEmbedder::TransformerEmbedder(const TransformerEmbedderSpec& spec)
    : impl_(std::make_unique<Impl>()), max_length_(spec.max_length), batch_size_(spec.batch_size) {
  const std::string& dir = spec.dir;
  DAEI_CHECK(!dir.empty(), "embedder.kind={} needs embedder.model: a model directory (config.json, "
             "model.safetensors, tokenizer; sentence-transformers modules.json optional)", spec.kind);
  DAEI_CHECK(fs::is_directory(dir), "embedder.model {} is not a directory", dir);
  DAEI_CHECK(spec.kind == "t5" || spec.kind == "bert", "transformer embedder kind must be t5 or bert, got '{}'",
             spec.kind);
  DAEI_CHECK(max_length_ >= 2 && batch_size_ >= 1, "embedder.max_length must be >= 2 and batch_size >= 1");

  // Modules: sentence-transformers layout, else the preset.
  std::string model_dir = dir;
  std::string dense_dir;
  const std::string modules = dir + "/modules.json";
  if (file_exists(modules)) {
    for (const auto& mod : parse_sbert_modules(read_file(modules), modules)) {
      const std::string sub = mod.path.empty() ? dir : dir + "/" + mod.path;
      if (mod.kind == SbertModuleKind::transformer) model_dir = sub;
      else if (mod.kind == SbertModuleKind::pooling)
        pooling_ = parse_pooling_mode(read_file(sub + "/config.json"), sub + "/config.json");
      else if (mod.kind == SbertModuleKind::dense) dense_dir = sub;
      else normalize_ = true;
    }
  } else if (spec.preset == "gtr-t5-base") {
    DAEI_CHECK(spec.kind == "t5", "preset gtr-t5-base is a T5 encoder: set embedder.kind=t5");
    pooling_ = "mean";
    normalize_ = false;  // vec2text's GTR: mean-pooled encoder states, no dense, no normalisation
  } else if (spec.preset == "gte-base") {
    DAEI_CHECK(spec.kind == "bert", "preset gte-base is a BERT model: set embedder.kind=bert");
    pooling_ = "mean";
    normalize_ = true;
  } else {
    DAEI_FAIL("{} has no modules.json: set embedder.preset to gtr-t5-base or gte-base", dir);
  }

  // As sentence-transformers: the model's max_seq_length caps the tokens of a text (a model trained on 32 tokens
  // is not asked about more); embedder.max_length still applies when it is lower.
  if (const std::string sb = model_dir + "/sentence_bert_config.json"; file_exists(sb))
    max_length_ = sbert_max_length(read_file(sb), sb, max_length_);
  const std::string cfg_path = model_dir + "/config.json", weights = model_dir + "/model.safetensors";
  DAEI_CHECK(file_exists(cfg_path) && file_exists(weights), "{}: needs config.json and model.safetensors", model_dir);
  const std::string model_type = parse_model_type(read_file(cfg_path), cfg_path, spec.kind);
  DAEI_CHECK(model_type == spec.kind, "{}: model_type is '{}' but embedder.kind is '{}'", cfg_path, model_type,
             spec.kind);
  if (spec.kind == "t5") {
    impl_->t5 = T5EncoderModelImpl::from_pretrained(model_dir);
    impl_->t5->eval();
    dim_ = impl_->t5->cfg.d_model;
    const std::string sp = model_dir + "/spiece.model";
    DAEI_CHECK(file_exists(sp), "{}: no spiece.model (the T5 SentencePiece tokenizer)", model_dir);
    impl_->spm = std::make_unique<SpmTokenizer>(sp);
  } else {
    impl_->bert = BertModelImpl::from_pretrained(model_dir);
    impl_->bert->eval();
    dim_ = impl_->bert->cfg.hidden_size;
    const std::string vocab = model_dir + "/vocab.txt";
    DAEI_CHECK(file_exists(vocab), "{}: no vocab.txt (the BERT WordPiece vocabulary)", model_dir);
    const std::string tc = model_dir + "/tokenizer_config.json";
    const bool lower = !file_exists(tc) || parse_do_lower_case(read_file(tc), tc);
    impl_->wordpiece = std::make_unique<WordPieceTokenizer>(vocab, lower);
  }
  std::string fingerprint = sha256_file(weights).substr(0, 16);
  if (!dense_dir.empty()) {
    dense_act_ = parse_dense_activation(read_file(dense_dir + "/config.json"), dense_dir + "/config.json");
    auto t = load_safetensors(dense_dir + "/model.safetensors");
    DAEI_CHECK(t.count("linear.weight"), "{}/model.safetensors: no linear.weight", dense_dir);
    dense_w_ = t["linear.weight"].to(torch::kFloat32);
    if (t.count("linear.bias")) dense_b_ = t["linear.bias"].to(torch::kFloat32);
    DAEI_CHECK(dense_w_.dim() == 2 && dense_w_.size(1) == dim_, "{}: linear.weight is [{}, {}] but the transformer gives "
               "{}-d states", dense_dir, dense_w_.size(0), dense_w_.dim() == 2 ? dense_w_.size(1) : -1, dim_);
    dim_ = dense_w_.size(0);
    fingerprint += "+" + sha256_file(dense_dir + "/model.safetensors").substr(0, 8);
  }
  id_ = fmt::format("{}:{}@{}[{}{}{}]", spec.kind, fs::path(dir).filename().string(), fingerprint, pooling_,
                    has_dense() ? "+dense" : "", normalize_ ? "+l2" : "");
}

at::Tensor TransformerEmbedder::embed(const std::vector<std::string>& texts) const {
  std::lock_guard<std::mutex> lk(mu_);
  torch::NoGradGuard no_grad;
  // The black box's answers do not depend on the attacker's train.precision (caches, queries): always fp32.
  MatmulPrecisionGuard fp32(Precision::fp32);
  // Batches of texts of similar length (sorted by bytes, a proxy for tokens), as sentence-transformers' encode does:
  // a batch pads to its longest row, so mixing lengths multiplies the work. Rows go back to the callers' order.
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return texts[a].size() > texts[b].size(); });
  std::vector<at::Tensor> parts;
  for (size_t b = 0; b < texts.size(); b += batch_size_) {
    std::vector<std::string> chunk;
    for (size_t i = b; i < std::min(texts.size(), b + batch_size_); ++i) chunk.push_back(texts[order[i]]);
    at::Tensor hidden, mask;
    if (impl_->t5) {
      auto batch = impl_->spm->encode_batch(chunk, max_length_);
      mask = batch.attention_mask;
      hidden = impl_->t5->forward(batch.input_ids, mask);
    } else {
      auto batch = impl_->wordpiece->encode_batch(chunk, max_length_);
      mask = batch.attention_mask;
      hidden = impl_->bert->forward(batch.input_ids, mask, batch.token_type_ids).last_hidden_state;
    }
    at::Tensor e = pooling_ == "cls" ? hidden.select(1, 0) : masked_mean_pool(hidden, mask);
    e = e.to(torch::kFloat32);
    if (dense_w_.defined()) {
      e = torch::matmul(e, dense_w_.t());
      if (dense_b_.defined()) e = e + dense_b_;
      if (dense_act_ == "tanh") e = torch::tanh(e);
    }
    if (normalize_) e = torch::nn::functional::normalize(e, torch::nn::functional::NormalizeFuncOptions().dim(1));
    parts.push_back(e.contiguous());
  }
  if (parts.empty()) return torch::empty({0, dim_}, torch::kFloat32);
  at::Tensor sorted = torch::cat(parts);
  at::Tensor out = torch::empty_like(sorted);
  out.index_copy_(0, torch::tensor(std::vector<int64_t>(order.begin(), order.end()), torch::kLong), sorted);
  return out;
}

std::shared_ptr<Embedder> make_transformer_embedder(const Config& cfg) {
  TransformerEmbedderSpec s;
  TransformerEmbedderSpec::fields(s, config_reader(cfg, "embedder"));
  // A bare name that is not a folder here is an asset of the cache: `embedder.model: all-MiniLM-L6-v2` is the folder
  // launch/setup.sh unpacked from its PyPI wheel.
  if (!s.dir.empty() && !fs::exists(s.dir) && fs::path(s.dir).is_relative() &&
      fs::is_directory(fs::path(asset_dir(cfg)) / s.dir))
    s.dir = (fs::path(asset_dir(cfg)) / s.dir).string();
  return std::make_shared<TransformerEmbedder>(s);
}

}  // namespace daei
