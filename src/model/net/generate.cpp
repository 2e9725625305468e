#include "model/net/generate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "model/net/precision.h"
#include "model/net/t5.h"

namespace daei {
namespace {

// input: the input row each decoded row belongs to (beam search keeps a row's beams together, b·K + k).
torch::Tensor step_logits(T5ModelImpl& m, const torch::Tensor& seq, const torch::Tensor& enc, const torch::Tensor& mask,
                          T5Cache* cache, const GenerateOptions& opt, const torch::Tensor& input) {
  auto in = cache ? seq.slice(1, seq.size(1) - 1) : seq;
  if (!opt.adjust_logits) return m.decode(in, enc, mask, cache).select(1, -1).to(torch::kFloat);
  torch::Tensor hidden;
  auto logits = m.decode(in, enc, mask, cache, {}, &hidden).select(1, -1).to(torch::kFloat);
  return opt.adjust_logits(logits, hidden.select(1, -1).to(torch::kFloat), input);
}

bool has_processors(const GenerateOptions& opt) { return opt.repetition_penalty != 1.0 || opt.no_repeat_ngram_size > 0; }

void forbid_eos_below_min_length(torch::Tensor& scores, int64_t eos, int64_t cur_len, const GenerateOptions& opt) {
  if (cur_len < opt.min_length) scores.select(1, eos).fill_(-std::numeric_limits<float>::infinity());
}

}  // namespace

void apply_repetition_penalty(torch::Tensor& scores, const std::vector<std::vector<int64_t>>& prefixes,
                              double penalty) {
  DAEI_CHECK(scores.dim() == 2 && scores.size(0) == static_cast<int64_t>(prefixes.size()),
             "repetition penalty: {} prefixes for scores ({})", prefixes.size(),
             fmt::format("{}", fmt::join(scores.sizes(), ", ")));
  if (penalty == 1.0) return;
  DAEI_CHECK(penalty > 0 && std::isfinite(penalty), "repetition penalty must be a finite number > 0, got {}", penalty);
  std::vector<int64_t> rows, cols;  // every (row, distinct token of its prefix): a token is penalised once
  for (size_t i = 0; i < prefixes.size(); ++i) {
    std::vector<int64_t> toks(prefixes[i]);
    std::sort(toks.begin(), toks.end());
    toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
    for (int64_t t : toks)
      if (t >= 0 && t < scores.size(1)) rows.push_back(static_cast<int64_t>(i)), cols.push_back(t);
  }
  if (rows.empty()) return;
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(scores.device());
  const auto r = torch::tensor(rows, opts), c = torch::tensor(cols, opts);
  const auto s = scores.index({r, c});
  scores.index_put_({r, c}, torch::where(s < 0, s * penalty, s / penalty));
}

void apply_repetition_controls(torch::Tensor& scores, const torch::Tensor& seq, const GenerateOptions& opt) {
  const int64_t L = seq.size(1);
  auto s = seq.to(torch::kCPU).contiguous();
  const int64_t* p = s.data_ptr<int64_t>();
  if (opt.repetition_penalty != 1.0) {
    std::vector<std::vector<int64_t>> prefixes;
    for (int64_t r = 0; r < s.size(0); ++r) prefixes.emplace_back(p + r * L, p + (r + 1) * L);
    apply_repetition_penalty(scores, prefixes, opt.repetition_penalty);
  }
  const int64_t n = opt.no_repeat_ngram_size;
  if (n <= 0 || L + 1 < n) return;
  std::vector<int64_t> rows, cols;
  for (int64_t r = 0; r < s.size(0); ++r) {
    const int64_t* row = p + r * L;
    // Every earlier n-gram whose first n-1 tokens equal the last n-1 tokens bans its last token.
    for (int64_t i = 0; i + n <= L; ++i)
      if (std::equal(row + i, row + i + n - 1, row + L - (n - 1))) rows.push_back(r), cols.push_back(row[i + n - 1]);
  }
  if (rows.empty()) return;
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(scores.device());
  scores.index_put_({torch::tensor(rows, opts), torch::tensor(cols, opts)},
                    torch::tensor(-std::numeric_limits<float>::infinity(), scores.options()));
}

namespace {

// Log-probabilities of the next token, as beam search sees them: log_softmax, then the processors (no
// renormalisation), then min_length.
torch::Tensor beam_step_logprobs(T5ModelImpl& m, const torch::Tensor& seq, const torch::Tensor& enc,
                                 const torch::Tensor& mask, T5Cache* cache, int64_t cur_len, const GenerateOptions& opt,
                                 const torch::Tensor& input) {
  auto lp = torch::log_softmax(step_logits(m, seq, enc, mask, cache, opt, input), -1);
  apply_repetition_controls(lp, seq, opt);
  forbid_eos_below_min_length(lp, m.cfg.eos_token_id, cur_len, opt);
  return lp;
}

void check_inputs(const T5ModelImpl& m, const torch::Tensor& e, const torch::Tensor& mask, const GenerateOptions& o) {
  DAEI_CHECK(e.dim() == 3 && e.size(2) == m.cfg.d_model, "generate: inputs_embeds must be (B, S, {}), got {}",
             m.cfg.d_model, fmt::format("{}", fmt::join(e.sizes(), "x")));
  DAEI_CHECK(!mask.defined() || (mask.dim() == 2 && mask.size(0) == e.size(0) && mask.size(1) == e.size(1)),
             "generate: attention_mask must be (B, S)");
  DAEI_CHECK(o.max_length >= 1, "generate: max_length must be >= 1");
  DAEI_CHECK(o.num_beams >= 1, "generate: num_beams must be >= 1");
  DAEI_CHECK(o.repetition_penalty > 0 && std::isfinite(o.repetition_penalty),
             "generate: repetition_penalty must be a finite number > 0, got {}", o.repetition_penalty);
  DAEI_CHECK(o.no_repeat_ngram_size >= 0, "generate: no_repeat_ngram_size must be >= 0");
  DAEI_CHECK(o.num_return_sequences >= 1 && o.num_return_sequences <= o.num_beams,
             "generate: num_return_sequences {} must be in [1, num_beams {}]", o.num_return_sequences, o.num_beams);
}

// A generator's decoding from SECTION (eval, correct, hypotheses); BEAMS_KEY names its beams.
GenerateOptions decoding_from_config(const Config& cfg, const std::string& section, const std::string& beams_key) {
  GenerateOptions g;
  g.max_length = cfg.integer("inverter.max_length_eval");
  g.num_beams = cfg.integer(section + "." + beams_key);
  g.no_repeat_ngram_size = cfg.integer(section + ".no_repeat_ngram_size");
  g.repetition_penalty = cfg.real(section + ".repetition_penalty");
  g.length_penalty = cfg.real(section + ".length_penalty");
  return g;
}
}  // namespace

GenerateOptions eval_decoding(const Config& cfg) { return decoding_from_config(cfg, "eval", "num_beams"); }
GenerateOptions correct_decoding(const Config& cfg) { return decoding_from_config(cfg, "correct", "beam"); }
GenerateOptions hypotheses_decoding(const Config& cfg) { return decoding_from_config(cfg, "hypotheses", "num_beams"); }

std::string describe_decoding(const GenerateOptions& o) {
  std::string s = o.num_beams == 1 ? "greedy" : fmt::format("beam {}", o.num_beams);
  if (o.no_repeat_ngram_size > 0) s += fmt::format(", no_repeat_ngram_size {}", o.no_repeat_ngram_size);
  if (o.repetition_penalty != 1.0) s += fmt::format(", repetition_penalty {}", o.repetition_penalty);
  if (o.num_beams > 1 && o.length_penalty != 1.0) s += fmt::format(", length_penalty {}", o.length_penalty);
  return s;
}

GenerateOutput t5_generate(T5ModelImpl& model, const torch::Tensor& e, const torch::Tensor& mask,
                           const GenerateOptions& opt) {
  return opt.num_beams == 1 ? t5_greedy(model, e, mask, opt) : t5_beam_search(model, e, mask, opt);
}

GenerateOutput t5_greedy(T5ModelImpl& m, const torch::Tensor& e, const torch::Tensor& mask,
                         const GenerateOptions& opt) {
  check_inputs(m, e, mask, opt);
  DAEI_CHECK(opt.num_return_sequences == 1, "generate: greedy returns one sequence per input");
  torch::NoGradGuard ng;
  Bf16WeightScope frozen;  // weights fixed while decoding: cast to bf16 once, not every step
  const int64_t B = e.size(0);
  auto enc = m.encode(e, mask);
  auto lopts = torch::TensorOptions().dtype(torch::kLong).device(e.device());
  auto seq = torch::full({B, 1}, m.cfg.decoder_start_token_id, lopts);
  auto finished = torch::zeros({B}, lopts.dtype(torch::kBool));
  auto scores = torch::zeros({B}, lopts.dtype(torch::kDouble));
  const auto input = torch::arange(B, lopts);
  T5Cache cache;
  for (int64_t cur = 1; cur < opt.max_length; ++cur) {
    // Greedy: the processors act on the raw logits and the argmax follows them; the score is the log-probability
    // of the chosen token under the processed logits (the raw model's when no processor is on).
    auto logits = step_logits(m, seq, enc, mask, opt.use_cache ? &cache : nullptr, opt, input);
    if (has_processors(opt)) apply_repetition_controls(logits, seq, opt);
    auto lp = torch::log_softmax(logits, -1);
    forbid_eos_below_min_length(lp, m.cfg.eos_token_id, cur, opt);
    auto next = lp.argmax(-1);
    auto tok_lp = lp.gather(1, next.unsqueeze(1)).squeeze(1).to(torch::kDouble);
    next = torch::where(finished, torch::full_like(next, m.cfg.pad_token_id), next);
    scores = scores + torch::where(finished, torch::zeros_like(tok_lp), tok_lp);
    seq = torch::cat({seq, next.unsqueeze(1)}, 1);
    finished = finished.logical_or(next == m.cfg.eos_token_id);
    if (finished.all().item<bool>()) break;
  }
  return {seq, scores};
}

namespace {
struct Hyp {
  double score;
  std::vector<int64_t> tokens;  // generated tokens (after the start token), eos included when finished
};
// Hugging Face 4.33's BeamHypotheses: the length a score is divided by is that of the hypothesis as HF stores it, the
// decoder start token included and the eos not: an eos-ended hypothesis counts its generated tokens with the eos, a
// beam still running at max_length counts max_length. (transformers >= 4.36 leaves the start token out, PR #27351.)
struct BeamHyps {
  std::vector<Hyp> hyps;
  double worst = std::numeric_limits<double>::infinity();
  void add(std::vector<int64_t> toks, double sum_logprobs, int64_t hf_len, int64_t k, double lp) {
    const double score = sum_logprobs / std::pow(static_cast<double>(hf_len), lp);
    if (static_cast<int64_t>(hyps.size()) < k || score > worst) {
      hyps.push_back({score, std::move(toks)});
      if (static_cast<int64_t>(hyps.size()) > k) {
        auto w = std::min_element(hyps.begin(), hyps.end(), [](const Hyp& a, const Hyp& b) { return a.score < b.score; });
        hyps.erase(w);
      }
      worst = std::min_element(hyps.begin(), hyps.end(), [](const Hyp& a, const Hyp& b) { return a.score < b.score; })
                  ->score;
    }
  }
  // cur_len: HF's, the length of the sequences the candidates extend plus one (start token included).
  bool is_done(double best_sum_logprobs, int64_t cur_len, int64_t k, double lp, bool early) const {
    if (static_cast<int64_t>(hyps.size()) < k) return false;
    if (early) return true;
    return worst >= best_sum_logprobs / std::pow(static_cast<double>(cur_len), lp);
  }
};
}  // namespace

GenerateOutput t5_beam_search(T5ModelImpl& m, const torch::Tensor& e, const torch::Tensor& mask,
                              const GenerateOptions& opt) {
  check_inputs(m, e, mask, opt);
  torch::NoGradGuard ng;
  Bf16WeightScope frozen;  // weights fixed while decoding: cast to bf16 once, not every step
  const int64_t B = e.size(0), K = opt.num_beams, V = m.cfg.vocab_size, eos = m.cfg.eos_token_id;
  const int64_t pad = m.cfg.pad_token_id;
  auto enc = m.encode(e, mask).repeat_interleave(K, 0);
  auto mask_k = mask.defined() ? mask.repeat_interleave(K, 0) : mask;
  auto lopts = torch::TensorOptions().dtype(torch::kLong).device(e.device());
  auto seq = torch::full({B * K, 1}, m.cfg.decoder_start_token_id, lopts);
  std::vector<double> beam_scores(B * K, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 1; k < K; ++k) beam_scores[b * K + k] = -1e9;  // only the first beam starts live
  std::vector<BeamHyps> hyps(B);
  std::vector<bool> done(B, false);
  const auto input = torch::arange(B, lopts).repeat_interleave(K);
  T5Cache cache;
  for (int64_t cur = 1; cur < opt.max_length; ++cur) {
    auto lp = beam_step_logprobs(m, seq, enc, mask_k, opt.use_cache ? &cache : nullptr, cur, opt, input)
                  .to(torch::kDouble);
    auto bs = torch::tensor(beam_scores, torch::TensorOptions().dtype(torch::kDouble)).to(lp.device());
    auto next = (lp + bs.unsqueeze(1)).view({B, K * V});
    auto top = next.topk(std::min<int64_t>(2 * K, K * V), 1, true, true);
    auto top_s = std::get<0>(top).cpu().contiguous();
    auto top_i = std::get<1>(top).cpu().contiguous();
    const int64_t C = top_s.size(1);
    const double* ps = top_s.data_ptr<double>();
    const int64_t* pi = top_i.data_ptr<int64_t>();
    auto seq_cpu = seq.cpu().contiguous();
    const int64_t L = seq_cpu.size(1);
    const int64_t* pseq = seq_cpu.data_ptr<int64_t>();
    std::vector<int64_t> new_tok(B * K, pad), new_src(B * K, 0);
    std::vector<double> new_scores(B * K, 0.0);
    for (int64_t b = 0; b < B; ++b) {
      if (done[b]) {
        for (int64_t k = 0; k < K; ++k) new_src[b * K + k] = b * K;
        continue;
      }
      int64_t n = 0;
      for (int64_t j = 0; j < C && n < K; ++j) {
        const int64_t src = b * K + pi[b * C + j] / V, tok = pi[b * C + j] % V;
        const double s = ps[b * C + j];
        if (tok == eos) {
          if (j >= K) continue;
          std::vector<int64_t> toks(pseq + src * L + 1, pseq + (src + 1) * L);
          toks.push_back(eos);
          hyps[b].add(std::move(toks), s, L, K, opt.length_penalty);  // L: start token + tokens before the eos
        } else {
          new_tok[b * K + n] = tok;
          new_src[b * K + n] = src;
          new_scores[b * K + n] = s;
          ++n;
        }
      }
      DAEI_ASSERT(n == K, "beam search: only {} running beams", n);
      done[b] = hyps[b].is_done(ps[b * C], L + 1, K, opt.length_penalty, opt.early_stopping);
    }
    auto src_t = torch::tensor(new_src, lopts);
    seq = torch::cat({seq.index_select(0, src_t), torch::tensor(new_tok, lopts).unsqueeze(1)}, 1);
    beam_scores = new_scores;
    if (opt.use_cache) cache.reorder(src_t);
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
  }
  // Rows still running at max_length: their beams become hypotheses as they stand (length L, start token included).
  auto seq_cpu = seq.cpu().contiguous();
  const int64_t L = seq_cpu.size(1);
  const int64_t* pseq = seq_cpu.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    if (done[b]) continue;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = b * K + k;
      hyps[b].add(std::vector<int64_t>(pseq + r * L + 1, pseq + (r + 1) * L), beam_scores[r], L, K,
                  opt.length_penalty);
    }
  }
  const int64_t R = opt.num_return_sequences;
  size_t maxlen = 0;
  std::vector<const Hyp*> chosen;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<const Hyp*> hs;
    for (const auto& h : hyps[b].hyps) hs.push_back(&h);
    std::stable_sort(hs.begin(), hs.end(), [](const Hyp* a, const Hyp* c) { return a->score > c->score; });
    DAEI_ASSERT(static_cast<int64_t>(hs.size()) >= R, "beam search: {} hypotheses for {} returns", hs.size(), R);
    for (int64_t r = 0; r < R; ++r) {
      chosen.push_back(hs[r]);
      maxlen = std::max(maxlen, hs[r]->tokens.size());
    }
  }
  auto out = torch::full({B * R, static_cast<int64_t>(maxlen) + 1}, pad, torch::kLong);
  auto scores = torch::zeros({B * R}, torch::kDouble);
  for (size_t i = 0; i < chosen.size(); ++i) {
    out[i][0] = m.cfg.decoder_start_token_id;
    for (size_t t = 0; t < chosen[i]->tokens.size(); ++t) out[i][t + 1] = chosen[i]->tokens[t];
    scores[i] = chosen[i]->score;
  }
  return {out.to(e.device()), scores.to(e.device())};
}

}  // namespace daei
