#include "model/net/bert.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <torch/version.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "model/net/attention_mask.h"

namespace daei {
namespace {

torch::nn::Linear make_linear(torch::nn::Module& parent, const char* name, int64_t in, int64_t out) {
  auto l = parent.register_module(name, torch::nn::Linear(in, out));
  torch::NoGradGuard ng;
  l->weight.normal_(0.0, 0.02);  // HF initializer_range
  l->bias.zero_();
  return l;
}

torch::nn::LayerNorm make_norm(torch::nn::Module& parent, const char* name, int64_t d, double eps) {
  return parent.register_module(name, torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(eps)));
}

torch::Tensor act(const torch::Tensor& x, const std::string& name) {
  if (name == "gelu") return torch::gelu(x);
  if (name == "gelu_new") return torch::gelu(x, "tanh");
  if (name == "relu") return torch::relu(x);
  DAEI_FAIL("bert: unsupported hidden_act '{}'", name);
}

// Module trees that only exist to give HF names: attention.self, attention.output, intermediate, output.
struct BertSelfImpl : torch::nn::Module {
  BertSelfImpl(int64_t h) {
    query = make_linear(*this, "query", h, h);
    key = make_linear(*this, "key", h, h);
    value = make_linear(*this, "value", h, h);
  }
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
};
TORCH_MODULE(BertSelf);

struct BertDenseNormImpl : torch::nn::Module {  // "output" blocks: dense + LayerNorm
  BertDenseNormImpl(int64_t in, int64_t out, double eps) {
    dense = make_linear(*this, "dense", in, out);
    LayerNorm = make_norm(*this, "LayerNorm", out, eps);
  }
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
};
TORCH_MODULE(BertDenseNorm);

struct BertDenseImpl : torch::nn::Module {  // "intermediate" and "pooler": dense only
  BertDenseImpl(int64_t in, int64_t out) { dense = make_linear(*this, "dense", in, out); }
  torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(BertDense);

struct BertAttentionImpl : torch::nn::Module {
  BertAttentionImpl(const BertConfig& c) {
    self = register_module("self", BertSelf(c.hidden_size));
    output = register_module("output", BertDenseNorm(c.hidden_size, c.hidden_size, c.layer_norm_eps));
  }
  BertSelf self{nullptr};
  BertDenseNorm output{nullptr};
};
TORCH_MODULE(BertAttention);

struct BertLayerImpl : torch::nn::Module {
  BertLayerImpl(const BertConfig& c) : cfg(c) {
    attention = register_module("attention", BertAttention(c));
    intermediate = register_module("intermediate", BertDense(c.hidden_size, c.intermediate_size));
    output = register_module("output", BertDenseNorm(c.intermediate_size, c.hidden_size, c.layer_norm_eps));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& bias) {
    const int64_t B = x.size(0), T = x.size(1), H = cfg.num_attention_heads, D = cfg.hidden_size / H;
    auto split = [&](const torch::Tensor& t) { return t.view({B, T, H, D}).transpose(1, 2); };
    auto& s = attention->self;
    auto ctx = attend(split(s->query->forward(x)), split(s->key->forward(x)), split(s->value->forward(x)), bias);
    return after_attention(ctx.transpose(1, 2).reshape({B, T, H * D}), x);
  }
  // The same layer on the real tokens only: x (N, H) holds the rows idx (N) of the (B·T) positions. The token-wise
  // products see N rows instead of B·T; attention alone sees the padded layout, with zeros where padding was (masked
  // keys, discarded queries), so every real token's output is the padded forward's.
  torch::Tensor forward_packed(const torch::Tensor& x, const torch::Tensor& idx, int64_t B, int64_t T,
                               const torch::Tensor& bias) {
    const int64_t H = cfg.num_attention_heads, D = cfg.hidden_size / H;
    auto unpack = [&](const torch::Tensor& t) {
      return torch::zeros({B * T, H * D}, t.options()).index_copy_(0, idx, t).view({B, T, H, D}).transpose(1, 2);
    };
    auto& s = attention->self;
    auto ctx = attend(unpack(s->query->forward(x)), unpack(s->key->forward(x)), unpack(s->value->forward(x)), bias);
    return after_attention(ctx.transpose(1, 2).reshape({B * T, H * D}).index_select(0, idx), x);
  }
  // q, k, v (B, heads, T, D) → (B, heads, T, D).
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias) {
#if TORCH_VERSION_MAJOR >= 2
    // libtorch 2.x's fused attention (Hugging Face's BertSdpaSelfAttention takes it too): one kernel for scores,
    // mask, softmax and the weighted sum, the same numbers to rounding (tests/unit/test_minilm_parity.cpp).
    return at::scaled_dot_product_attention(q, k, v,
                                            bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
                                            is_training() ? cfg.attention_probs_dropout_prob : 0.0, false);
#else
    auto scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(q.size(-1)));
    if (bias.defined()) scores = scores + bias;
    return torch::matmul(torch::dropout(torch::softmax(scores, -1), cfg.attention_probs_dropout_prob, is_training()),
                         v);
#endif
  }
  // The attention's output block and the feed-forward block, token by token: ctx and x (..., H).
  torch::Tensor after_attention(const torch::Tensor& ctx, const torch::Tensor& x) {
    auto& ao = attention->output;
    auto a = ao->LayerNorm->forward(
        torch::dropout(ao->dense->forward(ctx), cfg.hidden_dropout_prob, is_training()) + x);
    auto i = act(intermediate->dense->forward(a), cfg.hidden_act);
    return output->LayerNorm->forward(
        torch::dropout(output->dense->forward(i), cfg.hidden_dropout_prob, is_training()) + a);
  }
  BertConfig cfg;
  BertAttention attention{nullptr};
  BertDense intermediate{nullptr};
  BertDenseNorm output{nullptr};
};
TORCH_MODULE(BertLayer);

struct BertEmbeddingsImpl : torch::nn::Module {
  explicit BertEmbeddingsImpl(const BertConfig& c) {
    auto emb = [&](const char* name, int64_t n) {
      auto e = register_module(name, torch::nn::Embedding(n, c.hidden_size));
      torch::NoGradGuard ng;
      e->weight.normal_(0.0, 0.02);
      return e;
    };
    word_embeddings = emb("word_embeddings", c.vocab_size);
    position_embeddings = emb("position_embeddings", c.max_position_embeddings);
    token_type_embeddings = emb("token_type_embeddings", c.type_vocab_size);
    LayerNorm = make_norm(*this, "LayerNorm", c.hidden_size, c.layer_norm_eps);
  }
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
};
TORCH_MODULE(BertEmbeddings);

struct BertEncoderImpl : torch::nn::Module {
  explicit BertEncoderImpl(const BertConfig& c) {
    layer = register_module("layer", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) layer->push_back(BertLayer(c));
  }
  torch::nn::ModuleList layer{nullptr};
};
TORCH_MODULE(BertEncoder);

}  // namespace

BertModelImpl::BertModelImpl(const BertConfig& c) : cfg(c) {
  cfg.validate();
  auto e = register_module("embeddings", BertEmbeddings(c));
  embeddings = e.get();
  word_embeddings = e->word_embeddings;
  position_embeddings = e->position_embeddings;
  token_type_embeddings = e->token_type_embeddings;
  emb_norm = e->LayerNorm;
  auto enc = register_module("encoder", BertEncoder(c));
  layer = enc->layer;
  if (c.with_pooler) {
    auto p = register_module("pooler", BertDense(c.hidden_size, c.hidden_size));
    pooler_dense = p->dense;
  }
}

BertOutput BertModelImpl::forward(const torch::Tensor& ids, const torch::Tensor& mask, const torch::Tensor& tt) {
  const int64_t T = ids.size(1);
  DAEI_CHECK(T <= cfg.max_position_embeddings, "bert: sequence length {} exceeds max_position_embeddings {}", T,
             cfg.max_position_embeddings);
  auto pos = torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(ids.device())).unsqueeze(0);
  auto types = tt.defined() ? tt : torch::zeros_like(ids);
  auto h = word_embeddings->forward(ids) + token_type_embeddings->forward(types) + position_embeddings->forward(pos);
  h = torch::dropout(emb_norm->forward(h), cfg.hidden_dropout_prob, is_training());
  torch::Tensor bias;
  if (mask.defined())
    bias = additive_attention_mask(mask, h.scalar_type());
  // Inference on a padded batch: the layers run on the real tokens only (BertLayerImpl::forward_packed).
  const bool pack = pack_padding && mask.defined() && !is_training() && !at::GradMode::is_enabled() &&
                    (mask == 0).any().item<bool>();
  if (pack) {
    const int64_t B = ids.size(0), H = cfg.hidden_size;
    const auto idx = mask.reshape({-1}).nonzero().squeeze(1);
    auto x = h.reshape({B * T, H}).index_select(0, idx);
    for (size_t i = 0; i < layer->size(); ++i) x = layer->ptr<BertLayerImpl>(i)->forward_packed(x, idx, B, T, bias);
    h = torch::zeros({B * T, H}, x.options()).index_copy_(0, idx, x).view({B, T, H});
  } else {
    for (size_t i = 0; i < layer->size(); ++i) h = layer->ptr<BertLayerImpl>(i)->forward(h, bias);
  }
  BertOutput out;
  out.last_hidden_state = h;
  if (!pooler_dense.is_empty()) out.pooler_output = torch::tanh(pooler_dense->forward(h.select(1, 0)));
  return out;
}

void BertModelImpl::load_weights(const std::string& path, bool strict) { load_tensors(load_safetensors(path), path, strict); }

void BertModelImpl::load_tensors(const TensorMap& t, const std::string& path, bool strict) {
  auto rename = [](const std::string& n0) -> std::string {
    std::string n = n0.rfind("bert.", 0) == 0 ? n0.substr(5) : n0;
    if (n == "embeddings.position_ids") return "";  // a buffer some checkpoints carry
    // Old TF-converted names.
    auto pos = n.find("LayerNorm.gamma");
    if (pos != std::string::npos) n.replace(pos, 15, "LayerNorm.weight");
    pos = n.find("LayerNorm.beta");
    if (pos != std::string::npos) n.replace(pos, 14, "LayerNorm.bias");
    // Task heads (cls.*, classifier.*) are not part of the encoder.
    if (n.rfind("embeddings.", 0) != 0 && n.rfind("encoder.", 0) != 0 && n.rfind("pooler.", 0) != 0) return "";
    return n;
  };
  auto rep = load_module_state(*this, t, path, false, rename);
  if (strict) {
    DAEI_CHECK(rep.missing.empty(), "{}: {} BERT tensor(s) missing, first '{}'", path, rep.missing.size(),
               rep.missing.empty() ? "" : rep.missing.front());
    DAEI_CHECK(rep.unexpected.empty(), "{}: unexpected BERT tensor '{}'", path,
               rep.unexpected.empty() ? "" : rep.unexpected.front());
  }
}

std::shared_ptr<BertModelImpl> BertModelImpl::from_pretrained(const std::string& dir) {
  auto cfg = BertConfig::from_file(dir + "/config.json");
  const std::string w = module_folder_weights(dir);
  auto names = load_safetensors(w);  // decide on the pooler from the file itself
  bool pooler = false;
  for (const auto& [n, t] : names)
    if (n == "pooler.dense.weight" || n == "bert.pooler.dense.weight") pooler = true;
  cfg.with_pooler = pooler;
  auto m = std::make_shared<BertModelImpl>(cfg);
  m->load_tensors(names, w, true);
  LOG_INFO("[model] bert loaded from {} (hidden {}, {} layers, vocab {})", dir, cfg.hidden_size,
           cfg.num_hidden_layers, cfg.vocab_size);
  return m;
}

void BertModelImpl::save_pretrained(const std::string& dir) const {
  save_module_folder(dir, *this, "config.json", cfg.to_json_text(), {{"format", "pt"}});
}

torch::Tensor masked_mean_pool(const torch::Tensor& hidden, const torch::Tensor& mask) {
  auto m = mask.to(hidden.scalar_type()).unsqueeze(-1);
  return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9);
}

}  // namespace daei
