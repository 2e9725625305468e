// Text metrics of the evaluation: BLEU, token F1, ROUGE-L, exact match, and bootstrap intervals.
//
// Each metric reproduces a reference implementation (tests/fixtures/metrics/README.md names them and the
// fixtures that pin the values):
//   word_tokenize   NLTK 3.8 NLTKWordTokenizer, i.e. nltk.word_tokenize(text, preserve_line=True). NLTK's
//                   word_tokenize without preserve_line first splits sentences with the Punkt model (downloaded
//                   data, not available here); a text is treated as one sentence, so a period that ends a
//                   non-final sentence stays on its word ("York." rather than "York" ".").
//   sentence_bleu   sacrebleu.sentence_bleu defaults: 13a tokeniser, exp smoothing, max order 4, effective order
//                   on. Returned on 0-1 (sacrebleu score / 100).
//   vec2text_bleu   what vec2text logs as BLEU: HF evaluate "sacrebleu" on one pair, i.e. sacrebleu.corpus_bleu
//                   with effective order off. A hypothesis under 4 tokens then scores 0. 0-1 scale.
//   token_f1        vec2text: sets of word_tokenize tokens, case-sensitive, F1 with its 1e-20 epsilons.
//   rouge_l, rouge1 rouge-score F-measure, default tokeniser (lowercase, runs of [a-z0-9]), no stemming.
//
// Regular-expression classes follow Python 3.11 `re` on str (\w, \s, \d over Unicode 14). Input is UTF-8;
// an invalid byte is read as U+FFFD. Torch-free on purpose.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace daei::metrics {

// ---- tokenisers ----
std::vector<std::string> word_tokenize(const std::string& s);  // NLTK NLTKWordTokenizer (one sentence)
std::vector<std::string> tokenize_13a(const std::string& s);   // sacrebleu 13a, after BLEU's rstrip()
std::vector<std::string> rouge_tokenize(const std::string& s); // rouge-score default tokeniser, no stemmer

// ---- BLEU ----
constexpr int kBleuMaxOrder = 4;
struct BleuStats {
  std::array<int64_t, kBleuMaxOrder> correct{}, total{};
  int64_t sys_len = 0, ref_len = 0;
  BleuStats& operator+=(const BleuStats& o);
};
// Sufficient statistics of one hypothesis against one or more references (13a tokens; with several references the
// clipping count is the max over references and ref_len is the closest reference length, shorter on ties).
BleuStats bleu_stats(const std::string& hyp, const std::vector<std::string>& refs);
// sacrebleu compute_bleu with exp smoothing, on 0-1.
double bleu_from_stats(const BleuStats& st, bool effective_order);
double sentence_bleu(const std::string& hyp, const std::string& ref);
double vec2text_bleu(const std::string& hyp, const std::string& ref);
// sacrebleu.corpus_bleu(hyps, ref_streams) (defaults, effective order off), on 0-1. ref_streams[k][i] is the k-th
// reference of hypothesis i.
double corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams);

// ---- token and subsequence overlap ----
double token_f1(const std::string& hyp, const std::string& ref);
double rouge_l(const std::string& hyp, const std::string& ref);
double rouge1(const std::string& hyp, const std::string& ref);
// Longest common subsequence length, two-row DP: O(|a|·|b|) time, O(min(|a|,|b|)) memory.
std::size_t lcs_length(const std::vector<int>& a, const std::vector<int>& b);
bool exact_match(const std::string& hyp, const std::string& ref);

// ---- per text ----
struct PerText {
  std::vector<double> bleu, token_f1, rouge_l, exact;  // bleu = sentence_bleu; exact is 0/1
  std::vector<double> bleu_vec2text, rouge1;           // vec2text's BLEU convention; ROUGE-1 F
};
// Throws std::invalid_argument when the sizes differ.
PerText score_all(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

// ---- intervals ----
struct Interval {
  double lo = 0, hi = 0;
};
// Percentile bootstrap interval of the mean: `resamples` resamples of size n drawn with std::mt19937_64(seed) and
// unbiased rejection sampling of indices (no std:: distribution, so identical on every platform); the bounds are
// the (1-level)/2 and 1-(1-level)/2 quantiles of the resampled means, linearly interpolated (numpy's default).
// Empty input gives {NaN, NaN}; a constant vector gives exactly {c, c}. Throws std::invalid_argument when
// resamples < 1 or level is not in (0, 1).
Interval bootstrap_ci(const std::vector<double>& values, int resamples = 1000, uint64_t seed = 1,
                      double level = 0.95);
// Paired bootstrap of mean(a) - mean(b): the same resampled indices for both, i.e. the interval of the mean of
// a[i] - b[i]. Throws std::invalid_argument when the sizes differ.
Interval paired_bootstrap_diff(const std::vector<double>& a, const std::vector<double>& b, int resamples = 1000,
                               uint64_t seed = 1, double level = 0.95);
double mean(const std::vector<double>& v);  // NaN when empty

}  // namespace daei::metrics
