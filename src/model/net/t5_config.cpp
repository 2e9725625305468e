#include "model/net/t5_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"

namespace daei {

T5Config T5Config::from_json_text(const std::string& text, const std::string& source) {
  T5Config c;
  const auto j = read_json_text_fields(c, text, source);
  // As Hugging Face: without num_decoder_layers the decoder is as deep as the encoder.
  if (!j.contains("num_decoder_layers") || j["num_decoder_layers"].is_null()) c.num_decoder_layers = c.num_layers;
  validate_from(c, source);
  return c;
}

T5Config T5Config::from_file(const std::string& path) { return from_json_text(read_file(path), path); }

std::string T5Config::to_json_text() const {
  return json_fields_text(*this, {{"model_type", "t5"},
                                  {"architectures", {"T5ForConditionalGeneration"}},
                                  {"is_encoder_decoder", true}});
}

void T5Config::validate() const {
  DAEI_CHECK(vocab_size > 0 && d_model > 0 && d_kv > 0 && d_ff > 0 && num_heads > 0,
             "t5 config: sizes must be positive (vocab {}, d_model {}, d_kv {}, d_ff {}, heads {})", vocab_size,
             d_model, d_kv, d_ff, num_heads);
  DAEI_CHECK(num_layers >= 0 && num_decoder_layers >= 0, "t5 config: negative layer count");
  // Sizes whose weight counts overflow int64 were accepted (found by fuzz_model_json on the BERT twin of this rule).
  int64_t n = 0;
  DAEI_CHECK(!__builtin_mul_overflow(vocab_size, d_model, &n) && !__builtin_mul_overflow(d_ff, d_model, &n) &&
                 !__builtin_mul_overflow(num_heads, d_kv, &n) && !__builtin_mul_overflow(n, d_model, &n),
             "t5 config: sizes too large (vocab {}, d_model {}, d_ff {}, heads {} x d_kv {})", vocab_size, d_model,
             d_ff, num_heads, d_kv);
  DAEI_CHECK(relative_attention_num_buckets >= 2 && relative_attention_max_distance > 0,
             "t5 config: relative_attention_num_buckets must be >= 2");
  const std::string act = gated() ? feed_forward_proj.substr(6) : feed_forward_proj;
  DAEI_CHECK(act == "relu" || act == "gelu" || act == "silu",
             "t5 config: feed_forward_proj '{}' is not relu, gelu, gated-gelu, gated-relu or gated-silu",
             feed_forward_proj);
  DAEI_CHECK(dropout_rate >= 0 && dropout_rate < 1, "t5 config: dropout_rate {} not in [0, 1)", dropout_rate);
  for (int64_t id : {pad_token_id, eos_token_id, decoder_start_token_id})
    DAEI_CHECK(id >= 0 && id < vocab_size, "t5 config: special token id {} outside the vocabulary", id);
}

}  // namespace daei
