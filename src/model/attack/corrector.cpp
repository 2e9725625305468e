#include "model/attack/corrector.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"

namespace daei {
using json = nlohmann::json;

namespace {
const char* kHeadsFile = "corrector_heads.safetensors";
const char* kSchema = "daei.corrector.v1";
}  // namespace

CorrectorImpl::CorrectorImpl(const CorrectorConfig& c) : cfg(c) {
  DAEI_CHECK(c.dim > 0 && c.repeat > 0, "corrector: dim and num_repeat_tokens must be > 0");
  // Dropout 0 in the three MLPs (vec2text's use_ff_dropout = False).
  embedding_transform_1 = register_module("embedding_transform_1", EmbeddingTransform(c.dim, c.t5.d_model, c.repeat, 0.0));
  embedding_transform_2 = register_module("embedding_transform_2", EmbeddingTransform(c.dim, c.t5.d_model, c.repeat, 0.0));
  embedding_transform_3 = register_module("embedding_transform_3", EmbeddingTransform(c.dim, c.t5.d_model, c.repeat, 0.0));
  layernorm = register_module(
      "layernorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.t5.d_model}).eps(c.layer_norm_eps)));
  t5 = register_module("t5", T5Model(c.t5));
}

std::pair<at::Tensor, at::Tensor> CorrectorImpl::encoder_inputs(const at::Tensor& target_e, const at::Tensor& hyp_e,
                                                                const at::Tensor& hyp_ids) {
  DAEI_CHECK(target_e.dim() == 2 && target_e.size(1) == cfg.dim && hyp_e.sizes() == target_e.sizes(),
             "corrector: target and hypothesis embeddings must both be (B, {}), got ({}) and ({})", cfg.dim,
             fmt::format("{}", fmt::join(target_e.sizes(), ", ")), fmt::format("{}", fmt::join(hyp_e.sizes(), ", ")));
  DAEI_CHECK(hyp_ids.dim() == 2 && hyp_ids.size(0) == target_e.size(0),
             "corrector: hypothesis ids must be (B, L) with B = {}, got ({})", target_e.size(0),
             fmt::format("{}", fmt::join(hyp_ids.sizes(), ", ")));
  const auto dtype = t5->shared->weight.dtype();
  const auto dev = t5->shared->weight.device();
  auto e = target_e.to(dev, dtype);
  auto h = hyp_e.to(dev, dtype);
  auto ids = hyp_ids.to(dev, torch::kLong);
  const int64_t B = e.size(0);
  auto t1 = embedding_transform_1->forward(e);
  auto t2 = embedding_transform_2->forward(e - h);
  auto t3 = embedding_transform_3->forward(h);
  auto sep = t5->embed(torch::full({B, 1}, cfg.t5.eos_token_id, torch::TensorOptions().dtype(torch::kLong).device(dev)));
  auto x = torch::cat({sep, t1, sep, t3, sep, t2, sep, t5->embed(ids)}, 1);
  x = layernorm->forward(x);
  auto mask = torch::cat({torch::ones({B, prefix_length()}, torch::TensorOptions().dtype(torch::kLong).device(dev)),
                          (ids != cfg.t5.pad_token_id).to(torch::kLong)},
                         1);
  return {x, mask};
}

TokenLoss CorrectorImpl::loss(const at::Tensor& target_e, const at::Tensor& hyp_e, const at::Tensor& hyp_ids,
                              const at::Tensor& labels) {
  auto [x, mask] = encoder_inputs(target_e, hyp_e, hyp_ids);
  auto lab = labels.to(x.device());
  auto enc = t5->encode(x, mask);
  auto h = t5->decoder->forward(t5->embed(t5->shift_right(lab)), {}, enc, mask);
  return t5_token_loss(*t5, h, lab);
}

GenerateOutput CorrectorImpl::generate(const at::Tensor& target_e, const at::Tensor& hyp_e, const at::Tensor& hyp_ids,
                                       const GenerateOptions& opt) {
  torch::NoGradGuard ng;
  auto [x, mask] = encoder_inputs(target_e, hyp_e, hyp_ids);
  return t5_generate(*t5, x, mask, opt);
}

at::Tensor CorrectorImpl::first_step_logits(const at::Tensor& target_e, const at::Tensor& hyp_e,
                                            const at::Tensor& hyp_ids) {
  torch::NoGradGuard ng;
  auto [x, mask] = encoder_inputs(target_e, hyp_e, hyp_ids);
  // One label a row: the decoder then reads shift_right(labels) = the start token alone.
  auto labels = torch::full({x.size(0), 1}, cfg.t5.eos_token_id, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
  return t5->forward(x, mask, labels).logits.select(1, 0).to(torch::kFloat32);
}

const char* hypothesis_ids_name(HypothesisIds h) { return h == HypothesisIds::vec2text ? "vec2text" : "daei"; }

namespace {
// net.0.weight (our EmbeddingTransform) <-> embedding_transform_1.0.weight (vec2text).
void put_heads(TensorMap& out, const std::string& name, const torch::nn::Module& m) {
  for (const auto& [k, v] : module_state(m)) out[name + "." + k.substr(4)] = v;
}
TensorMap take_heads(const TensorMap& all, const std::string& name) {
  TensorMap out;
  const std::string p = name + ".";
  for (const auto& [k, v] : all)
    if (k.rfind(p, 0) == 0) out["net." + k.substr(p.size())] = v;
  return out;
}
}  // namespace

void CorrectorImpl::save(const std::string& dir) const {
  make_dirs(dir);
  t5->save_pretrained(dir);
  TensorMap heads;
  put_heads(heads, "embedding_transform_1", *embedding_transform_1);
  put_heads(heads, "embedding_transform_2", *embedding_transform_2);
  put_heads(heads, "embedding_transform_3", *embedding_transform_3);
  for (const auto& [k, v] : module_state(*layernorm)) heads["layernorm." + k] = v;
  save_safetensors(dir + "/" + kHeadsFile, heads, {{"format", "pt"}});
  json j{{"schema", kSchema},
         {"dim", cfg.dim},
         {"num_repeat_tokens", cfg.repeat},
         {"layer_norm_eps", cfg.layer_norm_eps},
         {"hypothesis_ids", hypothesis_ids_name(cfg.hypothesis_ids)},
         {"encoder_input", "[eos, T1(e)xR, eos, T3(e_hyp)xR, eos, T2(e-e_hyp)xR, eos, hypothesis tokens], LayerNorm"}};
  write_file_atomic(dir + "/corrector.json", j.dump(2) + "\n");
}

std::shared_ptr<CorrectorImpl> CorrectorImpl::load(const std::string& dir) {
  DAEI_CHECK(file_exists(dir + "/corrector.json"), "{}: not a corrector folder (corrector.json missing)", dir);
  const json j = json::parse(read_file(dir + "/corrector.json"), nullptr, false);
  DAEI_CHECK(!j.is_discarded() && j.value("schema", "") == kSchema, "{}/corrector.json: not a daei corrector", dir);
  CorrectorConfig c;
  c.dim = j.at("dim").get<int64_t>();
  c.repeat = j.at("num_repeat_tokens").get<int64_t>();
  c.layer_norm_eps = j.value("layer_norm_eps", 1e-5);
  const std::string hyp = j.value("hypothesis_ids", "daei");
  DAEI_CHECK(hyp == "daei" || hyp == "vec2text", "{}/corrector.json: hypothesis_ids is '{}' (daei or vec2text)", dir, hyp);
  c.hypothesis_ids = hyp == "vec2text" ? HypothesisIds::vec2text : HypothesisIds::daei;
  c.t5 = T5Config::from_file(dir + "/config.json");
  auto m = std::make_shared<CorrectorImpl>(c);
  m->t5->load_weights(dir + "/model.safetensors");
  const std::string hp = dir + "/" + kHeadsFile;
  const TensorMap all = load_safetensors(hp);
  load_module_state(*m->embedding_transform_1, take_heads(all, "embedding_transform_1"), hp);
  load_module_state(*m->embedding_transform_2, take_heads(all, "embedding_transform_2"), hp);
  load_module_state(*m->embedding_transform_3, take_heads(all, "embedding_transform_3"), hp);
  TensorMap ln;
  for (const auto& [k, v] : all)
    if (k.rfind("layernorm.", 0) == 0) ln[k.substr(10)] = v;
  load_module_state(*m->layernorm, ln, hp);
  size_t used = ln.size();
  for (const char* n : {"embedding_transform_1", "embedding_transform_2", "embedding_transform_3"})
    used += take_heads(all, n).size();
  DAEI_CHECK(used == all.size(), "{}: {} unexpected tensors (expected only embedding_transform_{{1,2,3}}.* and "
             "layernorm.*)", hp, all.size() - used);
  m->eval();
  return m;
}

std::vector<std::string> warm_start_corrector(CorrectorImpl& corrector, const InverterImpl& inverter, bool copy_t2_t3) {
  torch::NoGradGuard ng;
  std::vector<std::string> copied;
  auto copy_all = [&](torch::nn::Module& dst, const torch::nn::Module& src, const std::string& dst_prefix) {
    const auto from = src.named_parameters(true);
    for (auto& p : dst.named_parameters(true)) {
      const at::Tensor* s = from.find(p.key());
      DAEI_CHECK(s != nullptr, "warm start: the inverter has no tensor {} for the corrector's {}{}", p.key(),
                 dst_prefix, p.key());
      DAEI_CHECK(s->sizes() == p.value().sizes(), "warm start: {}{} is ({}) in the corrector but ({}) in the inverter",
                 dst_prefix, p.key(), fmt::format("{}", fmt::join(p.value().sizes(), ", ")),
                 fmt::format("{}", fmt::join(s->sizes(), ", ")));
      p.value().copy_(*s);
      copied.push_back(dst_prefix + p.key());
    }
    const auto buffers = src.named_buffers(true);
    for (auto& b : dst.named_buffers(true)) {
      const at::Tensor* s = buffers.find(b.key());
      if (s != nullptr && s->sizes() == b.value().sizes()) b.value().copy_(*s);
    }
  };
  copy_all(*corrector.t5, *inverter.t5, "t5.");
  copy_all(*corrector.embedding_transform_1, *inverter.embedding_transform, "embedding_transform_1.");
  if (copy_t2_t3) {
    copy_all(*corrector.embedding_transform_2, *inverter.embedding_transform, "embedding_transform_2.");
    copy_all(*corrector.embedding_transform_3, *inverter.embedding_transform, "embedding_transform_3.");
  }
  return copied;
}

}  // namespace daei
