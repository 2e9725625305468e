// Stage 2, paper §III-B: the inverter, and with the same code and budget its baselines (what and why: stage2.h).
#include "stages/recipes/stage2.h"
#include "stages/recipes/wiener.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "model/attack/dae.h"
#include "model/attack/imported_models.h"
#include "model/net/t5_pretrained.h"
#include "stages/loop/heldout.h"
#include "stages/recipes/shared_options.h"
#include "stages/recipes/token_init.h"
#include "stages/loop/trainer.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

InverterConfig inverter_config(const Config& cfg, int64_t dim, int64_t vocab_size) {
  const auto o = InverterOptions::from_config(cfg);
  InverterConfig c;
  c.dim = dim;
  c.repeat = o.repeat_tokens;
  if (!o.t5_dir.empty()) {
    c.t5 = T5Config::from_file(o.t5_dir + "/config.json");
  } else {
    c.t5.vocab_size = vocab_size;
    c.t5.d_model = o.d_model;
    c.t5.d_kv = o.d_kv;
    c.t5.d_ff = o.d_ff;
    c.t5.num_layers = o.num_layers;
    c.t5.num_decoder_layers = o.num_decoder_layers;
    c.t5.num_heads = o.num_heads;
    c.t5.feed_forward_proj = o.feed_forward_proj;
    c.t5.tie_word_embeddings = true;
  }
  c.t5.dropout_rate = o.dropout;
  DAEI_CHECK(c.t5.vocab_size >= vocab_size, "inverter: T5 vocabulary {} is smaller than the tokenizer's {}",
             c.t5.vocab_size, vocab_size);
  return c;
}

Inverter make_inverter(const Config& cfg, int64_t dim, int64_t vocab_size) {
  Inverter inv(inverter_config(cfg, dim, vocab_size));
  const std::string t5_dir = InverterOptions::from_config(cfg).t5_dir;
  if (!t5_dir.empty()) {
    inv->t5->load_weights(t5_dir + "/model.safetensors");
    LOG_INFO("[model] inverter T5 starts from {}", t5_dir);
  }
  return inv;
}

std::string init_from_folder(const Config& cfg) {
  const std::string dir = InverterOptions::from_config(cfg).init_from;
  DAEI_CHECK(dir.empty() || file_exists(dir + "/inverter.json"),
             "inverter.init_from: {} is not an inverter folder (no inverter.json; `daei import vec2text` writes "
             "OUT/inverter/)", dir);
  return dir;
}

Inverter inverter_from_init(const Config& cfg, int64_t dim, const SpmTokenizer& tok) {
  const auto o = InverterOptions::from_config(cfg);
  const std::string key = "inverter.init_from", dir = init_from_folder(cfg);
  const auto from = InverterImpl::load(dir);
  const InverterConfig want = inverter_config(cfg, dim, tok.vocab_size());
  const bool shape_from_keys = o.t5_dir.empty();  // a fresh T5 of inverter.*'s shape
  const std::string t5_source = shape_from_keys ? "a fresh T5" : "inverter.t5_dir";
  std::vector<std::string> differ;
  auto compare = [&](const std::string& what, const std::string& where, const auto& have, const auto& configured) {
    if (have != configured) differ.push_back(fmt::format("{} {} ({}: {})", what, have, where, configured));
  };
  auto t5_key = [&](const std::string& k) { return shape_from_keys ? "inverter." + k : t5_source; };
  compare("embedding dimension", "the run's embeddings", from->cfg.dim, want.dim);
  compare("repeat tokens", "inverter.repeat_tokens", from->cfg.repeat, want.repeat);
  const T5Config &h = from->cfg.t5, &w = want.t5;
  compare("d_model", t5_key("d_model"), h.d_model, w.d_model);
  compare("d_kv", t5_key("d_kv"), h.d_kv, w.d_kv);
  compare("d_ff", t5_key("d_ff"), h.d_ff, w.d_ff);
  compare("encoder layers", t5_key("num_layers"), h.num_layers, w.num_layers);
  compare("decoder layers", t5_key("num_decoder_layers"), h.num_decoder_layers, w.num_decoder_layers);
  compare("heads", t5_key("num_heads"), h.num_heads, w.num_heads);
  compare("feed-forward", t5_key("feed_forward_proj"), h.feed_forward_proj, w.feed_forward_proj);
  compare("relative-attention buckets", t5_source, h.relative_attention_num_buckets, w.relative_attention_num_buckets);
  compare("tied embeddings", t5_source, h.tie_word_embeddings, w.tie_word_embeddings);
  if (!shape_from_keys) compare("vocabulary", t5_source, h.vocab_size, w.vocab_size);
  DAEI_CHECK(differ.empty(), "{}: {} is not the configured inverter: {}", key, dir, fmt::join(differ, "; "));
  check_tokenizer_fits(dir, h.vocab_size, tok, key);
  InverterConfig c = from->cfg;
  c.t5.dropout_rate = o.dropout;  // trains as the configured inverter would
  Inverter inv(c);
  load_module_state(*inv, module_state(*from), dir);
  return inv;
}

std::shared_ptr<SpmTokenizer> run_tokenizer(const Config& cfg, Communicator& comm, const std::string& run_dir,
                                            const NoisyDataset& train) {
  const auto o = InverterOptions::from_config(cfg);
  if (!o.tokenizer.empty()) return std::make_shared<SpmTokenizer>(o.tokenizer);
  const RunLayout layout(run_dir);
  const std::string dir = layout.tokenizer_dir(), model = layout.tokenizer_model();
  comm.run_on_root([&] {
    if (file_exists(model)) return;
    make_dirs(dir);
    const std::string tmp = temp_sibling(dir + "/spm");
    const int64_t n = std::min<int64_t>(train.size(), o.spm_sentences);
    {
      std::ofstream out(tmp + ".txt");
      const int64_t chunk = 4096;
      for (int64_t i = 0; i < n; i += chunk) {
        std::vector<int64_t> rows;
        for (int64_t r = i; r < std::min(n, i + chunk); ++r) rows.push_back(r);
        for (const auto& t : train.texts(rows)) out << t << "\n";
      }
      DAEI_CHECK(out.good(), "{}.txt: cannot write the tokenizer's training text", tmp);
    }
    SpmTokenizer::train(tmp + ".txt", static_cast<int>(o.vocab_size), tmp,
                        "--num_threads=1 --shuffle_input_sentence=false");
    fs::remove(tmp + ".txt");
    fs::rename(tmp + ".vocab", dir + "/spm.vocab");
    fs::rename(tmp + ".model", model);  // last: its presence means complete
    LOG_INFO("[stage2] SentencePiece model trained on {} texts: {}", n, model);
  });
  return std::make_shared<SpmTokenizer>(model);
}

std::vector<std::vector<int64_t>> token_rows(const SpmTokenizer& tok, const std::vector<std::string>& texts,
                                             int64_t max_len) {
  std::vector<std::vector<int64_t>> rows;
  rows.reserve(texts.size());
  for (const auto& t : texts) rows.push_back(tok.encode(t, max_len));
  return rows;
}

InverterStage::InverterStage(const Config& cfg, Communicator& comm, const std::string& tag,
                             const std::string& stage_dir, InverterTrainData data, std::shared_ptr<SpmTokenizer> tok,
                             bool resume, bool force, const InverterBudget& budget)
    : data_(std::move(data)), tok_(std::move(tok)) {
  DAEI_CHECK(data_.rows > 0 && data_.embeddings && data_.texts, "[{}] no training data", tag);
  // The same initial weights for every inverter of a run (dae-only, noisy, clean): only the inputs differ.
  torch::manual_seed(splitmix64(attack_seed(cfg) ^ 0x1A7E27ULL));
  const auto o = InverterOptions::from_config(cfg);
  const bool fresh = budget.init_dir.empty(), from_init = fresh && !o.init_from.empty();
  inverter_ = !fresh     ? Inverter(InverterImpl::load(budget.init_dir))
              : from_init ? inverter_from_init(cfg, data_.dim, *tok_)
                          : make_inverter(cfg, data_.dim, tok_->vocab_size());
  if (from_init) {
    LOG_INFO("[{}] starts from inverter.init_from {}", tag, o.init_from);
  } else if (fresh && !budget.pretrained_dir.empty()) {
    // Its token embeddings are the pretrained ones (token_init, when on, started the pretraining T5 instead).
    const auto r = load_pretrained_t5(*inverter_->t5, budget.pretrained_dir);
    LOG_INFO("[{}] T5 starts from the pretrained {} ({} tensors copied, {} cut to the tokenizer's pieces)", tag,
             budget.pretrained_dir, r.copied.size(), r.cut.size());
  } else if (fresh && budget.token_box) {
    const auto r = init_token_embeddings(*inverter_->t5, *tok_, *budget.token_box, o.token_init_queries,
                                         splitmix64(attack_seed(cfg) ^ 0x70CE2ULL));
    LOG_INFO("[{}] {}", tag, r.describe());
  }
  DAEI_CHECK(static_cast<bool>(data_.guides) == (budget.guide_words > 0), "[{}] guide lines and guide_words disagree",
             tag);
  if (budget.guide_words > 0) {  // before the optimizer takes the parameters: the copy gate is one
    inverter_->cfg.guide_words = budget.guide_words;
    inverter_->cfg.guide_bow = budget.guide_bow;
    inverter_->cfg.guide_pieces = budget.guide_pieces;
    if (budget.guide_copy) inverter_->enable_guide_copy();
  }
  const at::Device device = train_device(cfg, comm.local_rank());
  inverter_->to(device);
  inverter_->train();
  max_len_ = o.max_length_train;
  auto opt = trainer_options(cfg, budget.section, stage_dir);
  if (budget.steps > 0) opt.total_steps = budget.steps;
  opt.tag = tag;
  opt.resume = resume;
  opt.force = force;
  ParamGroupSpec g{"inverter", inverter_->parameters(), budget.lr > 0 ? budget.lr : cfg.real(budget.lr_key),
                   cfg.real(budget.weight_decay_key), 0.0};
  trainer_ = std::make_unique<Trainer>(comm, opt, data_.rows, ModuleList{{"", inverter_.ptr()}}, std::vector{g});
  trainer_->terms = {"loss", "tokens"};
  trainer_->loss = [this, device](const Batch& b) {
    auto tl = loss_of(data_, b.rows, device);
    LossOutput out;
    out.loss = tl.sum;
    out.count = static_cast<double>(tl.count);
    out.terms = {{"loss", tl.sum.item<double>() / std::max<int64_t>(1, tl.count)},
                 {"tokens", static_cast<double>(tl.count)}};
    return out;
  };
  if (data_.prefetch) trainer_->prefetch = data_.prefetch;
  const std::string input = data_.input;
  trainer_->save_final = [this, input, tag](const std::string& dir) {
    inverter_->save(dir + "/inverter");
    json j{{"stage", tag}, {"input", input}, {"max_length_train", max_len_}};
    write_file_atomic(dir + "/inverter/training.json", j.dump(2) + "\n");
  };
}

InverterStage::~InverterStage() = default;

TokenLoss InverterStage::loss_of(const InverterTrainData& d, const std::vector<int64_t>& rows,
                                 const at::Device& device) {
  auto e = d.embeddings(rows).to(device);
  auto labels = labels_from_rows(token_rows(*tok_, d.texts(rows), max_len_)).to(device);
  if (!d.guides) return inverter_->loss(e, labels);
  DAEI_CHECK(inverter_->cfg.guide_words > 0, "[inverter] guide lines for an unguided inverter");
  const auto g = tok_->encode_batch(d.guides(rows), inverter_->cfg.guide_pieces);
  const InverterGuide guide{g.input_ids, g.attention_mask};
  return inverter_->loss(e, labels, &guide);
}

void InverterStage::enable_heldout(const Config& cfg, Communicator& comm, InverterTrainData val) {
  if (trainer_->options().eval_every <= 0 || val.rows <= 0) return;
  val_ = std::move(val);
  const int64_t rows = std::min(HeldoutOptions::from_config(cfg).rows, val_.rows);
  const int64_t batch = trainer_->options().global_batch;
  const at::Device device = inverter_->t5->shared->weight.device();
  trainer_->evaluate = [this, rows, batch, device, &comm](int64_t) {
    HeldOutLoss f = [&](const std::vector<int64_t>& r) { return loss_of(val_, r, device); };
    return std::map<std::string, double>{{"heldout_ce", heldout_ce(comm, rows, batch, *inverter_, f)}};
  };
}

int InverterStage::run() {
  int64_t n = 0;
  for (const auto& p : inverter_->parameters()) n += p.numel();
  LOG_INFO("[{}] inverter: {} parameters (T5 d_model {}, {}+{} layers, vocab {}), R {}, input {}, {} rows",
           trainer_->options().tag, n, inverter_->cfg.t5.d_model, inverter_->cfg.t5.num_layers,
           inverter_->cfg.t5.num_decoder_layers, inverter_->cfg.t5.vocab_size, inverter_->cfg.repeat, data_.input,
           data_.rows);
  return trainer_->run();
}

InverterTrainData denoised_data(std::shared_ptr<const NoisyDataset> train, const std::string& dae_dir) {
  auto dae = std::make_shared<Dae>(Dae::load_for(dae_dir, train->sigma()));
  InverterTrainData d;
  d.rows = train->size();
  d.dim = train->dim();
  d.input = "denoised";
  d.embeddings = [train, dae](const std::vector<int64_t>& rows) {
    torch::NoGradGuard ng;
    auto y = train->noisy(rows);
    return (*dae)->forward(y, torch::full({y.size(0)}, (*dae)->sigma0()));
  };
  d.texts = [train](const std::vector<int64_t>& rows) { return train->texts(rows); };
  d.prefetch = [train](const std::vector<int64_t>& rows) { train->prefetch(rows, true); };
  return d;
}

InverterTrainData wiener_data(std::shared_ptr<const NoisyDataset> train, const LinearEstimator& filter) {
  InverterTrainData d = noisy_data(train);
  d.input = "wiener";
  d.embeddings = [train, filter](const std::vector<int64_t>& rows) { return filter.apply(train->noisy(rows)); };
  return d;
}

InverterTrainData noisy_data(std::shared_ptr<const NoisyDataset> train) {
  InverterTrainData d;
  d.rows = train->size();
  d.dim = train->dim();
  d.input = "noisy";
  d.embeddings = [train](const std::vector<int64_t>& rows) { return train->noisy(rows); };
  d.texts = [train](const std::vector<int64_t>& rows) { return train->texts(rows); };
  d.prefetch = [train](const std::vector<int64_t>& rows) { train->prefetch(rows, true); };
  return d;
}

}  // namespace daei
