// Option structs of the config sections that several stage recipes read, so that each key is listed once
// (core/fields.h) and every stage reads it the same way. The values are those of configs/defaults/*.yaml (every
// key defined there, compiled in); from_config reads every field and fails, as Config's getters do, on a key the
// defaults lack.
#pragma once
#include <cstdint>
#include <string>

namespace daei {

class Config;

// The inverter.* keys: the inverter's T5 (a fresh one of this shape, or t5_dir's), its start, its tokenizer and its
// text lengths. The correctors and the hypotheses share them (a corrector is a T5 of the inverter's size).
struct InverterOptions {
  int64_t repeat_tokens = 0;
  int64_t d_model = 0, d_kv = 0, d_ff = 0, num_layers = 0, num_decoder_layers = 0, num_heads = 0;
  std::string feed_forward_proj;
  double dropout = 0;
  std::string t5_dir, init_from;
  bool token_init = false;
  int64_t token_init_queries = 0;
  std::string tokenizer;
  int64_t vocab_size = 0, spm_sentences = 0;
  int64_t max_length_train = 0, max_length_eval = 0;

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("repeat_tokens", s.repeat_tokens);
    v("d_model", s.d_model), v("d_kv", s.d_kv), v("d_ff", s.d_ff), v("num_layers", s.num_layers);
    v("num_decoder_layers", s.num_decoder_layers), v("num_heads", s.num_heads);
    v("feed_forward_proj", s.feed_forward_proj), v("dropout", s.dropout);
    v("t5_dir", s.t5_dir), v("init_from", s.init_from);
    v("token_init", s.token_init), v("token_init_queries", s.token_init_queries);
    v("tokenizer", s.tokenizer), v("vocab_size", s.vocab_size), v("spm_sentences", s.spm_sentences);
    v("max_length_train", s.max_length_train), v("max_length_eval", s.max_length_eval);
  }
  static InverterOptions from_config(const Config& cfg);
};

// train.heldout_rows: the validation rows of every stage's held-out metrics and of cache/hyp-val*. The Trainer's
// own train.* keys are TrainerOptions' (stages/loop/trainer.h).
struct HeldoutOptions {
  int64_t rows = 0;

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("heldout_rows", s.rows);
  }
  static HeldoutOptions from_config(const Config& cfg);
};

}  // namespace daei
