// Batched greedy and beam-search decoding for T5 from encoder inputs_embeds (the inverter's path),
// with a key/value cache. Conventions follow Hugging Face generate():
//  - sequences start with decoder_start_token_id; max_length counts that start token;
//  - after a sequence's eos, greedy pads it with pad_token_id; beam hypotheses end at their eos;
//  - beam score = sum of token log-probs / length^length_penalty, with HF 4.33's BeamHypotheses bookkeeping
//    (2*num_beams candidates a step, eos only from the top num_beams ranks, a batch row is done when it holds
//    num_beams hypotheses and, unless early_stopping, worst >= best candidate / (current length + 1)^length_penalty).
//    length is HF 4.33's: the hypothesis with the decoder start token, without the eos, i.e. the generated tokens
//    incl. eos for an eos-ended hypothesis and max_length for a beam still running at max_length (transformers
//    >= 4.36 drops the start token, PR #27351). tests/fixtures/make_beam_search_fixture.py is the reference.
#pragma once
#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

namespace daei {

class Config;
class T5ModelImpl;

struct GenerateOptions {
  int64_t max_length = 32;           // including the decoder start token
  int64_t min_length = 0;            // eos is forbidden while the sequence is shorter than this
  int64_t num_beams = 1;             // 1 = greedy (generate()); t5_beam_search accepts 1 too
  double length_penalty = 1.0;
  bool early_stopping = false;
  // Hugging Face's logits processors, in its order (RepetitionPenalty, then NoRepeatNGram, then MinLength), on the
  // raw logits in greedy search and on the log-probabilities in beam search. Every id already in the sequence (the
  // decoder start token included) is penalised once: a score below 0 multiplied by the penalty, any other divided.
  double repetition_penalty = 1.0;   // 1 = off
  int64_t no_repeat_ngram_size = 0;  // n: no n-gram occurs twice in a sequence; 0 = off
  int64_t num_return_sequences = 1;  // <= num_beams
  bool use_cache = true;
  // A change of each step's raw logits (rows, V), before the processors: given the decoder's last hidden state
  // (rows, d_model; after its final norm) and the input each row decodes (rows,), it returns the logits to use.
  // The guided inverter's copy gate (model/attack/inverter.h). Unset: the model's logits.
  std::function<torch::Tensor(const torch::Tensor& logits, const torch::Tensor& hidden, const torch::Tensor& input)>
      adjust_logits;
};

// Default options with n beams (and n returned sequences where the caller asks for them).
inline GenerateOptions with_beams(int64_t n) {
  GenerateOptions g;
  g.num_beams = n;
  return g;
}

struct GenerateOutput {
  torch::Tensor sequences;  // (B * num_return_sequences, L <= max_length) int64, row b*R+r
  torch::Tensor scores;     // (B * num_return_sequences) float64: greedy sum log-prob, beam the beam score
};

// inputs_embeds (B, S, d_model) fed to the encoder; attention_mask (B, S) 1/0. Runs under NoGradGuard and
// leaves the model's train/eval mode as it was (call model.eval() first to disable dropout).
// Each generator's decoding, from its own config section: beams, no_repeat_ngram_size, repetition_penalty and
// length_penalty, max_length inverter.max_length_eval (the one place a chain's keys are mapped; tests/unit/
// test_decoding_chains.cpp asserts each key reaches its chain alone).
// eval.*: the evaluation's inverter rows, and stage 3's held-out selection, which decodes as they do.
GenerateOptions eval_decoding(const Config& cfg);
// correct.*: the correctors' search at eval; num_beams is correct.beam (s, also the sequences kept per text).
GenerateOptions correct_decoding(const Config& cfg);
// hypotheses.*: the inverters' hypotheses a corrector trains on.
GenerateOptions hypotheses_decoding(const Config& cfg);
// "greedy" or "beam 4", with ", no_repeat_ngram_size 3", ", repetition_penalty 1.2", ", length_penalty 0.8" where set.
std::string describe_decoding(const GenerateOptions& opt);

// Hugging Face's RepetitionPenaltyLogitsProcessor on next-token scores (rows, V), in place: in each row, every
// distinct token of its prefix (ids outside [0, V) ignored) has its score multiplied by `penalty` when negative,
// divided by it otherwise. The one implementation: generation (below) and zsinvert's candidates use it.
void apply_repetition_penalty(torch::Tensor& scores, const std::vector<std::vector<int64_t>>& prefixes, double penalty);

// The two repetition processors on next-token scores (rows, V) given the sequences so far (rows, L, decoder start
// token first), in place: Hugging Face's RepetitionPenaltyLogitsProcessor then NoRepeatNGramLogitsProcessor.
void apply_repetition_controls(torch::Tensor& scores, const torch::Tensor& seq, const GenerateOptions& opt);

GenerateOutput t5_generate(T5ModelImpl& model, const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask,
                           const GenerateOptions& opt);
GenerateOutput t5_greedy(T5ModelImpl& model, const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask,
                         const GenerateOptions& opt);
GenerateOutput t5_beam_search(T5ModelImpl& model, const torch::Tensor& inputs_embeds,
                              const torch::Tensor& attention_mask, const GenerateOptions& opt);

}  // namespace daei
