// The bag-of-words inverter's stage (what and why: bow.h).
#include "stages/recipes/bow.h"

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "model/text/words.h"
#include "stages/loop/heldout.h"
#include "stages/loop/trainer.h"
#include "stages/recipes/shared_options.h"

namespace daei {
using json = nlohmann::json;

namespace {

std::vector<int64_t> first_rows(int64_t n) {
  std::vector<int64_t> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

// Every text of `data` (or the first `limit`, when > 0), read in blocks.
std::vector<std::string> all_texts(const InverterTrainData& data, int64_t limit) {
  const int64_t n = limit > 0 ? std::min(limit, data.rows) : data.rows;
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += 8192) {
    std::vector<int64_t> rows;
    for (int64_t r = i; r < std::min(n, i + 8192); ++r) rows.push_back(r);
    for (auto& t : data.texts(rows)) out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

BowVocabulary bow_vocabulary(const std::vector<std::string>& texts, int64_t size) {
  std::vector<std::vector<std::string>> tokens;
  tokens.reserve(texts.size());
  std::unordered_map<std::string, int64_t> count;  // texts holding the word
  for (const auto& t : texts) {
    tokens.push_back(metrics::content_words(t));
    for (const auto& w : tokens.back()) ++count[w];
  }
  std::vector<std::pair<std::string, int64_t>> ranked(count.begin(), count.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  if (static_cast<int64_t>(ranked.size()) > size) ranked.resize(static_cast<size_t>(size));
  BowVocabulary v;
  std::unordered_map<std::string, int32_t> index;
  for (const auto& [w, c] : ranked) {
    index.emplace(w, static_cast<int32_t>(v.words.size()));
    v.words.push_back(w);
  }
  // content_words gives each text's words sorted; keep them in the text's order of first appearance instead.
  v.text_words.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> ids;
    for (const auto& w : metrics::content_tokens(texts[i]))
      if (auto it = index.find(w); it != index.end() && std::find(ids.begin(), ids.end(), it->second) == ids.end())
        ids.push_back(it->second);
    v.text_words.push_back(std::move(ids));
  }
  return v;
}

at::Tensor bow_targets(const std::vector<std::vector<int32_t>>& text_words, const std::vector<int64_t>& rows,
                       int64_t vocab) {
  auto t = torch::zeros({static_cast<int64_t>(rows.size()), vocab});
  auto a = t.accessor<float, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& ids = text_words.at(static_cast<size_t>(rows[i]));
    for (int32_t id : ids) a[static_cast<int64_t>(i)][id] = 1.0f / static_cast<float>(ids.size());
  }
  return t;
}

double mean_content_f1(const std::vector<RankedWords>& rows, const std::vector<std::string>& texts, int64_t k,
                       double min_prob) {
  DAEI_CHECK(rows.size() == texts.size() && !rows.empty(), "bow: {} predictions for {} texts", rows.size(),
             texts.size());
  double sum = 0;
  for (size_t i = 0; i < rows.size(); ++i) sum += metrics::content_f1(rows[i].answer(k, min_prob), texts[i]);
  return sum / static_cast<double>(rows.size());
}

AnswerRule choose_answer_rule(const std::vector<RankedWords>& rows, const std::vector<std::string>& texts,
                              int64_t k_max) {
  static const double kMinProbGrid[] = {0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3};
  AnswerRule best;
  best.content_f1 = -1;
  auto consider = [&](int64_t k, double p, const std::string& name) {
    const double f = mean_content_f1(rows, texts, k, p);
    best.tried.emplace_back(name, f);
    if (f > best.content_f1) best.k = k, best.min_prob = p, best.content_f1 = f;
  };
  for (int64_t k = 1; k <= k_max; ++k) consider(k, 0.0, fmt::format("k={}", k));
  for (double p : kMinProbGrid) consider(k_max, p, fmt::format("p>={}", p));
  return best;
}

BowStage::BowStage(const Config& cfg, Communicator& comm, const std::string& tag, const std::string& stage_dir,
                   InverterTrainData data, InverterTrainData val, bool resume, bool force)
    : data_(std::move(data)), val_(std::move(val)) {
  DAEI_CHECK(data_.rows > 0 && data_.embeddings && data_.texts, "[{}] no training data", tag);
  // Every rank counts the same texts: the same vocabulary everywhere, with no collective.
  vocab_ = bow_vocabulary(all_texts(data_, cfg.integer("bow.vocab_texts")), cfg.integer("bow.vocab_size"));
  DAEI_CHECK(!vocab_.words.empty(), "[{}] the training texts hold no content word", tag);
  const int64_t covered = static_cast<int64_t>(std::count_if(vocab_.text_words.begin(), vocab_.text_words.end(),
                                                             [](const auto& w) { return !w.empty(); }));
  LOG_INFO("[{}] vocabulary: {} content words from {} texts ({} of them hold one), input {}", tag,
           vocab_.words.size(), vocab_.text_words.size(), covered, data_.input);
  // The same initial weights for every bag-of-words row of a run: only the inputs differ.
  torch::manual_seed(splitmix64(attack_seed(cfg) ^ 0xB0B0ULL));
  BowOptions o;
  o.dim = data_.dim;
  o.hidden = cfg.integer("bow.hidden");
  o.depth = cfg.integer("bow.depth");
  model_ = BowInverter(o, vocab_.words);
  model_->fit_standardisation(data_.embeddings(first_rows(std::min<int64_t>(data_.rows, 8192))));
  const at::Device device = train_device(cfg, comm.local_rank());
  model_->to(device);
  model_->train();
  auto opt = trainer_options(cfg, "bow", stage_dir);
  opt.tag = tag;
  opt.resume = resume;
  opt.force = force;
  ParamGroupSpec g{"bow", model_->parameters(), cfg.real("bow.lr"), cfg.real("bow.weight_decay"), 0.0};
  // Rows past the vocabulary's texts (bow.vocab_texts) have no target: train on the counted rows only.
  const int64_t rows = static_cast<int64_t>(vocab_.text_words.size());
  trainer_ = std::make_unique<Trainer>(comm, opt, rows, ModuleList{{"", model_.ptr()}}, std::vector{g});
  trainer_->terms = {"loss"};
  const int64_t V = static_cast<int64_t>(vocab_.words.size());
  trainer_->loss = [this, device, V](const Batch& b) {
    auto logits = model_->forward(data_.embeddings(b.rows).to(device));
    auto target = bow_targets(vocab_.text_words, b.rows, V).to(device);
    auto loss = -(target * torch::log_softmax(logits, 1)).sum(1).mean();
    LossOutput out;
    out.loss = loss;
    out.terms = {{"loss", loss.item<double>()}};
    return out;
  };
  if (data_.prefetch) trainer_->prefetch = data_.prefetch;
  const int64_t heldout = val_.rows > 0 ? std::min(HeldoutOptions::from_config(cfg).rows, val_.rows) : 0;
  if (trainer_->options().eval_every > 0 && heldout > 0) {
    const int64_t batch = trainer_->options().global_batch;
    trainer_->evaluate = [this, heldout, batch, &comm](int64_t) {
      HeldOutScores f = [&](const std::vector<int64_t>& r) {
        const auto top = model_->ranked(val_.embeddings(r), 3);
        const auto texts = val_.texts(r);
        std::vector<double> s;
        for (size_t i = 0; i < r.size(); ++i) s.push_back(metrics::content_f1(top[i].answer(3, 0.0), texts[i]));
        return s;
      };
      return std::map<std::string, double>{{"heldout_content_f1", heldout_mean(comm, heldout, batch, *model_, f)}};
    };
  }
  const int64_t k_max = cfg.integer("bow.k_max"), k_rows = cfg.integer("bow.k_rows");
  trainer_->save_final = [this, tag, k_max, k_rows](const std::string& dir) {
    // The answer rule on val rows (the attacker's own texts, inputs as in training); without val rows the default.
    json choice{{"stage", tag}, {"input", data_.input}, {"vocabulary", vocab_.words.size()}};
    if (val_.rows > 0) {
      const auto rows = first_rows(std::min(k_rows, val_.rows));
      std::vector<RankedWords> top;
      for (size_t i = 0; i < rows.size(); i += 512) {
        const std::vector<int64_t> block(rows.begin() + static_cast<int64_t>(i),
                                         rows.begin() + static_cast<int64_t>(std::min(rows.size(), i + 512)));
        for (auto& w : model_->ranked(val_.embeddings(block), k_max)) top.push_back(std::move(w));
      }
      const AnswerRule rule = choose_answer_rule(top, val_.texts(rows), k_max);
      model_->set_answer(rule.k, rule.min_prob);
      choice["val_rows"] = rows.size();
      choice["val_content_f1"] = rule.content_f1;
      for (const auto& [name, f] : rule.tried) choice["tried"][name] = f;
      LOG_INFO("[{}] answers: up to {} words{} (val content F1 {:.4f} on {} rows)", tag, rule.k,
               rule.min_prob > 0 ? fmt::format(" of probability >= {}", rule.min_prob) : std::string(),
               rule.content_f1, rows.size());
    }
    choice["k"] = model_->options().k;
    choice["min_prob"] = model_->options().min_prob;
    model_->save(dir + "/bow");
    write_file_atomic(dir + "/bow/k_choice.json", choice.dump(2) + "\n");
  };
}

BowStage::~BowStage() = default;

int BowStage::run() {
  int64_t n = 0;
  for (const auto& p : model_->parameters()) n += p.numel();
  LOG_INFO("[{}] bag-of-words inverter: {} parameters (depth {}, hidden {}, {} words)", trainer_->options().tag, n,
           model_->options().depth, model_->options().hidden, model_->words().size());
  return trainer_->run();
}

}  // namespace daei
