#include "model/attack/inverter.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "model/net/generate.h"
#include "model/net/precision.h"
#include "model/net/t5_kernels.h"

namespace daei {
using json = nlohmann::json;

TokenLoss t5_token_loss(T5ModelImpl& t5, const at::Tensor& hidden, const at::Tensor& labels, int64_t chunk) {
  // Only the real tokens reach the LM head: (N, d) rows gathered from (B, T, d).
  auto flat_labels = labels.reshape({-1});
  auto keep = (flat_labels != -100).nonzero().squeeze(1);
  TokenLoss out;
  out.count = keep.numel();
  if (out.count == 0) {
    out.sum = hidden.sum() * 0.0;  // keeps the graph (and the gradient schema) of an empty micro-batch
    return out;
  }
  // No gather when every position is a real token (fixed-length batches).
  const bool all = out.count == flat_labels.numel();
  auto h = all ? hidden.reshape({-1, hidden.size(-1)}) : hidden.reshape({-1, hidden.size(-1)}).index_select(0, keep);
  auto y = all ? flat_labels : flat_labels.index_select(0, keep);
  const bool tied = t5.cfg.tie_word_embeddings;
  const auto& w = tied ? t5.shared->weight : t5.lm_head->weight;
  if (tied) h = h * std::pow(static_cast<double>(t5.cfg.d_model), -0.5);
  if (t5_speed().fused_ce && linear_cross_entropy_supported(h, w)) {
    // One reused logits buffer of 16 MiB at most (it stays below the allocator's mmap threshold, so no fresh
    // pages each step); the gradients are formed in the forward, so no log-probabilities are kept for backward.
    const int64_t rows = std::max<int64_t>(1, (int64_t{16} << 20) / (4 * w.size(0)));  // 16 MiB of logits
    out.sum = linear_cross_entropy_sum(h, w, y, std::min(chunk, rows));
    return out;
  }
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < out.count; i += chunk) {
    const int64_t n = std::min(chunk, out.count - i);
    auto logits = mp_linear(h.narrow(0, i, n), w).to(torch::kFloat);
    parts.push_back(at::cross_entropy_loss(logits, y.narrow(0, i, n), {}, at::Reduction::Sum, -100));
  }
  out.sum = parts.size() == 1 ? parts[0] : torch::stack(parts).sum();
  return out;
}

at::Tensor labels_from_rows(const std::vector<std::vector<int64_t>>& rows) {
  int64_t L = 1;
  for (const auto& r : rows) L = std::max<int64_t>(L, static_cast<int64_t>(r.size()));
  auto out = torch::full({static_cast<int64_t>(rows.size()), L}, -100, torch::kLong);
  auto a = out.accessor<int64_t, 2>();
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) a[i][j] = rows[i][j];
  return out;
}

EmbeddingTransformImpl::EmbeddingTransformImpl(int64_t d, int64_t dm, int64_t r, double dropout)
    : dim(d), d_model(dm), repeat(r) {
  // Indices 0 and 3 carry the weights, as vec2text's embedding_transform.{0,3}.
  net = register_module("net", torch::nn::Sequential(torch::nn::Linear(d, d), torch::nn::Dropout(dropout),
                                                     torch::nn::GELU(), torch::nn::Linear(d, dm * r)));
}

at::Tensor EmbeddingTransformImpl::forward(const at::Tensor& e) {
  // net's modules one by one, so that both products go through mp_linear (bf16 under train.precision bf16).
  const auto& l0 = net->at<torch::nn::LinearImpl>(0);
  const auto& l3 = net->at<torch::nn::LinearImpl>(3);
  auto x = net->at<torch::nn::DropoutImpl>(1).forward(mp_linear(e, l0.weight, l0.bias));
  x = net->at<torch::nn::GELUImpl>(2).forward(x);
  return mp_linear(x, l3.weight, l3.bias).reshape({e.size(0), repeat, d_model});
}

InverterImpl::InverterImpl(const InverterConfig& c) : cfg(c) {
  embedding_transform =
      register_module("embedding_transform", EmbeddingTransform(c.dim, c.t5.d_model, c.repeat, c.t5.dropout_rate));
  t5 = register_module("t5", T5Model(c.t5));
  if (c.guide_copy) {
    cfg.guide_copy = false;
    enable_guide_copy();
  }
}

void InverterImpl::enable_guide_copy() {
  DAEI_CHECK(cfg.guide_words > 0, "inverter: the copy gate needs a guided inverter (guide_words > 0)");
  if (cfg.guide_copy) return;
  cfg.guide_copy = true;
  copy_gate = register_module("copy_gate", torch::nn::Linear(cfg.t5.d_model, 1));
  torch::NoGradGuard ng;
  copy_gate->weight.zero_();
  copy_gate->bias.zero_();
}

at::Tensor InverterImpl::guide_piece_mask(const InverterGuide& guide) const {
  const auto ids = guide.ids.to(torch::kCPU, torch::kLong), mask = guide.mask.to(torch::kCPU, torch::kLong);
  const int64_t V = cfg.t5.vocab_size;
  const auto keep = (mask != 0) & (ids != cfg.t5.pad_token_id) & (ids != cfg.t5.eos_token_id) & (ids >= 0) & (ids < V);
  auto out = torch::zeros({ids.size(0), V});
  const auto at = keep.nonzero();  // (n, 2): row, position
  if (at.size(0) > 0) {
    const auto rows = at.select(1, 0), cols = ids.index({rows, at.select(1, 1)});
    out.index_put_({rows, cols}, torch::ones({rows.size(0)}));
  }
  return out.to(guide.ids.device());
}

at::Tensor InverterImpl::copy_logits(const at::Tensor& h, const at::Tensor& pieces) {
  const bool tied = t5->cfg.tie_word_embeddings;
  const auto& w = tied ? t5->shared->weight : t5->lm_head->weight;
  auto logits = mp_linear(tied ? h * std::pow(static_cast<double>(t5->cfg.d_model), -0.5) : h, w).to(torch::kFloat);
  return logits + torch::softplus(copy_gate->forward(h.to(torch::kFloat))) * pieces;
}

at::Tensor InverterImpl::project(const at::Tensor& e) {
  DAEI_CHECK(e.dim() == 2 && e.size(1) == cfg.dim, "inverter: embeddings must be (B, {}), got ({})", cfg.dim,
             fmt::format("{}", fmt::join(e.sizes(), ", ")));
  return embedding_transform->forward(e.to(t5->shared->weight.dtype()));
}

at::Tensor InverterImpl::encoder_inputs(const at::Tensor& e, const InverterGuide* guide, at::Tensor& mask) {
  const bool guided = cfg.guide_words > 0;
  DAEI_CHECK(guided == (guide != nullptr),
             guided ? "inverter: a guided inverter (guide_words {}) needs its bag-of-words guide"
                    : "inverter: an unguided inverter was given a guide (guide_words {})",
             cfg.guide_words);
  auto x = project(e);
  mask = torch::ones({x.size(0), x.size(1)}, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
  if (!guided) return x;
  DAEI_CHECK(guide->ids.dim() == 2 && guide->ids.size(0) == x.size(0) && guide->mask.sizes() == guide->ids.sizes(),
             "inverter: a guide of {} rows for {} embeddings", guide->ids.size(0), x.size(0));
  const auto ids = guide->ids.to(x.device());
  mask = torch::cat({mask, guide->mask.to(mask.device(), torch::kLong)}, 1);
  return torch::cat({x, t5->embed(ids).to(x.dtype())}, 1);
}

TokenLoss InverterImpl::loss(const at::Tensor& e, const at::Tensor& labels, const InverterGuide* guide) {
  at::Tensor mask;
  auto x = encoder_inputs(e, guide, mask);
  auto enc = t5->encode(x, mask);
  auto dec_in = t5->shift_right(labels);
  auto h = t5->decoder->forward(t5->embed(dec_in), {}, enc, mask);
  if (!cfg.guide_copy) return t5_token_loss(*t5, h, labels);
  // The copy gate's loss: every real token's logits with the raise of its row's guide pieces (no fused LM head:
  // the raise differs by row).
  auto flat = labels.reshape({-1});
  auto keep = (flat != -100).nonzero().squeeze(1);
  TokenLoss out;
  out.count = keep.numel();
  if (out.count == 0) {
    out.sum = (h.sum() + copy_gate->weight.sum()) * 0.0;  // the graph (and gradient schema) of an empty micro-batch
    return out;
  }
  auto rows = torch::div(keep, labels.size(1), "floor");
  auto pieces = guide_piece_mask(*guide).to(h.device()).index_select(0, rows);
  auto logits = copy_logits(h.reshape({-1, h.size(-1)}).index_select(0, keep), pieces);
  out.sum = at::cross_entropy_loss(logits, flat.index_select(0, keep), {}, at::Reduction::Sum, -100);
  return out;
}

at::Tensor InverterImpl::generate(const at::Tensor& e, const GenerateOptions& opt, const InverterGuide* guide) {
  torch::NoGradGuard ng;
  at::Tensor mask;
  auto x = encoder_inputs(e, guide, mask);
  if (!cfg.guide_copy) return t5_generate(*t5, x, mask, opt).sequences;
  GenerateOptions with_copy = opt;
  const auto pieces = guide_piece_mask(*guide).to(x.device());
  with_copy.adjust_logits = [this, pieces](const at::Tensor& logits, const at::Tensor& h, const at::Tensor& input) {
    return logits + torch::softplus(copy_gate->forward(h)) * pieces.index_select(0, input);
  };
  return t5_generate(*t5, x, mask, with_copy).sequences;
}

void InverterImpl::save(const std::string& dir) const {
  make_dirs(dir);
  t5->save_pretrained(dir);
  TensorMap proj;
  for (const auto& [k, v] : module_state(*embedding_transform)) {
    // net.0.weight → embedding_transform.0.weight (vec2text's names)
    proj["embedding_transform." + k.substr(4)] = v;
  }
  save_safetensors(dir + "/embedding_transform.safetensors", proj, {{"format", "pt"}});
  if (cfg.guide_copy) {
    TensorMap gate;
    for (const auto& [k, v] : module_state(*copy_gate)) gate["copy_gate." + k] = v;
    save_safetensors(dir + "/copy_gate.safetensors", gate, {{"format", "pt"}});
  }
  json j{{"schema", "daei.inverter.v1"}, {"dim", cfg.dim}, {"num_repeat_tokens", cfg.repeat}};
  if (cfg.guide_words > 0)
    j["guide"] = {{"words", cfg.guide_words}, {"bow_stage", cfg.guide_bow}, {"max_pieces", cfg.guide_pieces},
                  {"copy", cfg.guide_copy}};
  write_file_atomic(dir + "/inverter.json", j.dump(2) + "\n");
}

std::shared_ptr<InverterImpl> InverterImpl::load(const std::string& dir) {
  DAEI_CHECK(file_exists(dir + "/inverter.json"), "{}: not an inverter folder (inverter.json missing)", dir);
  const json j = json::parse(read_file(dir + "/inverter.json"), nullptr, false);
  DAEI_CHECK(!j.is_discarded() && j.value("schema", "") == "daei.inverter.v1", "{}/inverter.json: not a daei inverter",
             dir);
  InverterConfig c;
  c.dim = j.at("dim").get<int64_t>();
  c.repeat = j.at("num_repeat_tokens").get<int64_t>();
  if (j.contains("guide")) {
    c.guide_words = j["guide"].value("words", int64_t{0});
    c.guide_bow = j["guide"].value("bow_stage", std::string());
    c.guide_pieces = j["guide"].value("max_pieces", int64_t{0});
    c.guide_copy = j["guide"].value("copy", false);
    DAEI_CHECK(c.guide_words > 0 && !c.guide_bow.empty() && c.guide_pieces > 1,
               "{}/inverter.json: a guide without words, bow_stage or max_pieces", dir);
  }
  c.t5 = T5Config::from_file(dir + "/config.json");
  auto inv = std::make_shared<InverterImpl>(c);
  inv->t5->load_weights(dir + "/model.safetensors");
  TensorMap proj;
  for (const auto& [k, v] : load_safetensors(dir + "/embedding_transform.safetensors"))
    proj["net." + k.substr(std::string("embedding_transform.").size())] = v;
  load_module_state(*inv->embedding_transform, proj, dir + "/embedding_transform.safetensors");
  if (c.guide_copy) {
    TensorMap gate;
    for (const auto& [k, v] : load_safetensors(dir + "/copy_gate.safetensors"))
      gate[k.substr(std::string("copy_gate.").size())] = v;
    load_module_state(*inv->copy_gate, gate, dir + "/copy_gate.safetensors");
  }
  inv->eval();
  return inv;
}

}  // namespace daei
