#include "stages/lm.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "model/token_batch.h"
#include "stages/heldout.h"
#include "stages/stage2.h"
#include "stages/trainer.h"

namespace daei {

std::vector<int64_t> drop_pieces(const std::vector<int64_t>& ids, double rate, SplitMix& rng, int64_t eos_id) {
  const size_t n = !ids.empty() && ids.back() == eos_id ? ids.size() - 1 : ids.size();
  std::vector<int64_t> out;
  out.reserve(n + 1);
  for (size_t i = 0; i < n; ++i)
    if (!(rng.uniform() < rate)) out.push_back(ids[i]);
  out.push_back(eos_id);
  return out;
}

uint64_t lm_example_key(uint64_t seed, int64_t step, int64_t row) {
  return splitmix64(splitmix64(splitmix64(seed ^ 0x4C4D44524F50ULL) + static_cast<uint64_t>(step)) +
                    static_cast<uint64_t>(row));
}

LmExample lm_corrupt(const std::vector<int64_t>& ids, uint64_t seed, int64_t step, int64_t row, double min_rate,
                     double max_rate, int64_t eos_id) {
  SplitMix rng(lm_example_key(seed, step, row));
  LmExample ex;
  ex.rate = min_rate + (max_rate - min_rate) * rng.uniform();
  ex.input = drop_pieces(ids, ex.rate, rng, eos_id);
  return ex;
}

TokenLoss lm_loss(T5ModelImpl& t5, const at::Tensor& input_ids, const at::Tensor& attention_mask,
                  const at::Tensor& labels) {
  auto enc = t5.encode_ids(input_ids, attention_mask);
  auto h = t5.decoder->forward(t5.embed(t5.shift_right(labels)), {}, enc, attention_mask);
  return t5_token_loss(t5, h, labels);
}

T5Config lm_t5_config(const Config& cfg, int64_t vocab_size) { return inverter_config(cfg, 1, vocab_size).t5; }

LmStage::LmStage(const Config& cfg, Communicator& comm, const std::string& stage_dir, LmTrainData data,
                 std::shared_ptr<SpmTokenizer> tok, bool resume, bool force)
    : data_(std::move(data)), tok_(std::move(tok)) {
  DAEI_CHECK(data_.rows > 0 && data_.texts, "[lm] no training texts");
  max_len_ = cfg.integer("lm.max_length");
  min_drop_ = cfg.real("lm.min_drop");
  max_drop_ = cfg.real("lm.max_drop");
  DAEI_CHECK(min_drop_ <= max_drop_, "lm.min_drop {} is above lm.max_drop {}", min_drop_, max_drop_);
  seed_ = static_cast<uint64_t>(cfg.integer("run.seed"));
  torch::manual_seed(splitmix64(seed_ ^ 0x4C4D5ULL));
  model_ = T5Model(lm_t5_config(cfg, tok_->vocab_size()));
  if (const std::string t5_dir = cfg.str("inverter.t5_dir"); !t5_dir.empty()) {
    model_->load_weights(t5_dir + "/model.safetensors");
    LOG_INFO("[lm] T5 starts from {}", t5_dir);
  }
  const at::Device device = train_device(cfg, comm.local_rank());
  model_->to(device);
  model_->train();
  auto opt = trainer_options(cfg, "lm", stage_dir);
  opt.tag = "lm";
  opt.resume = resume;
  opt.force = force;
  ParamGroupSpec g{"lm", model_->parameters(), cfg.real("lm.lr"), cfg.real("lm.weight_decay"), 0.0};
  trainer_ = std::make_unique<Trainer>(comm, opt, data_.rows, ModuleList{{"", model_.ptr()}}, std::vector{g});
  trainer_->terms = {"loss", "tokens", "kept"};
  trainer_->loss = [this, device](const Batch& b) {
    at::Tensor ids, mask, labels;
    double kept = 0;
    batch(data_, b.rows, b.step, ids, mask, labels, &kept);
    auto tl = lm_loss(*model_, ids.to(device), mask.to(device), labels.to(device));
    return token_sum_loss(tl.sum, tl.count, {{"kept", kept}});
  };
  if (data_.prefetch) trainer_->prefetch = data_.prefetch;
  const double lo = min_drop_, hi = max_drop_;
  const int64_t L = max_len_;
  trainer_->save_final = [this, lo, hi, L](const std::string& dir) {
    model_->save_pretrained(dir + "/lm");
    nlohmann::json j{{"stage", "lm"},
                     {"objective", "denoising autoencoder: each piece dropped with probability r ~ U[min_drop, "
                                   "max_drop] per example; target the whole text"},
                     {"data", "training texts only (no embeddings)"},
                     {"min_drop", lo},
                     {"max_drop", hi},
                     {"max_length", L}};
    write_file_atomic(dir + "/lm/training.json", j.dump(2) + "\n");
  };
}

LmStage::~LmStage() = default;

void LmStage::batch(const LmTrainData& d, const std::vector<int64_t>& rows, int64_t step, at::Tensor& ids,
                    at::Tensor& mask, at::Tensor& labels, double* kept_share) const {
  const auto texts = d.texts(rows);
  std::vector<std::vector<int64_t>> inputs, targets;
  double kept = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto t = tok_->encode(texts[i], max_len_);
    auto ex = lm_corrupt(t, seed_, step, rows[i], min_drop_, max_drop_, tok_->eos_id());
    kept += t.size() > 1 ? double(ex.input.size() - 1) / double(t.size() - 1) : 1.0;
    inputs.push_back(std::move(ex.input));
    targets.push_back(std::move(t));
  }
  auto tb = pad_token_rows(inputs, tok_->pad_id(), 1);
  ids = tb.input_ids;
  mask = tb.attention_mask;
  labels = labels_from_rows(targets);
  if (kept_share) *kept_share = texts.empty() ? 0.0 : kept / double(texts.size());
}

void LmStage::enable_heldout(const Config& cfg, Communicator& comm, LmTrainData val) {
  if (trainer_->options().eval_every <= 0 || val.rows <= 0) return;
  val_ = std::move(val);
  const int64_t rows = std::min(cfg.integer("train.heldout_rows"), val_.rows);
  const int64_t batch_rows = trainer_->options().global_batch;
  const at::Device device = model_->shared->weight.device();
  trainer_->evaluate = [this, rows, batch_rows, device, &comm](int64_t) {
    HeldOutLoss f = [&](const std::vector<int64_t>& r) {
      at::Tensor ids, mask, labels;
      batch(val_, r, 0, ids, mask, labels, nullptr);
      return lm_loss(*model_, ids.to(device), mask.to(device), labels.to(device));
    };
    return std::map<std::string, double>{{"heldout_ce", heldout_ce(comm, rows, batch_rows, *model_, f)}};
  };
}

int LmStage::run() {
  int64_t n = 0;
  for (const auto& p : model_->parameters()) n += p.numel();
  LOG_INFO("[lm] generator for zsinvert: {} parameters (T5 d_model {}, {}+{} layers, vocab {}), denoising "
           "autoencoder on {} training texts (drop rate U[{}, {}]), no embeddings",
           n, model_->cfg.d_model, model_->cfg.num_layers, model_->cfg.num_decoder_layers, model_->cfg.vocab_size,
           data_.rows, min_drop_, max_drop_);
  return trainer_->run();
}

}  // namespace daei
