// Batched greedy and beam-search decoding for T5 from encoder inputs_embeds (the inverter's path),
// with a key/value cache. Conventions follow Hugging Face generate():
//  - sequences start with decoder_start_token_id; max_length counts that start token;
//  - after a sequence's eos, greedy pads it with pad_token_id; beam hypotheses end at their eos;
//  - beam score = sum of token log-probs / (generated length incl. eos)^length_penalty, with HF's
//    BeamHypotheses bookkeeping (2*num_beams candidates a step, eos only from the top num_beams ranks,
//    a batch row is done when it holds num_beams hypotheses and, unless early_stopping, no running beam
//    can beat the worst of them).
#pragma once
#include <torch/types.h>

namespace daei {

class T5ModelImpl;

struct GenerateOptions {
  int64_t max_length = 32;           // including the decoder start token
  int64_t min_length = 0;            // eos is forbidden while the sequence is shorter than this
  int64_t num_beams = 1;             // 1 = greedy (generate()); t5_beam_search accepts 1 too
  double length_penalty = 1.0;
  bool early_stopping = false;
  int64_t num_return_sequences = 1;  // <= num_beams
  bool use_cache = true;
};

struct GenerateOutput {
  torch::Tensor sequences;  // (B * num_return_sequences, L <= max_length) int64, row b*R+r
  torch::Tensor scores;     // (B * num_return_sequences) float64: greedy sum log-prob, beam the beam score
};

// inputs_embeds (B, S, d_model) fed to the encoder; attention_mask (B, S) 1/0. Runs under NoGradGuard and
// leaves the model's train/eval mode as it was (call model.eval() first to disable dropout).
GenerateOutput t5_generate(T5ModelImpl& model, const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask,
                           const GenerateOptions& opt);
GenerateOutput t5_greedy(T5ModelImpl& model, const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask,
                         const GenerateOptions& opt);
GenerateOutput t5_beam_search(T5ModelImpl& model, const torch::Tensor& inputs_embeds,
                              const torch::Tensor& attention_mask, const GenerateOptions& opt);

}  // namespace daei
