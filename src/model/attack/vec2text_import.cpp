#include "model/attack/vec2text_import.h"

#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/safetensors.h"

namespace daei {
namespace {

using json = nlohmann::json;
const std::string kT5Prefix = "encoder_decoder.";

std::string shape_of(const at::Tensor& t) { return fmt::format("{}", fmt::join(t.sizes(), "x")); }

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// dir/model.safetensors and dir/config.json, or one line saying why not.
struct Checkpoint {
  std::string weights;
  TensorMap tensors;
  json config;
};

Checkpoint read_checkpoint(const std::string& dir, const char* kind) {
  Checkpoint c;
  c.weights = dir + "/model.safetensors";
  if (!file_exists(c.weights)) {
    DAEI_CHECK(!file_exists(dir + "/pytorch_model.bin"),
               "{}: only model.safetensors is read, this vec2text {} has pytorch_model.bin (a Python pickle): convert "
               "it with safetensors' save_file first", dir, kind);
    DAEI_CHECK(false, "{}: no model.safetensors (a vec2text {} directory holds config.json and model.safetensors)",
               dir, kind);
  }
  DAEI_CHECK(file_exists(dir + "/config.json"), "{}: no config.json (a vec2text {} directory holds config.json and "
             "model.safetensors)", dir, kind);
  c.config = json::parse(read_file(dir + "/config.json"), nullptr, false);
  DAEI_CHECK(!c.config.is_discarded() && c.config.is_object(), "{}/config.json: not a JSON object", dir);
  c.tensors = load_safetensors(c.weights);
  return c;
}

const at::Tensor& need(const TensorMap& t, const std::string& key, const std::string& source, int64_t dims) {
  auto it = t.find(key);
  DAEI_CHECK(it != t.end(), "{}: tensor '{}' missing", source, key);
  DAEI_CHECK(it->second.dim() == dims, "{}: tensor '{}' has shape {}, expected {} dimensions", source, key,
             shape_of(it->second), dims);
  return it->second;
}

int64_t count_blocks(const TensorMap& t, const std::string& stack_prefix) {
  int64_t n = 0;
  while (t.count(fmt::format("{}block.{}.layer.0.SelfAttention.q.weight", stack_prefix, n))) ++n;
  return n;
}

// The T5 part under kT5Prefix in daei's names (shared.weight once; lm_head only when untied), checked for tied
// copies that disagree.
TensorMap t5_tensors(const TensorMap& all, const T5Config& cfg, const std::string& source) {
  TensorMap out;
  const at::Tensor* emb = nullptr;
  std::string emb_key;
  for (const char* k : {"shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}) {
    auto it = all.find(kT5Prefix + k);
    if (it == all.end()) continue;
    if (emb == nullptr) {
      emb = &it->second;
      emb_key = it->first;
    } else {
      DAEI_CHECK(it->second.sizes() == emb->sizes() && torch::equal(it->second, *emb),
                 "{}: tensor '{}' differs from '{}' (T5's token embeddings must be one tensor)", source, it->first,
                 emb_key);
    }
  }
  for (const auto& [k, v] : all) {
    if (!starts_with(k, kT5Prefix)) continue;
    const std::string n = k.substr(kT5Prefix.size());
    if (n == "shared.weight" || n == "encoder.embed_tokens.weight" || n == "decoder.embed_tokens.weight") continue;
    if (n == "lm_head.weight" && cfg.tie_word_embeddings) continue;
    out[n] = v;
  }
  if (emb != nullptr) out["shared.weight"] = *emb;
  return out;
}

// Loads `t5` from the checkpoint's T5 tensors; errors name the checkpoint's keys.
void load_t5(T5ModelImpl& t5, const TensorMap& all, const std::string& source) {
  const TensorMap t = t5_tensors(all, t5.cfg, source);
  std::set<std::string> have;
  for (const auto& p : t5.named_parameters(true)) {
    const std::string file_key = kT5Prefix + p.key();
    auto it = t.find(p.key());
    DAEI_CHECK(it != t.end(), "{}: tensor '{}' missing", source, file_key);
    DAEI_CHECK(it->second.sizes() == p.value().sizes(), "{}: tensor '{}' has shape {} but a T5 of this shape needs {}",
               source, file_key, shape_of(it->second), shape_of(p.value()));
    have.insert(p.key());
  }
  for (const auto& [k, v] : t)
    DAEI_CHECK(have.count(k), "{}: tensor '{}{}' has no place in a T5 of this shape", source, kT5Prefix, k);
  load_module_state(t5, t, source, true, [](const std::string& n) { return n; });
}

// embedding_transform-like Sequential(Linear, Dropout, GELU, Linear) from `prefix`.{0,3} (or `second` for .3).
void load_transform(EmbeddingTransformImpl& m, const TensorMap& all, const std::string& prefix,
                    const std::string& second, const std::string& source) {
  TensorMap t;
  for (const char* p : {"weight", "bias"}) {
    const std::string a = fmt::format("{}.0.{}", prefix, p), b = fmt::format("{}.{}.{}", prefix, second, p);
    DAEI_CHECK(all.count(a), "{}: tensor '{}' missing", source, a);
    DAEI_CHECK(all.count(b), "{}: tensor '{}' missing", source, b);
    t[std::string("net.0.") + p] = all.at(a);
    t[std::string("net.3.") + p] = all.at(b);
  }
  for (const auto& [k, v] : t) {
    const auto& target = k.rfind("net.0.", 0) == 0 ? m.net->at<torch::nn::LinearImpl>(0)
                                                   : m.net->at<torch::nn::LinearImpl>(3);
    const at::Tensor& dst = k.substr(6) == "weight" ? target.weight : target.bias;
    DAEI_CHECK(dst.sizes() == v.sizes(), "{}: tensor '{}.{}.{}' has shape {} but daei's is {}", source, prefix,
               k[4] == '0' ? "0" : second, k.substr(6), shape_of(v), shape_of(dst));
  }
  load_module_state(m, t, source);
}

int64_t repeat_tokens(const json& cfg, const at::Tensor& second_weight, int64_t d_model, const std::string& dir,
                      const std::string& second_key) {
  DAEI_CHECK(cfg.contains("num_repeat_tokens") && cfg["num_repeat_tokens"].is_number_integer(),
             "{}/config.json: key 'num_repeat_tokens' missing or not an integer", dir);
  const int64_t r = cfg["num_repeat_tokens"].get<int64_t>();
  // Division, not r * d_model: a huge num_repeat_tokens overflowed int64 (undefined behaviour).
  DAEI_CHECK(r > 0 && d_model > 0 && second_weight.size(0) % d_model == 0 && second_weight.size(0) / d_model == r,
             "{}/config.json: num_repeat_tokens {} does not fit '{}' ({} rows = {} x d_model {})", dir, r, second_key,
             second_weight.size(0), double(second_weight.size(0)) / d_model, d_model);
  return r;
}

}  // namespace

T5Config vec2text_t5_config(const TensorMap& t, const std::string& prefix, const std::string& source) {
  T5Config c;
  std::string emb_key = prefix + "shared.weight";
  if (!t.count(emb_key)) emb_key = prefix + "encoder.embed_tokens.weight";
  const at::Tensor& emb = need(t, emb_key, source, 2);
  c.vocab_size = emb.size(0);
  c.d_model = emb.size(1);
  c.num_layers = count_blocks(t, prefix + "encoder.");
  c.num_decoder_layers = count_blocks(t, prefix + "decoder.");
  DAEI_CHECK(c.num_layers > 0, "{}: tensor '{}encoder.block.0.layer.0.SelfAttention.q.weight' missing", source, prefix);
  DAEI_CHECK(c.num_decoder_layers > 0, "{}: tensor '{}decoder.block.0.layer.0.SelfAttention.q.weight' missing", source,
             prefix);
  const at::Tensor& rel =
      need(t, prefix + "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", source, 2);
  c.relative_attention_num_buckets = rel.size(0);
  c.num_heads = rel.size(1);
  const at::Tensor& q = need(t, prefix + "encoder.block.0.layer.0.SelfAttention.q.weight", source, 2);
  DAEI_CHECK(q.size(0) % c.num_heads == 0, "{}: tensor '{}encoder.block.0.layer.0.SelfAttention.q.weight' has {} rows, "
             "not a multiple of the {} heads", source, prefix, q.size(0), c.num_heads);
  c.d_kv = q.size(0) / c.num_heads;
  const std::string ff = prefix + "encoder.block.0.layer.1.DenseReluDense.";
  if (t.count(ff + "wi_0.weight")) {
    c.feed_forward_proj = "gated-gelu";
    c.d_ff = need(t, ff + "wi_0.weight", source, 2).size(0);
  } else {
    c.feed_forward_proj = "relu";
    c.d_ff = need(t, ff + "wi.weight", source, 2).size(0);
  }
  auto lm = t.find(prefix + "lm_head.weight");
  c.tie_word_embeddings = lm == t.end() || (lm->second.sizes() == emb.sizes() && torch::equal(lm->second, emb));
  c.validate();
  return c;
}

std::shared_ptr<InverterImpl> load_vec2text_inverter(const std::string& dir) {
  Checkpoint ck = read_checkpoint(dir, "InversionModel");
  const std::string& src = ck.weights;
  const std::string second = ck.tensors.count("embedding_transform.3.weight") ? "3" : "2";  // older: .2
  size_t skipped = 0;
  for (const auto& [k, v] : ck.tensors) {
    if (starts_with(k, "embedder.")) {
      ++skipped;
      continue;
    }
    const bool ok = starts_with(k, kT5Prefix) || k == "embedding_transform.0.weight" ||
                    k == "embedding_transform.0.bias" || k == "embedding_transform." + second + ".weight" ||
                    k == "embedding_transform." + second + ".bias";
    DAEI_CHECK(ok, "{}: tensor '{}' is not part of a vec2text inverter (expected encoder_decoder.*, "
               "embedding_transform.{{0,{}}}.*, embedder.*)", src, k, second);
  }
  InverterConfig c;
  c.t5 = vec2text_t5_config(ck.tensors, kT5Prefix, src);
  const at::Tensor& w0 = need(ck.tensors, "embedding_transform.0.weight", src, 2);
  const std::string second_key = "embedding_transform." + second + ".weight";
  c.dim = w0.size(1);
  c.repeat = repeat_tokens(ck.config, need(ck.tensors, second_key, src, 2), c.t5.d_model, dir, second_key);
  auto inv = std::make_shared<InverterImpl>(c);
  load_t5(*inv->t5, ck.tensors, src);
  load_transform(*inv->embedding_transform, ck.tensors, "embedding_transform", second, src);
  inv->eval();
  LOG_INFO("[model] vec2text inverter {}: d {}, {} repeat tokens, T5 d_model {} {}+{} layers vocab {}{}", dir, c.dim,
           c.repeat, c.t5.d_model, c.t5.num_layers, c.t5.num_decoder_layers, c.t5.vocab_size,
           skipped ? fmt::format(" ({} embedder.* tensors skipped)", skipped) : "");
  return inv;
}

std::shared_ptr<CorrectorImpl> load_vec2text_corrector(const std::string& dir) {
  Checkpoint ck = read_checkpoint(dir, "CorrectorEncoderModel");
  const std::string& src = ck.weights;
  for (const auto& [k, v] : ck.tensors) {
    bool ok = starts_with(k, kT5Prefix) || k == "layernorm.weight" || k == "layernorm.bias";
    for (int i = 1; i <= 3 && !ok; ++i)
      for (const char* s : {".0.weight", ".0.bias", ".3.weight", ".3.bias"})
        ok = ok || k == fmt::format("embedding_transform_{}{}", i, s);
    DAEI_CHECK(ok, "{}: tensor '{}' is not part of a vec2text corrector (expected encoder_decoder.*, "
               "embedding_transform_{{1,2,3}}.{{0,3}}.*, layernorm.*)", src, k);
  }
  CorrectorConfig c;
  c.hypothesis_ids = HypothesisIds::vec2text;  // it was trained on generate()'s ids (issue 67); saved with it
  c.t5 = vec2text_t5_config(ck.tensors, kT5Prefix, src);
  const at::Tensor& w0 = need(ck.tensors, "embedding_transform_1.0.weight", src, 2);
  c.dim = w0.size(1);
  c.repeat = repeat_tokens(ck.config, need(ck.tensors, "embedding_transform_1.3.weight", src, 2), c.t5.d_model, dir,
                           "embedding_transform_1.3.weight");
  auto m = std::make_shared<CorrectorImpl>(c);
  load_t5(*m->t5, ck.tensors, src);
  load_transform(*m->embedding_transform_1, ck.tensors, "embedding_transform_1", "3", src);
  load_transform(*m->embedding_transform_2, ck.tensors, "embedding_transform_2", "3", src);
  load_transform(*m->embedding_transform_3, ck.tensors, "embedding_transform_3", "3", src);
  TensorMap ln;
  for (const char* p : {"weight", "bias"}) {
    const std::string k = std::string("layernorm.") + p;
    ln[p] = need(ck.tensors, k, src, 1);
    DAEI_CHECK(ln[p].size(0) == c.t5.d_model, "{}: tensor '{}' has shape {} but d_model is {}", src, k,
               shape_of(ln[p]), c.t5.d_model);
  }
  load_module_state(*m->layernorm, ln, src);
  m->eval();
  LOG_INFO("[model] vec2text corrector {}: d {}, {} repeat tokens, T5 d_model {} {}+{} layers vocab {}", dir, c.dim,
           c.repeat, c.t5.d_model, c.t5.num_layers, c.t5.num_decoder_layers, c.t5.vocab_size);
  return m;
}

}  // namespace daei
