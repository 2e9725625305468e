// The adversarial-decoding baseline, ZSInvert (issue 23; reference notes §3): no inverter, only a generator LM that
// proposes tokens and the black box's cosine that ranks them.
//
//   stage A: beams start as the empty prefix. At each of max_steps steps every kept prefix gets the LM's next-token
//     log-probabilities (encoder input: the empty text); tokens already in the prefix get the repetition penalty
//     (HF's rule: a score < 0 is multiplied by it, else divided); EOS and pad are excluded; the top_k tokens of each
//     prefix make the candidates prefix + token. Each candidate's decoded text is queried ONCE through the noisy
//     black box with a fresh noise key (zsinvert_query_key) and scored by
//         cos(shield(f̃(text)), shield(y)) + naturalness · (LM log-probability of text) / tokens
//     (cosine: normalisation is implied). At naturalness 0, ZSInvert's public ranking, the LM only proposes. Its
//     naturalness term is an LLM's yes/no judgement, clamped, which we do not have; ours is the generator's own
//     mean log-probability per token, unpenalised, so a string of pieces that are not words scores low
//     (issue 34; results/decoding.md). The beam_width best distinct texts by score are kept (ties: the earlier
//     candidate); the best-scoring text seen in any step is remembered.
//   stage B (refine): one paraphrase-refinement round, the same search with the encoder input = the best text so
//     far (the denoising LM as a paraphraser: the analogue of "write a sentence similar to this: {best}").
//   answer: the best-scoring text seen in either stage (the attacker's own measure; no clean embedding is used).
// shield = identity for the plain row; the stage-1 DAE for `zsinvert-dae`, our variant: cos(DAE(y), DAE(f̃(x))).
//
// Cost: every candidate is one query, so a stage costs k (step 1: the single empty prefix) + (max_steps − 1) ·
// beam · k queries per text once beam distinct texts exist (k = min(top_k, vocabulary − 2)); refine doubles it.
// Texts are searched text_batch at a time; LM calls take lm_batch prefixes, queries embed_chunk texts, and only
// scores are kept, so memory is bounded by text_batch · beam · k strings. A progress line gives rate and ETA.
// Ranks: the groups of text_batch texts are dealt to the ranks (dist/share.h). A group's search touches no other
// group (LM batches pad prefixes to the longest in the batch), so each text's answer is the same on any world size.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "eval/correction.h"

namespace daei {

class Communicator;
class Config;
class SpmTokenizer;
class T5ModelImpl;

struct ZsInvertOptions {
  int64_t beam = 5;          // beam_width: distinct texts kept a step
  int64_t top_k = 50;        // tokens proposed per kept prefix
  int64_t max_steps = 20;    // tokens generated per stage
  double repetition_penalty = 1.5;
  double naturalness = 0.0;  // weight of the LM's mean log-probability per token in the ranking score (0 = cosine alone)
  bool refine = true;        // stage B
  int64_t embed_chunk = 1024;  // texts per black-box call (and per shield call)
  int64_t lm_batch = 256;    // prefixes per LM call
  int64_t text_batch = 16;   // texts searched together
  double progress_every_s = 10.0;  // train.progress_every_s

  // The zsinvert.* keys, listed once (read through core/fields.h), a line a topic.
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("beam", s.beam), v("top_k", s.top_k), v("max_steps", s.max_steps);
    v("repetition_penalty", s.repetition_penalty), v("naturalness", s.naturalness), v("refine", s.refine);
    v("embed_chunk", s.embed_chunk), v("lm_batch", s.lm_batch), v("text_batch", s.text_batch);
  }
};
// The zsinvert.* keys.
ZsInvertOptions zsinvert_options(const Config& cfg);

// The generator, as the search sees it: log-probabilities (n, V) of the next token after each prefix (token ids
// without the decoder start token), given each row's encoder input text ("" in stage A).
using NextTokenFn = std::function<at::Tensor(const std::vector<std::vector<int64_t>>& prefixes,
                                             const std::vector<std::string>& encoder_texts)>;
struct ZsGenerator {
  NextTokenFn next;
  std::function<std::string(const std::vector<int64_t>&)> decode;  // token ids → text
  int64_t eos_id = 1, pad_id = 0;
};
// A trained T5 (the lm stage) with its tokenizer: encoder inputs truncated to max_input_len tokens.
ZsGenerator t5_generator(std::shared_ptr<T5ModelImpl> t5, std::shared_ptr<const SpmTokenizer> tok,
                         int64_t max_input_len);

struct ZsInvertResult {
  std::vector<std::string> best_text;     // per input
  std::vector<double> best_cos;           // the attacker's own score of best_text
  std::vector<double> stage_a_cos;        // the best score after stage A (before refinement)
  std::vector<int64_t> queries_per_text;  // black-box queries spent on each input
};

// y: (B, d) noisy targets; text_ids: B distinct ids naming the texts in the query keys (e.g. "test/17"). comm
// (null: this process alone): a collective; every rank passes all B texts, searches its share of the groups and
// returns the whole result, in text order.
ZsInvertResult run_zsinvert(const at::Tensor& y, const std::vector<std::string>& text_ids, const QueryFn& query,
                            const DenoiseFn& shield, const ZsGenerator& lm, const ZsInvertOptions& opt,
                            Communicator* comm = nullptr);

// --- The rules, separately testable -----------------------------------------------------------------------------

// "zs/<text_id>/s<stage><step>/c<j>" (stage 'A' or 'B', step from 1): distinct for every (text, stage, step,
// candidate), and disjoint from cache ("<split>/<id>"), hypothesis ("hyp/...") and correction ("correct/...") keys.
std::string zsinvert_query_key(const std::string& text_id, char stage, int64_t step, int64_t candidate);

// The naturalness term of a candidate's score: weight · logp / tokens, logp the LM's unpenalised log-probability of
// its tokens (each under the prefix before it); 0 when weight is 0. score = cosine + this term.
double naturalness_term(double weight, double logp, size_t tokens);

// The queries one text costs under `opt` with a vocabulary of V tokens, when every step after the first has beam
// distinct texts to expand (the formula in the header comment).
int64_t zsinvert_queries_per_text(const ZsInvertOptions& opt, int64_t vocab);

}  // namespace daei
