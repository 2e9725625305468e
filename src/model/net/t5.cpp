#include "model/net/t5.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <torch/nn/init.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "model/net/precision.h"
#include "model/net/t5_kernels.h"

namespace daei {
namespace {

void init_normal(torch::Tensor& w, double std) {
  torch::NoGradGuard ng;
  w.normal_(0.0, std);
}

torch::Tensor activation(const torch::Tensor& x, const std::string& name) {
  if (name == "relu") return torch::relu(x);
  if (name == "gelu_new") return torch::gelu(x, "tanh");
  if (name == "gelu") return torch::gelu(x);
  if (name == "silu") return torch::silu(x);
  DAEI_FAIL("t5: unsupported activation '{}'", name);
}

// Every T5 projection goes through mp_linear: bf16 GEMMs under train.precision bf16 (model/net/precision.h), the
// Linear modules kept for their parameters and names (safetensors compatibility).
torch::Tensor apply_linear(const torch::nn::Linear& l, const torch::Tensor& x) {
  return mp_linear(x, l->weight, l->bias);
}

// HF: "gated-gelu" means gelu_new (tanh approximation); a plain act name maps through ACT2FN.
std::string t5_act_name(const T5Config& c) {
  if (c.feed_forward_proj == "gated-gelu") return "gelu_new";
  return c.gated() ? c.feed_forward_proj.substr(6) : c.feed_forward_proj;
}

}  // namespace

// ------------------------------------------------------------------------------------------- pieces

torch::Tensor t5_relative_position_bucket(const torch::Tensor& relative_position, bool bidirectional,
                                          int64_t num_buckets, int64_t max_distance) {
  auto rel = relative_position.to(torch::kLong);
  auto buckets = torch::zeros_like(rel);
  if (bidirectional) {
    num_buckets /= 2;
    buckets = buckets + (rel > 0).to(torch::kLong) * num_buckets;
    rel = rel.abs();
  } else {
    rel = -torch::clamp_max(rel, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  auto is_small = rel < max_exact;
  auto large = max_exact + (torch::log(rel.to(torch::kFloat) / static_cast<float>(max_exact)) /
                            std::log(static_cast<float>(max_distance) / static_cast<float>(max_exact)) *
                            static_cast<float>(num_buckets - max_exact))
                               .to(torch::kLong);
  large = torch::clamp_max(large, num_buckets - 1);
  return buckets + torch::where(is_small, rel, large);
}

void append_cached_positions(torch::Tensor& view, torch::Tensor& buf, const torch::Tensor& x) {
  const int64_t T = view.defined() ? view.size(1) : 0, t = x.size(1);
  if (!buf.defined() || buf.size(0) != x.size(0) || buf.size(1) < T + t || buf.size(2) != x.size(2)) {
    auto grown = torch::empty({x.size(0), std::max<int64_t>(2 * (T + t), 16), x.size(2)}, x.options());
    if (T > 0) grown.narrow(1, 0, T).copy_(view);
    buf = grown;
  }
  buf.narrow(1, T, t).copy_(x);
  view = buf.narrow(1, 0, T + t);
}

void T5Cache::reorder(const torch::Tensor& index) {
  for (size_t i = 0; i < self_k.size(); ++i)  // the buffers, so that the next step still appends in place
    for (auto [view, buf] : {std::pair{&self_k[i], &self_k_buf[i]}, std::pair{&self_v[i], &self_v_buf[i]}}) {
      if (!view->defined()) continue;
      const int64_t T = view->size(1);
      *buf = buf->index_select(0, index);  // a cached view always lies in its buffer (append_cached_positions)
      *view = buf->narrow(1, 0, T);
    }
  for (auto* v : {&cross_k, &cross_v})
    for (auto& t : *v)
      if (t.defined()) t = t.index_select(0, index);
}

torch::Tensor t5_ce_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), labels.reshape({-1}),
                                {}, at::Reduction::Mean, -100);
}

T5LayerNormImpl::T5LayerNormImpl(int64_t d, double e) : eps(e) {
  weight = register_parameter("weight", torch::ones({d}));
}

torch::Tensor T5LayerNormImpl::forward(const torch::Tensor& x) {
  // One fused node in fp32/fp64 (same math); the op chain below for half/bf16 weights (fp32 variance, as HF).
  if (t5_speed().fused_norm && rms_norm_supported(x, weight)) return rms_norm(x, weight, eps);
  auto var = x.to(torch::kFloat).pow(2).mean(-1, /*keepdim=*/true);
  auto y = x * torch::rsqrt(var + eps);
  if (weight.scalar_type() == torch::kHalf || weight.scalar_type() == torch::kBFloat16) y = y.to(weight.scalar_type());
  return weight * y;
}

T5AttentionImpl::T5AttentionImpl(const T5Config& c, bool dec, bool has_bias)
    : is_decoder(dec), n_heads(c.num_heads), d_kv(c.d_kv), num_buckets(c.relative_attention_num_buckets),
      max_distance(c.relative_attention_max_distance), dropout(c.dropout_rate) {
  const int64_t inner = c.num_heads * c.d_kv;
  auto lin = [&](const char* name, int64_t in, int64_t out, double std) {
    auto l = register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)));
    init_normal(l->weight, std);
    return l;
  };
  q = lin("q", c.d_model, inner, std::pow(static_cast<double>(c.d_model * c.d_kv), -0.5));
  k = lin("k", c.d_model, inner, std::pow(static_cast<double>(c.d_model), -0.5));
  v = lin("v", c.d_model, inner, std::pow(static_cast<double>(c.d_model), -0.5));
  o = lin("o", inner, c.d_model, std::pow(static_cast<double>(inner), -0.5));
  if (has_bias) {
    relative_attention_bias = register_module("relative_attention_bias", torch::nn::Embedding(num_buckets, n_heads));
    init_normal(relative_attention_bias->weight, std::pow(static_cast<double>(c.d_model), -0.5));
  }
}

torch::Tensor T5AttentionImpl::compute_bias(int64_t q_len, int64_t k_len) {
  DAEI_ASSERT(!relative_attention_bias.is_empty(), "t5: compute_bias on a layer without relative_attention_bias");
  auto dev = relative_attention_bias->weight.device();
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(dev);
  auto ctx = torch::arange(k_len - q_len, k_len, opts).unsqueeze(1);
  auto mem = torch::arange(k_len, opts).unsqueeze(0);
  auto buckets = t5_relative_position_bucket(mem - ctx, !is_decoder, num_buckets, max_distance);
  return relative_attention_bias->forward(buckets).permute({2, 0, 1}).unsqueeze(0);  // (1, H, q, k)
}

torch::Tensor T5AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& kv, const torch::Tensor& bias,
                                       torch::Tensor* cache_k, torch::Tensor* cache_v, bool static_kv,
                                       torch::Tensor* buf_k, torch::Tensor* buf_v) {
  const int64_t B = x.size(0), Tq = x.size(1);
  auto shape = [&](const torch::Tensor& t) { return t.view({B, -1, n_heads, d_kv}).transpose(1, 2); };
  auto qx = apply_linear(q, x);
  if (!cache_k && t5_speed().fused_attention) {  // teacher-forced (no key/value cache): the fused core
    auto kx = apply_linear(k, kv.defined() ? kv : x);
    auto vx = apply_linear(v, kv.defined() ? kv : x);
    if (attention_core_supported(qx, kx, vx, bias, n_heads))
      return apply_linear(o, attention_core(qx, kx, vx, bias, n_heads, dropout, is_training()));
    return attend(shape(qx), shape(kx), shape(vx), bias, B, Tq);
  }
  // Keys/values in the projections' layout (B, Tk, H·d_kv).
  torch::Tensor kx, vx;
  if (kv.defined()) {  // cross-attention: keys/values from the encoder, computed once when cached
    if (cache_k && static_kv && cache_k->defined()) {
      kx = *cache_k;
      vx = *cache_v;
    } else {
      kx = apply_linear(k, kv);
      vx = apply_linear(v, kv);
      if (cache_k) {
        *cache_k = kx;
        *cache_v = vx;
      }
    }
  } else {
    kx = apply_linear(k, x);
    vx = apply_linear(v, x);
    if (cache_k) {
      DAEI_ASSERT(buf_k && buf_v, "t5: a self-attention cache needs its buffers");
      append_cached_positions(*cache_k, *buf_k, kx);
      append_cached_positions(*cache_v, *buf_v, vx);
      kx = *cache_k;
      vx = *cache_v;
    }
  }
  // Decoding (a cache, no gradient, no dropout): the per-head loops, no transposes or BLAS call a head.
  if (cache_k && !torch::GradMode::is_enabled() && t5_speed().fused_attention &&
      attention_decode_supported(qx, kx, vx, bias, n_heads))
    return apply_linear(o, attention_decode(qx, kx, vx, bias, n_heads));
  return attend(shape(qx), shape(kx), shape(vx), bias, B, Tq);
}

torch::Tensor T5AttentionImpl::attend(const torch::Tensor& qs, const torch::Tensor& ks, const torch::Tensor& vs,
                                      const torch::Tensor& bias, int64_t B, int64_t Tq) {
  // The op-chain attention (CUDA, or CPU without the fused kernels): its two products in bf16 on CUDA under
  // train.precision bf16; on the CPU they stay fp32 (small per-head matrices, below 2 % of a step's FLOPs).
  const bool half = matmul_precision() == Precision::bf16 && qs.is_cuda() && qs.scalar_type() == torch::kFloat;
  auto mm = [&](const torch::Tensor& a, const torch::Tensor& b) {
    return half ? torch::matmul(a.to(torch::kBFloat16), b.to(torch::kBFloat16)).to(torch::kFloat) : torch::matmul(a, b);
  };
  auto scores = mm(qs, ks.transpose(2, 3));  // no 1/sqrt(d_kv) in T5
  if (bias.defined()) scores = scores + bias;
  auto w = torch::softmax(scores.to(torch::kFloat), -1).to(scores.scalar_type());
  w = t5_dropout(w, dropout, is_training());
  auto out = mm(w, vs).transpose(1, 2).reshape({B, Tq, n_heads * d_kv});
  return apply_linear(o, out);
}

T5DenseImpl::T5DenseImpl(const T5Config& c) : gated(c.gated()), act(t5_act_name(c)), dropout(c.dropout_rate) {
  auto lin = [&](const char* name, int64_t in, int64_t out, double std) {
    auto l = register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)));
    init_normal(l->weight, std);
    return l;
  };
  const double si = std::pow(static_cast<double>(c.d_model), -0.5), so = std::pow(static_cast<double>(c.d_ff), -0.5);
  if (gated) {
    wi_0 = lin("wi_0", c.d_model, c.d_ff, si);
    wi_1 = lin("wi_1", c.d_model, c.d_ff, si);
  } else {
    wi = lin("wi", c.d_model, c.d_ff, si);
  }
  wo = lin("wo", c.d_ff, c.d_model, so);
}

torch::Tensor T5DenseImpl::forward(const torch::Tensor& x) {
  torch::Tensor h;
  if (gated) {
    h = t5_dropout(activation(apply_linear(wi_0, x), act) * apply_linear(wi_1, x), dropout, is_training());
  } else if (act == "relu") {
    h = t5_relu_dropout(apply_linear(wi, x), dropout, is_training());
  } else {
    h = t5_dropout(activation(apply_linear(wi, x), act), dropout, is_training());
  }
  return apply_linear(wo, h);
}

T5SubLayerImpl::T5SubLayerImpl(const T5Config& c, int k, bool is_decoder, bool has_bias)
    : kind(k), dropout(c.dropout_rate) {
  if (kind == 0) attn = register_module("SelfAttention", T5Attention(c, is_decoder, has_bias));
  if (kind == 1) attn = register_module("EncDecAttention", T5Attention(c, is_decoder, false));
  if (kind == 2) ff = register_module("DenseReluDense", T5Dense(c));
  layer_norm = register_module("layer_norm", T5LayerNorm(c.d_model, c.layer_norm_epsilon));
}

namespace {
class T5BlockImpl : public torch::nn::Module {
 public:
  T5BlockImpl(const T5Config& c, bool is_decoder, bool has_bias) {
    layer = register_module("layer", torch::nn::ModuleList());
    layer->push_back(T5SubLayer(c, 0, is_decoder, has_bias));
    if (is_decoder) layer->push_back(T5SubLayer(c, 1, is_decoder, false));
    layer->push_back(T5SubLayer(c, 2, is_decoder, false));
  }
  torch::nn::ModuleList layer{nullptr};
};
TORCH_MODULE(T5Block);
}  // namespace

T5StackImpl::T5StackImpl(const T5Config& c, bool dec) : cfg(c), is_decoder(dec) {
  block = register_module("block", torch::nn::ModuleList());
  const int64_t n = dec ? c.num_decoder_layers : c.num_layers;
  for (int64_t i = 0; i < n; ++i) block->push_back(T5Block(c, dec, i == 0));
  final_layer_norm = register_module("final_layer_norm", T5LayerNorm(c.d_model, c.layer_norm_epsilon));
}

torch::Tensor T5StackImpl::forward(const torch::Tensor& inputs_embeds, const torch::Tensor& mask,
                                   const torch::Tensor& enc, const torch::Tensor& enc_mask, T5Cache* cache) {
  DAEI_ASSERT(cache == nullptr || is_decoder, "t5: a key/value cache is for the decoder stack only");
  const double p = cfg.dropout_rate;
  auto h = t5_dropout(inputs_embeds, p, is_training());
  const int64_t T = h.size(1);
  const int64_t past = cache ? cache->length() : 0;
  const int64_t Tk = past + T;
  const auto dt = h.scalar_type();
  const auto lopts = torch::TensorOptions().dtype(torch::kLong).device(h.device());
  torch::Tensor self_bias;
  if (block->size() > 0) {
    auto first = block->ptr<T5BlockImpl>(0)->layer->ptr<T5SubLayerImpl>(0)->attn;
    self_bias = first->compute_bias(T, Tk).to(dt);
  }
  torch::Tensor self_mask;
  if (is_decoder) {
    auto causal = torch::arange(Tk, lopts).unsqueeze(0) <= (torch::arange(T, lopts) + past).unsqueeze(1);  // (T, Tk)
    auto allowed = causal.unsqueeze(0).unsqueeze(0);
    if (mask.defined()) {
      DAEI_CHECK(mask.size(1) == Tk, "t5 decoder: attention mask covers {} positions, expected {}", mask.size(1), Tk);
      allowed = allowed.logical_and(mask.to(torch::kBool).unsqueeze(1).unsqueeze(1));
    }
    self_mask = (1.0 - allowed.to(dt)) * mask_min(dt);
  } else if (mask.defined()) {
    self_mask = additive_attention_mask(mask, dt);
  }
  if (self_mask.defined()) self_bias = self_bias.defined() ? self_bias + self_mask : self_mask;
  torch::Tensor cross_bias;
  if (is_decoder && enc_mask.defined()) cross_bias = additive_attention_mask(enc_mask, dt);
  if (cache && is_decoder && cache->self_k.size() != block->size()) {
    const auto n = block->size();
    cache->self_k.assign(n, {});
    cache->self_v.assign(n, {});
    cache->cross_k.assign(n, {});
    cache->cross_v.assign(n, {});
    cache->self_k_buf.assign(n, {});
    cache->self_v_buf.assign(n, {});
  }
  for (size_t i = 0; i < block->size(); ++i) {
    auto& layers = block->ptr<T5BlockImpl>(i)->layer;
    auto sa = layers->ptr<T5SubLayerImpl>(0);
    h = t5_dropout_add(h,
                       sa->attn->forward(sa->layer_norm->forward(h), {}, self_bias, cache ? &cache->self_k[i] : nullptr,
                                         cache ? &cache->self_v[i] : nullptr, false,
                                         cache ? &cache->self_k_buf[i] : nullptr, cache ? &cache->self_v_buf[i] : nullptr),
                       p, is_training());
    size_t next = 1;
    if (is_decoder) {
      auto ca = layers->ptr<T5SubLayerImpl>(next++);
      h = t5_dropout_add(h,
                         ca->attn->forward(ca->layer_norm->forward(h), enc, cross_bias,
                                           cache ? &cache->cross_k[i] : nullptr, cache ? &cache->cross_v[i] : nullptr,
                                           /*static_kv=*/true),
                         p, is_training());
    }
    auto ff = layers->ptr<T5SubLayerImpl>(next);
    h = t5_dropout_add(h, ff->ff->forward(ff->layer_norm->forward(h)), p, is_training());
  }
  h = final_layer_norm->forward(h);
  return t5_dropout(h, p, is_training());
}

// ---------------------------------------------------------------------------------------------- models

T5ModelImpl::T5ModelImpl(const T5Config& c) : cfg(c) {
  cfg.validate();
  shared = register_module("shared", torch::nn::Embedding(c.vocab_size, c.d_model));
  init_normal(shared->weight, 1.0);
  encoder = register_module("encoder", T5Stack(c, false));
  decoder = register_module("decoder", T5Stack(c, true));
  if (!c.tie_word_embeddings) {
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(false)));
    init_normal(lm_head->weight, 1.0);
  }
}

torch::Tensor T5ModelImpl::embed(const torch::Tensor& ids) { return shared->forward(ids); }

torch::Tensor T5ModelImpl::encode(const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask) {
  return encoder->forward(inputs_embeds, attention_mask);
}

torch::Tensor T5ModelImpl::encode_ids(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
  return encode(embed(input_ids), attention_mask);
}

torch::Tensor T5ModelImpl::decode(const torch::Tensor& decoder_input_ids, const torch::Tensor& encoder_hidden,
                                  const torch::Tensor& encoder_mask, T5Cache* cache,
                                  const torch::Tensor& decoder_attention_mask, torch::Tensor* decoder_hidden) {
  auto h = decoder->forward(embed(decoder_input_ids), decoder_attention_mask, encoder_hidden, encoder_mask, cache);
  if (decoder_hidden) *decoder_hidden = h;
  if (cfg.tie_word_embeddings) return mp_linear(h * std::pow(static_cast<double>(cfg.d_model), -0.5), shared->weight);
  return apply_linear(lm_head, h);
}

torch::Tensor T5ModelImpl::shift_right(const torch::Tensor& labels) const {
  auto start = torch::full({labels.size(0), 1}, cfg.decoder_start_token_id, labels.options());
  auto out = torch::cat({start, labels.slice(1, 0, labels.size(1) - 1)}, 1);
  return out.masked_fill(out == -100, cfg.pad_token_id);
}

T5Output T5ModelImpl::forward(const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask,
                              const torch::Tensor& labels, const torch::Tensor& decoder_input_ids) {
  DAEI_CHECK(labels.defined() || decoder_input_ids.defined(), "t5: forward needs labels or decoder_input_ids");
  T5Output out;
  out.encoder_hidden = encode(inputs_embeds, attention_mask);
  auto dec_in = decoder_input_ids.defined() ? decoder_input_ids : shift_right(labels);
  out.logits = decode(dec_in, out.encoder_hidden, attention_mask, nullptr, {}, &out.decoder_hidden);
  if (labels.defined()) out.loss = t5_ce_loss(out.logits, labels);
  return out;
}

T5Output T5ModelImpl::forward_ids(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                  const torch::Tensor& labels, const torch::Tensor& decoder_input_ids) {
  return forward(embed(input_ids), attention_mask, labels, decoder_input_ids);
}

T5Cache T5ModelImpl::make_cache() const { return T5Cache{}; }

namespace {
// HF checkpoints store the tied embedding under several names; keep `shared.weight` and drop copies.
std::function<std::string(const std::string&)> t5_renamer(const TensorMap& t, bool tied, bool encoder_only) {
  const bool has_shared = t.count("shared.weight") > 0;
  return [=](const std::string& n) -> std::string {
    if (n == "encoder.embed_tokens.weight" || n == "decoder.embed_tokens.weight") {
      if (has_shared) return "";
      if (encoder_only && n == "decoder.embed_tokens.weight") return "";
      return "shared.weight";
    }
    if (n == "lm_head.weight" && (tied || encoder_only)) return "";
    if (encoder_only && n.rfind("decoder.", 0) == 0) return "";
    return n;
  };
}
}  // namespace

void T5ModelImpl::load_weights(const std::string& path, bool strict) {
  auto t = load_safetensors(path);
  if (!t.count("shared.weight") && t.count("encoder.embed_tokens.weight") && t.count("decoder.embed_tokens.weight"))
    t.erase("decoder.embed_tokens.weight");
  load_module_state(*this, t, path, strict, t5_renamer(t, cfg.tie_word_embeddings, false));
}

std::shared_ptr<T5ModelImpl> T5ModelImpl::from_pretrained(const std::string& dir) {
  auto cfg = T5Config::from_file(dir + "/config.json");
  const std::string w =
      module_folder_weights(dir, " (only safetensors weights are read; convert pytorch_model.bin)");
  auto m = std::make_shared<T5ModelImpl>(cfg);
  m->load_weights(w);
  LOG_INFO("[model] t5 loaded from {} (d_model {}, {}+{} layers, vocab {})", dir, cfg.d_model, cfg.num_layers,
           cfg.num_decoder_layers, cfg.vocab_size);
  return m;
}

void T5ModelImpl::save_pretrained(const std::string& dir) const {
  save_module_folder(dir, *this, "config.json", cfg.to_json_text(), {{"format", "pt"}});
}

T5EncoderModelImpl::T5EncoderModelImpl(const T5Config& c) : cfg(c) {
  cfg.validate();
  shared = register_module("shared", torch::nn::Embedding(c.vocab_size, c.d_model));
  init_normal(shared->weight, 1.0);
  encoder = register_module("encoder", T5Stack(c, false));
}

torch::Tensor T5EncoderModelImpl::forward(const torch::Tensor& ids, const torch::Tensor& mask) {
  return encoder->forward(shared->forward(ids), mask);
}

torch::Tensor T5EncoderModelImpl::forward_embeds(const torch::Tensor& e, const torch::Tensor& mask) {
  return encoder->forward(e, mask);
}

void T5EncoderModelImpl::load_weights(const std::string& path, bool strict) {
  auto t = load_safetensors(path);
  load_module_state(*this, t, path, strict, t5_renamer(t, true, true));
}

std::shared_ptr<T5EncoderModelImpl> T5EncoderModelImpl::from_pretrained(const std::string& dir) {
  auto cfg = T5Config::from_file(dir + "/config.json");
  const std::string w = module_folder_weights(dir);
  auto m = std::make_shared<T5EncoderModelImpl>(cfg);
  m->load_weights(w);
  return m;
}

}  // namespace daei
