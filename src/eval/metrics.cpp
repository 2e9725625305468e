// Text metrics from tokens (metrics.h): BLEU, token F1, ROUGE-L and ROUGE-1, exact match, and the bootstrap
// intervals over texts. The tokenisers are in metrics_tokenize.cpp.
#include "eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <unordered_map>

namespace daei::metrics {
namespace {

std::vector<int> to_ids(const std::vector<std::string>& toks, std::unordered_map<std::string, int>& vocab) {
  std::vector<int> ids;
  ids.reserve(toks.size());
  for (const auto& s : toks) {
    ids.push_back(vocab.emplace(s, static_cast<int>(vocab.size())).first->second);
  }
  return ids;
}

using NgramCounts = std::map<std::vector<int>, int64_t>;

NgramCounts count_ngrams(const std::vector<int>& ids, int min_n, int max_n) {
  NgramCounts c;
  for (int n = min_n; n <= max_n; ++n) {
    for (std::size_t i = 0; i + static_cast<std::size_t>(n) <= ids.size(); ++i) {
      ++c[std::vector<int>(ids.begin() + static_cast<std::ptrdiff_t>(i),
                           ids.begin() + static_cast<std::ptrdiff_t>(i) + n)];
    }
  }
  return c;
}

// Draws an index in [0, n) from a 64-bit generator without modulo bias (the accepted draws are a multiple of n).
uint64_t draw_index(std::mt19937_64& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
  for (;;) {
    const uint64_t x = rng();
    if (x >= threshold) return x % n;
  }
}

// numpy.percentile(..., method="linear") on sorted data, q in [0, 1].
double quantile_sorted(const std::vector<double>& x, double q) {
  const double h = q * static_cast<double>(x.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  if (lo + 1 >= x.size()) return x.back();
  const double frac = h - static_cast<double>(lo);
  return x[lo] + frac * (x[lo + 1] - x[lo]);
}

}  // namespace

// ---- BLEU ----

BleuStats& BleuStats::operator+=(const BleuStats& o) {
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    correct[n] += o.correct[n];
    total[n] += o.total[n];
  }
  sys_len += o.sys_len;
  ref_len += o.ref_len;
  return *this;
}

BleuStats bleu_stats(const std::string& hyp, const std::vector<std::string>& refs) {
  std::unordered_map<std::string, int> vocab;
  const std::vector<int> h = to_ids(tokenize_13a(hyp), vocab);
  NgramCounts ref_max;
  std::vector<int64_t> ref_lens;
  for (const auto& r : refs) {
    const std::vector<int> ids = to_ids(tokenize_13a(r), vocab);
    ref_lens.push_back(static_cast<int64_t>(ids.size()));
    for (const auto& [g, c] : count_ngrams(ids, 1, kBleuMaxOrder)) {
      auto& m = ref_max[g];
      m = std::max(m, c);
    }
  }
  BleuStats st;
  st.sys_len = static_cast<int64_t>(h.size());
  int64_t best_diff = -1;
  for (int64_t rl : ref_lens) {  // closest reference length, the shorter on a tie
    const int64_t diff = std::llabs(st.sys_len - rl);
    if (best_diff == -1 || diff < best_diff) {
      best_diff = diff;
      st.ref_len = rl;
    } else if (diff == best_diff && rl < st.ref_len) {
      st.ref_len = rl;
    }
  }
  for (const auto& [g, c] : count_ngrams(h, 1, kBleuMaxOrder)) {
    const std::size_t n = g.size() - 1;
    st.total[n] += c;
    const auto it = ref_max.find(g);
    if (it != ref_max.end()) st.correct[n] += std::min(c, it->second);
  }
  return st;
}

double bleu_from_stats(const BleuStats& st, bool effective_order) {
  double bp = 1.0;
  if (st.sys_len < st.ref_len) {
    bp = st.sys_len > 0 ? std::exp(1.0 - static_cast<double>(st.ref_len) / static_cast<double>(st.sys_len)) : 0.0;
  }
  if (std::all_of(st.correct.begin(), st.correct.end(), [](int64_t c) { return c == 0; })) return 0.0;
  std::array<double, kBleuMaxOrder> precisions{};
  double smooth_mteval = 1.0;
  int eff_order = kBleuMaxOrder;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    if (st.total[n - 1] == 0) break;
    if (effective_order) eff_order = n;
    if (st.correct[n - 1] == 0) {
      smooth_mteval *= 2;
      precisions[n - 1] = 100.0 / (smooth_mteval * static_cast<double>(st.total[n - 1]));
    } else {
      precisions[n - 1] = 100.0 * static_cast<double>(st.correct[n - 1]) / static_cast<double>(st.total[n - 1]);
    }
  }
  double sum = 0.0;
  for (int n = 0; n < eff_order; ++n) {
    sum += precisions[n] == 0.0 ? -9999999999.0 : std::log(precisions[n]);  // sacrebleu my_log
  }
  return bp * std::exp(sum / eff_order) / 100.0;
}

double sentence_bleu(const std::string& hyp, const std::string& ref) {
  return bleu_from_stats(bleu_stats(hyp, {ref}), true);
}

double vec2text_bleu(const std::string& hyp, const std::string& ref) {
  return bleu_from_stats(bleu_stats(hyp, {ref}), false);
}

double corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams) {
  BleuStats total;
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    std::vector<std::string> refs;
    for (const auto& stream : ref_streams) {
      if (stream.size() != hyps.size()) throw std::invalid_argument("corpus_bleu: a reference stream's size differs");
      refs.push_back(stream[i]);
    }
    total += bleu_stats(hyps[i], refs);
  }
  return bleu_from_stats(total, false);
}

// ---- overlap ----

double token_f1(const std::string& hyp, const std::string& ref) {
  std::vector<std::string> t = word_tokenize(ref), p = word_tokenize(hyp);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  std::vector<std::string> both;
  std::set_intersection(t.begin(), t.end(), p.begin(), p.end(), std::back_inserter(both));
  // As vec2text writes it (its "precision" is TP/|true|, its "recall" TP/|pred|; F1 is symmetric).
  const auto tp = static_cast<int64_t>(both.size());
  const int64_t fp = static_cast<int64_t>(t.size()) - tp, fn = static_cast<int64_t>(p.size()) - tp;
  const double precision = static_cast<double>(tp) / (static_cast<double>(tp + fp) + 1e-20);
  const double recall = static_cast<double>(tp) / (static_cast<double>(tp + fn) + 1e-20);
  return (2 * precision * recall) / (precision + recall + 1e-20);
}

std::size_t lcs_length(const std::vector<int>& a, const std::vector<int>& b) {
  const std::vector<int>& rows = a.size() >= b.size() ? a : b;
  const std::vector<int>& cols = a.size() >= b.size() ? b : a;
  std::vector<uint32_t> prev(cols.size() + 1, 0), cur(cols.size() + 1, 0);
  for (int x : rows) {
    for (std::size_t j = 1; j <= cols.size(); ++j) {
      cur[j] = x == cols[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    }
    std::swap(prev, cur);
  }
  return prev[cols.size()];
}

namespace {
double fmeasure(double precision, double recall) {  // rouge-score scoring.fmeasure
  return precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
}
}  // namespace

double rouge_l(const std::string& hyp, const std::string& ref) {
  std::unordered_map<std::string, int> vocab;
  const std::vector<int> t = to_ids(rouge_tokenize(ref), vocab), p = to_ids(rouge_tokenize(hyp), vocab);
  if (t.empty() || p.empty()) return 0.0;
  const auto lcs = static_cast<double>(lcs_length(t, p));
  return fmeasure(lcs / static_cast<double>(p.size()), lcs / static_cast<double>(t.size()));
}

double rouge1(const std::string& hyp, const std::string& ref) {
  std::unordered_map<std::string, int> vocab;
  const std::vector<int> t = to_ids(rouge_tokenize(ref), vocab), p = to_ids(rouge_tokenize(hyp), vocab);
  std::vector<int64_t> ct(vocab.size(), 0), cp(vocab.size(), 0);
  for (int x : t) ++ct[static_cast<std::size_t>(x)];
  for (int x : p) ++cp[static_cast<std::size_t>(x)];
  int64_t inter = 0;
  for (std::size_t k = 0; k < vocab.size(); ++k) inter += std::min(ct[k], cp[k]);
  const double precision = static_cast<double>(inter) / static_cast<double>(std::max<std::size_t>(p.size(), 1));
  const double recall = static_cast<double>(inter) / static_cast<double>(std::max<std::size_t>(t.size(), 1));
  return fmeasure(precision, recall);
}

bool exact_match(const std::string& hyp, const std::string& ref) { return hyp == ref; }

PerText score_all(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size()) throw std::invalid_argument("score_all: hypotheses and references differ in count");
  PerText out;
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    const BleuStats st = bleu_stats(hyps[i], {refs[i]});
    out.bleu.push_back(bleu_from_stats(st, false));
    out.bleu_sentence.push_back(bleu_from_stats(st, true));
    out.token_f1.push_back(token_f1(hyps[i], refs[i]));
    out.rouge_l.push_back(rouge_l(hyps[i], refs[i]));
    out.rouge1.push_back(rouge1(hyps[i], refs[i]));
    out.exact.push_back(exact_match(hyps[i], refs[i]) ? 1.0 : 0.0);
    out.content_f1.push_back(content_f1(hyps[i], refs[i]));
    out.content_recall.push_back(content_recall(hyps[i], refs[i]));
  }
  return out;
}

// ---- intervals ----

double mean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0.0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

Interval bootstrap_ci(const std::vector<double>& values, int resamples, uint64_t seed, double level) {
  if (resamples < 1) throw std::invalid_argument("bootstrap_ci: resamples must be >= 1");
  if (!(level > 0.0 && level < 1.0)) throw std::invalid_argument("bootstrap_ci: level must be in (0, 1)");
  if (values.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {nan, nan};
  }
  if (std::all_of(values.begin(), values.end(), [&](double x) { return x == values[0]; })) {
    return {values[0], values[0]};
  }
  const uint64_t n = values.size();
  std::mt19937_64 rng(seed);
  std::vector<double> means(static_cast<std::size_t>(resamples));
  for (auto& m : means) {
    double s = 0.0;
    for (uint64_t k = 0; k < n; ++k) s += values[draw_index(rng, n)];
    m = s / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  const double tail = (1.0 - level) / 2.0;
  return {quantile_sorted(means, tail), quantile_sorted(means, 1.0 - tail)};
}

Interval paired_bootstrap_diff(const std::vector<double>& a, const std::vector<double>& b, int resamples,
                               uint64_t seed, double level) {
  if (a.size() != b.size()) throw std::invalid_argument("paired_bootstrap_diff: a and b differ in size");
  std::vector<double> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return bootstrap_ci(d, resamples, seed, level);
}

}  // namespace daei::metrics
