#include "stages/recipes/lm.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "model/text/token_batch.h"
#include "stages/loop/heldout.h"
#include "stages/recipes/shared_options.h"
#include "stages/recipes/stage2.h"
#include "stages/recipes/token_init.h"
#include "stages/loop/trainer.h"

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

T5Config lm_t5_config(const Config& cfg, int64_t vocab_size, int64_t extra_vocab) {
  T5Config c = inverter_config(cfg, 1, vocab_size).t5;
  c.vocab_size += extra_vocab;
  return c;
}

LmOptions LmOptions::from_config(const Config& cfg) {
  LmOptions o;
  fields(o, config_reader(cfg, "lm"));
  return o;
}

TextObjective lm_objective(const Config& cfg, int64_t eos_id) {
  const auto options = LmOptions::from_config(cfg);
  TextObjective o;
  o.max_length = options.max_length;
  o.lr = options.lr;
  o.weight_decay = options.weight_decay;
  const double lo = options.min_drop, hi = options.max_drop;
  DAEI_CHECK(lo <= hi, "lm.min_drop {} is above lm.max_drop {}", lo, hi);
  const uint64_t seed = static_cast<uint64_t>(cfg.integer("run.seed"));
  o.make = [=](const std::vector<int64_t>& ids, int64_t step, int64_t row) {
    auto ex = lm_corrupt(ids, seed, step, row, lo, hi, eos_id);
    TextExample t;
    t.kept = ids.size() > 1 ? double(ex.input.size() - 1) / double(ids.size() - 1) : 1.0;
    t.input = std::move(ex.input);
    t.target = ids;
    return t;
  };
  o.about_json = nlohmann::json{{"stage", "lm"},
                                {"objective", "denoising autoencoder: each piece dropped with probability r ~ "
                                              "U[min_drop, max_drop] per example; target the whole text"},
                                {"data", "training texts only (no embeddings)"},
                                {"min_drop", lo},
                                {"max_drop", hi},
                                {"max_length", o.max_length}}
                     .dump(2);
  o.summary = fmt::format("generator for zsinvert, denoising autoencoder (drop rate U[{}, {}])", lo, hi);
  return o;
}

LmStage::LmStage(const Config& cfg, Communicator& comm, const std::string& stage_dir, LmTrainData data,
                 std::shared_ptr<SpmTokenizer> tok, bool resume, bool force)
    : LmStage(cfg, comm, stage_dir, std::move(data), tok, resume, force, lm_objective(cfg, tok->eos_id())) {}

LmStage::LmStage(const Config& cfg, Communicator& comm, const std::string& stage_dir, LmTrainData data,
                 std::shared_ptr<SpmTokenizer> tok, bool resume, bool force, TextObjective obj,
                 std::shared_ptr<const NoisyEmbedder> token_box)
    : data_(std::move(data)), tok_(std::move(tok)), obj_(std::move(obj)) {
  const std::string& tag = obj_.section;
  DAEI_CHECK(data_.rows > 0 && data_.texts, "[{}] no training texts", tag);
  DAEI_CHECK(obj_.make, "[{}] no training objective", tag);
  const uint64_t seed = static_cast<uint64_t>(cfg.integer("run.seed"));
  torch::manual_seed(splitmix64(seed ^ 0x4C4D5ULL));
  model_ = T5Model(lm_t5_config(cfg, tok_->vocab_size(), obj_.extra_vocab));
  const auto inverter_options = InverterOptions::from_config(cfg);
  if (const std::string& t5_dir = inverter_options.t5_dir; !t5_dir.empty()) {
    DAEI_CHECK(obj_.extra_vocab == 0, "[{}] cannot start from inverter.t5_dir {}: its vocabulary has no room for {} "
               "extra ids", tag, t5_dir, obj_.extra_vocab);
    model_->load_weights(t5_dir + "/model.safetensors");
    LOG_INFO("[{}] T5 starts from {}", tag, t5_dir);
  } else if (token_box) {
    const auto r = init_token_embeddings(*model_, *tok_, *token_box, inverter_options.token_init_queries,
                                         splitmix64(seed ^ 0x70CE2ULL));
    LOG_INFO("[{}] {}", tag, r.describe());
  }
  const at::Device device = train_device(cfg, comm.local_rank());
  model_->to(device);
  model_->train();
  auto opt = trainer_options(cfg, tag, stage_dir);
  opt.tag = tag;
  opt.resume = resume;
  opt.force = force;
  ParamGroupSpec g{tag, model_->parameters(), obj_.lr, obj_.weight_decay, 0.0};
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
  trainer_->save_final = [this](const std::string& dir) {
    const std::string out = dir + "/" + obj_.final_name;
    model_->save_pretrained(out);
    write_file_atomic(out + "/training.json", obj_.about_json + "\n");
  };
}

LmStage::~LmStage() = default;

void LmStage::batch(const LmTrainData& d, const std::vector<int64_t>& rows, int64_t step, at::Tensor& ids,
                    at::Tensor& mask, at::Tensor& labels, double* kept_share) const {
  const auto texts = d.texts(rows);
  std::vector<std::vector<int64_t>> inputs, targets;
  double kept = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ex = obj_.make(tok_->encode(texts[i], obj_.max_length), step, rows[i]);
    kept += ex.kept;
    inputs.push_back(std::move(ex.input));
    targets.push_back(std::move(ex.target));
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
  const int64_t rows = std::min(HeldoutOptions::from_config(cfg).rows, val_.rows);
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
  LOG_INFO("[{}] {}: {} parameters (T5 d_model {}, {}+{} layers, vocab {}), on {} training texts, no embeddings",
           obj_.section, obj_.summary, n, model_->cfg.d_model, model_->cfg.num_layers,
           model_->cfg.num_decoder_layers, model_->cfg.vocab_size, data_.rows);
  return trainer_->run();
}

}  // namespace daei
