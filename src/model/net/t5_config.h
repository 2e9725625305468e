// The Hugging Face T5 config.json, read and validated without libtorch (tests/fuzz/fuzz_model_json.cpp fuzzes it).
#pragma once
#include <cstdint>
#include <string>

namespace daei {

struct T5Config {
  // Hugging Face's defaults (t5-small's sizes).
  int64_t vocab_size = 32128, d_model = 512, d_kv = 64, d_ff = 2048;
  int64_t num_layers = 6, num_decoder_layers = 6, num_heads = 8;
  int64_t relative_attention_num_buckets = 32, relative_attention_max_distance = 128;
  double dropout_rate = 0.1;
  double layer_norm_epsilon = 1e-6;
  std::string feed_forward_proj = "relu";  // "relu" (T5 v1.0) | "gated-gelu" (v1.1) | "gated-relu"
  bool tie_word_embeddings = true;
  int64_t pad_token_id = 0;
  int64_t eos_token_id = 1;
  int64_t decoder_start_token_id = 0;

  // The Hugging Face config.json keys, listed once (read and written through core/fields.h).
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("vocab_size", s.vocab_size), v("d_model", s.d_model), v("d_kv", s.d_kv), v("d_ff", s.d_ff);
    v("num_layers", s.num_layers), v("num_decoder_layers", s.num_decoder_layers), v("num_heads", s.num_heads);
    v("relative_attention_num_buckets", s.relative_attention_num_buckets);
    v("relative_attention_max_distance", s.relative_attention_max_distance), v("dropout_rate", s.dropout_rate);
    v("layer_norm_epsilon", s.layer_norm_epsilon), v("feed_forward_proj", s.feed_forward_proj);
    v("tie_word_embeddings", s.tie_word_embeddings), v("pad_token_id", s.pad_token_id);
    v("eos_token_id", s.eos_token_id), v("decoder_start_token_id", s.decoder_start_token_id);
  }
  bool gated() const { return feed_forward_proj.rfind("gated-", 0) == 0; }
  // HF config.json text <-> config (unknown keys are ignored; missing ones keep HF's defaults above).
  static T5Config from_json_text(const std::string& json_text, const std::string& source = "config.json");
  static T5Config from_file(const std::string& path);
  std::string to_json_text() const;
  void validate() const;
};

}  // namespace daei
