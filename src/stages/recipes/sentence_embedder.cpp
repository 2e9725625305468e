// The contextual embedder stage: a T5 encoder trained with in-batch SimCSE on the training texts (what and why:
// embedder.h). The export and the final report are in embedder_export.cpp.
#include "stages/recipes/sentence_embedder.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "model/net/bert.h"
#include "model/net/t5_pretrained.h"
#include "model/text/token_batch.h"
#include "model/text/tokenizer_spm.h"
#include "stages/recipes/shared_options.h"
#include "stages/loop/trainer.h"

namespace daei {

ContextualEmbedderImpl::ContextualEmbedderImpl(const T5Config& c, int64_t dim) {
  t5 = register_module("t5", T5EncoderModel(c));
  dense = register_module("dense", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, dim).bias(false)));
}

at::Tensor ContextualEmbedderImpl::forward(const at::Tensor& ids, const at::Tensor& mask) {
  // The same ops, in the same order, as TransformerEmbedder::embed, so the export reproduces these rows.
  auto e = masked_mean_pool(t5->forward(ids, mask), mask).to(torch::kFloat32);
  e = torch::matmul(e, dense->weight.t());
  return torch::nn::functional::normalize(e, torch::nn::functional::NormalizeFuncOptions().dim(1));
}

void load_pretrained_encoder(ContextualEmbedderImpl& m, const Config& cfg, const std::string& dir) {
  // load_pretrained_t5 checks the shape and tokenizer and drops the sentinel rows; it needs the whole T5.
  T5Model full(lm_t5_config(cfg, m.t5->cfg.vocab_size));
  load_pretrained_t5(*full, dir);
  TensorMap enc;
  for (auto& [name, t] : module_state(*full, true))
    if (name.rfind("shared.", 0) == 0 || name.rfind("encoder.", 0) == 0) enc[name] = t;
  load_module_state(*m.t5, enc, dir + "/model.safetensors", /*strict=*/true);
}

at::Tensor in_batch_contrastive_loss(const at::Tensor& z1, const at::Tensor& z2, double temperature,
                                     bool symmetric) {
  DAEI_CHECK(z1.sizes() == z2.sizes() && z1.dim() == 2, "contrastive loss: views of {} and {} dims, or of other shapes",
             z1.dim(), z2.dim());
  auto logits = torch::matmul(z1, z2.t()) / temperature;  // unit rows: cosines
  auto labels = torch::arange(z1.size(0), torch::TensorOptions().dtype(torch::kLong).device(z1.device()));
  auto loss = torch::nn::functional::cross_entropy(logits, labels);
  if (symmetric) loss = 0.5 * (loss + torch::nn::functional::cross_entropy(logits.t(), labels));
  return loss;
}

at::Tensor gather_global_rows(Communicator& comm, const at::Tensor& local, int64_t offset, int64_t global_rows) {
  const int64_t n = local.size(0);
  DAEI_CHECK(offset >= 0 && offset + n <= global_rows, "gather: rows [{}, {}) outside a batch of {}", offset,
             offset + n, global_rows);
  if (comm.size() == 1 && n == global_rows) return local;
  auto buf = torch::zeros({global_rows, local.size(1)}, local.options().requires_grad(false));
  buf.narrow(0, offset, n).copy_(local.detach());
  comm.allreduce(buf, ReduceOp::Sum);
  return torch::cat({buf.narrow(0, 0, offset), local, buf.narrow(0, offset + n, global_rows - offset - n)});
}

at::Tensor in_batch_loss_for_rank(Communicator& comm, const at::Tensor& z1, const at::Tensor& z2, int64_t offset,
                                  int64_t global_rows, double temperature, bool symmetric, double* loss) {
  // Two statements: the collectives run in this order on every rank (argument order is unspecified in C++).
  const auto g1 = gather_global_rows(comm, z1, offset, global_rows);
  const auto g2 = gather_global_rows(comm, z2, offset, global_rows);
  auto full = in_batch_contrastive_loss(g1, g2, temperature, symmetric);
  if (loss) *loss = full.item<double>();
  return full * static_cast<double>(global_rows);
}

EmbedderTrainOptions EmbedderTrainOptions::from_config(const Config& cfg) {
  EmbedderTrainOptions o;
  fields(o, config_reader(cfg, "embedder_train"));
  return o;
}

EmbedderStage::EmbedderStage(const Config& cfg, Communicator& comm, const std::string& stage_dir,
                             EmbedderStageData data, std::shared_ptr<SpmTokenizer> tok, bool resume, bool force)
    : data_(std::move(data)), tok_(std::move(tok)), comm_(comm), options_(EmbedderTrainOptions::from_config(cfg)) {
  DAEI_CHECK(data_.train.rows > 0 && data_.train.texts, "[embedder] no training texts");
  auto opt = trainer_options(cfg, "embedder_train", stage_dir);
  opt.tag = "embedder";
  opt.resume = resume;
  opt.force = force;
  seed_ = opt.seed;  // run.seed: the embedder is work the training seeds share (trainer_options)
  T5Config c = lm_t5_config(cfg, tok_->vocab_size());
  c.dropout_rate = options_.dropout;  // SimCSE's augmentation: the two views differ by dropout
  torch::manual_seed(splitmix64(seed_ ^ 0xE3BEDULL));
  model_ = ContextualEmbedder(c, options_.dim);
  if (!data_.pretrained_dir.empty()) {
    load_pretrained_encoder(*model_, cfg, data_.pretrained_dir);
    LOG_INFO("[embedder] T5 encoder starts from {}", data_.pretrained_dir);
  } else {
    LOG_WARN("[embedder] no pretrained T5: the encoder starts from seeded random weights");
  }
  const at::Device device = train_device(cfg, comm.local_rank());
  model_->to(device);
  model_->train();
  ParamGroupSpec g{"embedder", model_->parameters(), options_.lr, options_.weight_decay, 0.0};
  trainer_ = std::make_unique<Trainer>(comm, opt, data_.train.rows,
                                       ModuleList{{"", model_->t5.ptr()}, {"dense.", model_->dense.ptr()}},
                                       std::vector{g});
  trainer_->terms = {"loss", "pos_cos"};
  trainer_->loss = [this, device](const Batch& b) {
    at::Tensor ids, mask;
    encode(data_.train.texts(b.rows), ids, mask);
    ids = ids.to(device), mask = mask.to(device);
    // One forward over [texts; texts]: every row draws its own dropout masks, so the halves are two views.
    auto z = model_->forward(torch::cat({ids, ids}), torch::cat({mask, mask}));
    const int64_t n = ids.size(0);
    auto z1 = z.narrow(0, 0, n), z2 = z.narrow(0, n, n);
    // The global rows of this micro-step: every rank's micro-batch m (with grad_accum the negatives are those of
    // the micro-step, as one rank with the same grad_accum has them).
    const int64_t rows = b.global_batch / b.accum, offset = comm_.rank() * n;
    double full = 0;
    LossOutput out;
    out.loss = in_batch_loss_for_rank(comm_, z1, z2, offset, rows, options_.temperature, options_.symmetric, &full);
    out.count = static_cast<double>(n);
    out.terms["loss"] = full;
    out.terms["pos_cos"] = (z1 * z2).sum(1).mean().item<double>();
    return out;
  };
  if (data_.train.prefetch) trainer_->prefetch = data_.train.prefetch;
  if (opt.eval_every > 0 && data_.val.rows > 0 && data_.val.texts) {
    heldout_rows_ = std::min(HeldoutOptions::from_config(cfg).rows, data_.val.rows);
    trainer_->evaluate = [this](int64_t step) { return heldout(step); };
  }
  const int64_t max_length = options_.max_length;
  trainer_->save_final = [this, max_length](const std::string& dir) {
    export_sentence_transformer(*model_, data_.tokenizer_file, max_length, dir + "/st");
    if (!data_.report_texts.empty()) write_report(dir);
  };
}

EmbedderStage::~EmbedderStage() = default;

void EmbedderStage::encode(const std::vector<std::string>& texts, at::Tensor& ids, at::Tensor& mask) const {
  std::vector<std::vector<int64_t>> rows;
  rows.reserve(texts.size());
  for (const auto& t : texts) rows.push_back(tok_->encode(t, options_.max_length));
  auto tb = pad_token_rows(rows, tok_->pad_id(), 1);
  ids = tb.input_ids;
  mask = tb.attention_mask;
}

at::Tensor EmbedderStage::embed(const std::vector<std::string>& texts) {
  torch::NoGradGuard ng;
  model_->eval();
  const at::Device device = model_->dense->weight.device();
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < texts.size(); i += 256) {
    std::vector<std::string> chunk(texts.begin() + i, texts.begin() + std::min(texts.size(), i + 256));
    at::Tensor ids, mask;
    encode(chunk, ids, mask);
    parts.push_back(model_->forward(ids.to(device), mask.to(device)).cpu());
  }
  model_->train();
  return parts.empty() ? torch::empty({0, model_->dense->weight.size(0)}) : torch::cat(parts);
}

// On the first train.heldout_rows val texts (every rank computes the same numbers; they are few):
//   heldout_loss     the training loss, dropout views drawn from a fixed seed, batches of the training batch size
//   heldout_align    mean |z1 − z2|² of those views (Wang & Isola 2020; lower = views agree)
//   heldout_uniform  log mean exp(−2 |z_i − z_j|²) over pairs of clean (eval-mode) rows (lower = spread out)
std::map<std::string, double> EmbedderStage::heldout(int64_t) {
  std::vector<int64_t> all(heldout_rows_);
  for (int64_t i = 0; i < heldout_rows_; ++i) all[i] = i;
  const auto texts = data_.val.texts(all);
  const at::Device device = model_->dense->weight.device();
  const int64_t B = std::max<int64_t>(2, trainer_->options().global_batch);
  double loss = 0, align = 0;
  int64_t batches = 0;
  {
    torch::NoGradGuard ng;
    torch::manual_seed(splitmix64(seed_ ^ 0x4E1D0ULL));  // the same views at every evaluation
    for (int64_t s = 0; s + 1 < heldout_rows_; s += B) {
      std::vector<std::string> chunk(texts.begin() + s, texts.begin() + std::min(heldout_rows_, s + B));
      at::Tensor ids, mask;
      encode(chunk, ids, mask);
      ids = ids.to(device), mask = mask.to(device);
      auto z = model_->forward(torch::cat({ids, ids}), torch::cat({mask, mask}));
      const int64_t n = ids.size(0);
      auto z1 = z.narrow(0, 0, n), z2 = z.narrow(0, n, n);
      loss += in_batch_contrastive_loss(z1, z2, options_.temperature, options_.symmetric).item<double>();
      align += (z1 - z2).pow(2).sum(1).mean().item<double>();
      ++batches;
    }
  }
  auto e = embed(texts);
  auto d2 = torch::cdist(e, e).pow(2);
  auto off = ~torch::eye(e.size(0), torch::kBool);
  const double uniform = std::log(torch::exp(-2.0 * d2.masked_select(off)).mean().item<double>());
  return {{"heldout_loss", loss / std::max<int64_t>(1, batches)},
          {"heldout_align", align / std::max<int64_t>(1, batches)},
          {"heldout_uniform", uniform}};
}

int EmbedderStage::run() {
  int64_t n = 0;
  for (const auto& p : model_->parameters()) n += p.numel();
  const auto& c = model_->t5->cfg;
  LOG_INFO("[embedder] SimCSE ({}, τ {}, dropout {}) on {} training texts, no embeddings: {} parameters (T5 encoder "
           "d_model {}, {} layers, vocab {}; mean pool, dense {} → {}, L2)",
           options_.symmetric ? "symmetric" : "one direction", options_.temperature, c.dropout_rate, data_.train.rows,
           n, c.d_model, c.num_layers, c.vocab_size, c.d_model, model_->dense->weight.size(0));
  return trainer_->run();
}

}  // namespace daei
