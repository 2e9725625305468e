#include "eval/floors.h"

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "core/config.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/run_layout.h"
#include "eval/metrics.h"
#include "eval/systems.h"
#include "model/release/release.h"
#include "stages/loop/data_source.h"

namespace daei {

namespace {

std::vector<std::string> token_set(const std::string& text) {
  auto t = metrics::word_tokenize(text);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

// metrics::token_f1 from counts: tp shared tokens, a constant of c tokens, a truth of t tokens.
double f1_of(int64_t tp, int64_t c, int64_t t) {
  const double precision = static_cast<double>(tp) / (static_cast<double>(t) + 1e-20);
  const double recall = static_cast<double>(tp) / (static_cast<double>(c) + 1e-20);
  return (2 * precision * recall) / (precision + recall + 1e-20);
}

}  // namespace

ConstantFloor choose_constant_floor(const std::vector<std::string>& texts, int64_t max_candidates) {
  ConstantFloor out;
  out.texts = static_cast<int64_t>(texts.size());
  if (texts.empty()) return out;
  std::vector<std::vector<std::string>> sets;
  sets.reserve(texts.size());
  std::map<std::string, int64_t> df;
  for (const auto& t : texts) {
    sets.push_back(token_set(t));
    for (const auto& w : sets.back()) ++df[w];
  }
  // Candidates: the most document-frequent tokens that survive being written alone (so the joined string tokenises
  // back to the chosen set).
  std::vector<std::pair<std::string, int64_t>> by_df(df.begin(), df.end());
  std::stable_sort(by_df.begin(), by_df.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> cand;
  for (const auto& [w, k] : by_df) {
    if (static_cast<int64_t>(cand.size()) >= max_candidates) break;
    if (metrics::word_tokenize(w) == std::vector<std::string>{w}) cand.push_back(w);
  }
  const std::size_t n = texts.size();
  // Each candidate's texts (a list, not an n-wide mask: memory is the corpus's token count whatever max_candidates).
  std::vector<std::vector<std::size_t>> holds(cand.size());
  for (std::size_t c = 0; c < cand.size(); ++c)
    for (std::size_t i = 0; i < n; ++i)
      if (std::binary_search(sets[i].begin(), sets[i].end(), cand[c])) holds[c].push_back(i);
  std::vector<int64_t> tp(n, 0), size(n);
  for (std::size_t i = 0; i < n; ++i) size[i] = static_cast<int64_t>(sets[i].size());
  std::vector<char> taken(cand.size(), 0);
  std::vector<std::string> chosen;
  double best_sum = 0;  // the empty string scores 0 on every text
  for (;;) {
    const int64_t c_next = static_cast<int64_t>(chosen.size()) + 1;
    // A larger set changes every text's F1; a candidate adds a hit only on its own texts.
    double base = 0;
    for (std::size_t i = 0; i < n; ++i) base += f1_of(tp[i], c_next, size[i]);
    std::ptrdiff_t pick = -1;
    double pick_sum = best_sum;
    for (std::size_t c = 0; c < cand.size(); ++c) {
      if (taken[c]) continue;
      double sum = base;
      for (const std::size_t i : holds[c]) sum += f1_of(tp[i] + 1, c_next, size[i]) - f1_of(tp[i], c_next, size[i]);
      if (sum > pick_sum + 1e-12) pick_sum = sum, pick = static_cast<std::ptrdiff_t>(c);
    }
    if (pick < 0) break;
    taken[pick] = 1;
    chosen.push_back(cand[pick]);
    for (const std::size_t i : holds[pick]) ++tp[i];
    best_sum = pick_sum;
  }
  for (const auto& w : chosen) out.text += (out.text.empty() ? "" : " ") + w;
  double sum = 0;  // scored as every row is, by the metric itself
  for (const auto& t : texts) sum += metrics::token_f1(out.text, t);
  out.mean_token_f1 = sum / static_cast<double>(n);
  return out;
}

std::vector<int64_t> nearest_answers(const NoisyDataset& answers, int64_t rows, const at::Tensor& y,
                                     int64_t chunk_rows) {
  torch::NoGradGuard ng;
  const int64_t n = y.size(0);
  const auto q = torch::nn::functional::normalize(y.to(torch::kFloat32),
                                                  torch::nn::functional::NormalizeFuncOptions().dim(1));
  auto best = torch::full({n}, -std::numeric_limits<float>::infinity(), torch::kFloat32);
  auto best_row = torch::zeros({n}, torch::kLong);
  for (int64_t begin = 0; begin < rows; begin += chunk_rows) {
    const int64_t end = std::min(rows, begin + chunk_rows);
    std::vector<int64_t> idx(static_cast<std::size_t>(end - begin));
    std::iota(idx.begin(), idx.end(), begin);
    const auto a = torch::nn::functional::normalize(answers.noisy(idx),
                                                    torch::nn::functional::NormalizeFuncOptions().dim(1));
    const auto [score, arg] = q.matmul(a.t()).max(1);
    const auto better = score > best;  // strictly: the first row wins a tie, whatever the chunking
    best = torch::where(better, score, best);
    best_row = torch::where(better, arg + begin, best_row);
  }
  return std::vector<int64_t>(best_row.data_ptr<int64_t>(), best_row.data_ptr<int64_t>() + n);
}

std::vector<SystemSpec> floor_systems(const Config& cfg, const EvalContext& ctx, const std::string& run_dir) {
  if (!cfg.flag("eval.floors")) return {};
  if (cfg.integer("train.synthetic_rows") > 0) {
    LOG_INFO("[eval] no floor rows: train.synthetic_rows has no texts to choose a constant from or to retrieve");
    return {};
  }
  if (!RunLayout(run_dir).cache_complete("train")) {  // e.g. a run whose train cache was removed after training
    LOG_WARN("[eval] no floor rows: {} has no complete train cache to choose a constant from or to retrieve",
             run_dir);
    return {};
  }
  FloorOptions opt;
  opt.constant_texts = cfg.integer("eval.floor_texts");
  opt.candidates = cfg.integer("eval.floor_candidates");
  opt.retrieval_rows = cfg.integer("eval.floor_retrieval_rows");
  const std::shared_ptr<const NoisyDataset> train = open_noisy_split(cfg, run_dir, "train", ctx.release());
  const int64_t k = std::min(opt.constant_texts, train->size());
  std::vector<int64_t> first(static_cast<std::size_t>(k));
  std::iota(first.begin(), first.end(), 0);
  const auto constant = std::make_shared<ConstantFloor>(choose_constant_floor(train->texts(first), opt.candidates));
  LOG_INFO("[eval] floor-constant \"{}\": mean token F1 {:.4f} on the first {} training texts", constant->text,
           constant->mean_token_f1, constant->texts);
  const int64_t rows = opt.retrieval_rows > 0 ? std::min(opt.retrieval_rows, train->size()) : train->size();
  const EvalContext* c = &ctx;
  std::vector<SystemSpec> s;
  s.push_back({"floor-constant", false, [constant](const EvalSplit& sp) {
                 return texts_run(std::vector<std::string>(sp.texts.size(), constant->text));
               }});
  s.back().floor = true;
  s.push_back({"floor-retrieval", false, [train, rows, c](const EvalSplit& sp) {
                 // Cut to max_length_eval pieces and decoded, as the truths are.
                 SystemRun run = texts_run(reference_texts(*c, train->texts(nearest_answers(*train, rows, sp.noisy))));
                 run.index_queries = static_cast<double>(rows);
                 return run;
               }});
  s.back().floor = true;
  return s;
}

}  // namespace daei
