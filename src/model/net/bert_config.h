// The Hugging Face BERT config.json, read and validated without libtorch (tests/fuzz/fuzz_model_json.cpp fuzzes it).
#pragma once
#include <cstdint>
#include <string>

namespace daei {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // "gelu" (erf), "gelu_new" (tanh) or "relu"
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  bool with_pooler = true;  // not an HF key: whether pooler.dense exists

  // The config.json keys, listed once (read and written through core/fields.h).
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("vocab_size", s.vocab_size), v("hidden_size", s.hidden_size), v("num_hidden_layers", s.num_hidden_layers);
    v("num_attention_heads", s.num_attention_heads), v("intermediate_size", s.intermediate_size);
    v("hidden_act", s.hidden_act), v("hidden_dropout_prob", s.hidden_dropout_prob);
    v("attention_probs_dropout_prob", s.attention_probs_dropout_prob);
    v("max_position_embeddings", s.max_position_embeddings), v("type_vocab_size", s.type_vocab_size);
    v("layer_norm_eps", s.layer_norm_eps), v("pad_token_id", s.pad_token_id), v("daei_with_pooler", s.with_pooler);
  }

  static BertConfig from_json_text(const std::string& text, const std::string& source = "config.json");
  static BertConfig from_file(const std::string& path);
  std::string to_json_text() const;
  void validate() const;
};

}  // namespace daei
