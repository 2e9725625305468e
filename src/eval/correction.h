// DAEI inference: iterative correction with a sequence-level beam (paper §III-D, §IV; reference notes §1.3, §2.5).
//
//   ẽ = DAE(y);  x̂₀ = the inverter's hypothesis (given);  query f̃(x̂₀), ê₀ = DAE(f̃(x̂₀)), cos₀ = cos(ẽ, ê₀)
//   round t = 1, 2, ...: for each kept sequence k of each text, the corrector decodes with beam s and returns
//     s sequences → up to s·s candidates a text; each candidate text not seen before for that text is queried
//     once through the black box (noise key correction_query_key(text id, t, j)), denoised, and scored by
//     cos(ẽ, DAE(f̃(candidate))); the s best distinct texts are kept (their embeddings feed the next round, so no
//     query is spent twice on a text).
//   stop after max_steps rounds, or when the batch-mean of each text's best cosine this round gained less than
//     min_gain over the previous round (a negative gain always stops): DAEI's rule, notes §2.5 (vec2text's own
//     early stop never fires, notes §1.3). As in DAEI, the first comparison is round 2 against round 1: round 1
//     is never judged against the inverter's round 0 (a corrector's first round often rewrites much of x̂₀).
//   answer: for each text, the best-scoring candidate seen in any round (its score is the attacker's own measure;
//     no clean embedding is used).
//
// The corrector reads each hypothesis as token ids laid out in its own convention (corrector.h, HypothesisIds):
// daei's correctors the re-encoded text (pieces, eos), an imported vec2text corrector the ids as generate() gave
// them (decoder-start pad first, eos only when not cut at max_length), as vec2text's correction loop feeds it.
//
// Queries are what a real attacker pays for (a remote service rate-limits and bills by query): they are counted
// per text and returned. Candidates are embedded in chunks of embed_chunk texts, so memory does not grow with s².
// The black box is a callback, so the same code runs against the local noisy embedder or the HTTP client.
//
// Ranks: the texts are worked on in blocks of text_block texts (dist/share.h), dealt to the ranks; no corrector
// batch, query chunk or DAE call mixes texts of two blocks (the corrector's batches pad hypotheses to the longest
// in the batch), so every text's search is the same computation on any world size. The stopping rule reads every
// text's best cosine, gathered each round in text order, so all ranks stop at the same round.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <torch/types.h>

#include "model/attack/corrector.h"
#include "model/net/generate.h"

namespace daei {

class Communicator;
class SpmTokenizer;

// One corrector call of the loop, for an observer (tests, `daei invert --dump-logits`): round t >= 1, the target
// rows (B, d), the hypothesis embeddings (B, d) and ids (B, L) the corrector read, what it returned (rows b*s+r),
// and which input each row belongs to.
struct CorrectorCall {
  int64_t round = 0;
  at::Tensor target, hyp_e, hyp_ids, sequences;
  std::vector<int64_t> inputs;
  CorrectorImpl* corrector = nullptr;
};
using CorrectorObserver = std::function<void(const CorrectorCall&)>;

struct CorrectionOptions {
  int64_t max_steps = 10;     // correction rounds at most (0: the inverter's hypothesis alone)
  double min_gain = 1e-3;     // stop when the batch-mean best cosine gains less than this in a round
  int64_t max_length = 32;    // hypothesis tokens given to the corrector, and its generate max_length
  int64_t embed_chunk = 256;  // texts per black-box query call (and per denoise call)
  int64_t gen_batch = 64;     // (text, kept sequence) rows per corrector generate call
  bool early_stop = true;     // false: always run max_steps rounds
  // k: each candidate's embedding is the mean of k queries of the black box, each with its own noise key
  // (averaging_query_key); every query counts. The attacker pays k× for σ/√k noise on its own texts.
  int64_t queries_per_candidate = 1;
  // The corrector's decoding (correct.*): num_beams is s, the sequences kept per text and the beams and returned
  // sequences of each corrector call (correct.beam); repetition controls and length penalty. max_length above.
  GenerateOptions decoding = with_beams(3);
  // Texts a block (see above); 0: gen_batch / s (at least 1), so a block's kept sequences fill one corrector batch.
  int64_t text_block = 0;
  CorrectorObserver observe;  // called after every corrector call (null: none)
};

// The noisy black box: float32 (n, d) for n texts; keys[i] is the noise key of texts[i] (NoisyEmbedder::embed).
using QueryFn = std::function<at::Tensor(const std::vector<std::string>& texts, const std::vector<std::string>& keys)>;
// The frozen DAE at the attack's σ: (n, d) → (n, d). Called with tensors on the corrector's device.
using DenoiseFn = std::function<at::Tensor(const at::Tensor&)>;

struct CorrectionResult {
  std::vector<std::string> best_text;      // per input
  std::vector<double> best_cos;            // cos(DAE(y), DAE(f̃(best_text))), the attacker's own score
  std::vector<int64_t> queries_per_text;   // black-box queries spent on each input
  std::vector<double> round_mean_cos;      // batch mean of each round's best cosine, round 0 first
  // Round by round (round 0 first): each input's answer had the search stopped after that round (the best text
  // seen so far), and the queries it had cost each input by then (cumulative).
  std::vector<std::vector<std::string>> round_best_text;
  std::vector<std::vector<int64_t>> round_queries;
  int64_t steps = 0;                       // correction rounds run
  int64_t total_queries() const;
};

// y: (B, d) noisy targets; initial: B hypotheses; text_ids: B distinct ids naming the texts in the query keys
// (e.g. "test/17"). Runs the corrector in eval mode under NoGradGuard. comm (null: this process alone): a
// collective; every rank passes all B texts, searches its share and returns the whole result, in text order.
// The corrector reads each hypothesis' ids in its own convention (corrector.cfg.hypothesis_ids, see
// hypothesis_batch). initial_ids (empty, or B rows): the ids generate() gave the initial hypotheses, with the
// decoder-start token; a vec2text corrector reads them as they are (else they are rebuilt from the texts). Its
// own candidates keep the ids it generated.
CorrectionResult run_correction(const at::Tensor& y, const std::vector<std::string>& initial,
                                const std::vector<std::string>& text_ids, const QueryFn& query,
                                const DenoiseFn& denoise, CorrectorImpl& corrector, const SpmTokenizer& tokenizer,
                                const CorrectionOptions& opt, Communicator* comm = nullptr,
                                const std::vector<std::vector<int64_t>>& initial_ids = {});

// --- Hypothesis ids (issue 67) ------------------------------------------------------------------------------------

// A generated row (decoder-start first) without the padding after it: trailing pads dropped, the first id kept.
std::vector<int64_t> generated_row(const at::Tensor& row, int64_t pad_id);
// The ids vec2text's generate() would have given `text` at max_length (decoder start counted): pad, the pieces
// (at most max_length - 1), then eos only when it fits (pieces <= max_length - 2); a text cut at max_length has none.
std::vector<int64_t> vec2text_row_of_text(const SpmTokenizer& tok, const std::string& text, int64_t max_length);
// The (B, L) ids the corrector reads for B hypotheses, padded with pad. daei: tok.encode_batch(texts, max_length)
// (pieces, eos). vec2text: generated[i] when given (non-null, truncated to max_length), else
// vec2text_row_of_text(texts[i]).
at::Tensor hypothesis_batch(HypothesisIds convention, const SpmTokenizer& tok, const std::vector<std::string>& texts,
                            const std::vector<const std::vector<int64_t>*>& generated, int64_t max_length);

// --- The rules, separately testable -----------------------------------------------------------------------------

// After `steps_run` rounds (>= 1), whose batch-mean best cosine went from prev_mean to cur_mean: stop?
// True when steps_run >= max_steps, or (early_stop, steps_run >= 2 and) the gain is below min_gain or negative.
bool correction_should_stop(double prev_mean, double cur_mean, int64_t steps_run, const CorrectionOptions& opt);

// The round at which a run with early stop on would have ended, replayed from a run's round_mean_cos (round 0
// first) under `opt` (its early_stop and max_steps): the same rounds, queries and texts, because every query's
// noise key names its round and candidate.
int64_t early_stop_round(const std::vector<double>& round_mean_cos, const CorrectionOptions& opt);

// Indices of the (at most) s highest-scoring distinct texts, best first; ties keep the earlier index.
std::vector<int64_t> top_distinct(const std::vector<std::string>& texts, const std::vector<double>& scores, int64_t s);

// The noise key of candidate j of round t for text text_id: "correct/<text_id>/r<t>/c<j>". Distinct for every
// (text, round, candidate), so no two queries share noise, and disjoint from cache keys ("<split>/<id>") and
// hypothesis-cache keys ("hyp/...").
std::string correction_query_key(const std::string& text_id, int64_t round, int64_t candidate);

// The mean of k queries of each text (model/release/embedder.h: mean_of_queries), in chunks of `chunk` texts × k.
at::Tensor query_averaged(const QueryFn& query, const std::vector<std::string>& texts,
                          const std::vector<std::string>& keys, int64_t k, int64_t chunk);

// query() over texts in chunks of `chunk` (> 0): float32 (n, d) on the CPU, equal to one unchunked call.
at::Tensor query_chunked(const QueryFn& query, const std::vector<std::string>& texts,
                         const std::vector<std::string>& keys, int64_t chunk);

}  // namespace daei
