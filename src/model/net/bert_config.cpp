#include "model/net/bert_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"

namespace daei {

BertConfig BertConfig::from_json_text(const std::string& text, const std::string& source) {
  BertConfig c;
  read_json_text_fields(c, text, source);
  validate_from(c, source);
  return c;
}

BertConfig BertConfig::from_file(const std::string& path) { return from_json_text(read_file(path), path); }

std::string BertConfig::to_json_text() const {
  return json_fields_text(*this, {{"model_type", "bert"}, {"architectures", {"BertModel"}}});
}

void BertConfig::validate() const {
  DAEI_CHECK(vocab_size > 0 && hidden_size > 0 && num_attention_heads > 0 && intermediate_size > 0 &&
                 max_position_embeddings > 0 && type_vocab_size > 0,
             "bert config: sizes must be positive");
  // Sizes whose weight counts overflow int64 were accepted (fuzz_model_json: vocab_size 12222255555555554).
  int64_t n = 0;
  DAEI_CHECK(!__builtin_mul_overflow(vocab_size, hidden_size, &n) &&
                 !__builtin_mul_overflow(intermediate_size, hidden_size, &n),
             "bert config: sizes too large (vocab {}, hidden {}, intermediate {})", vocab_size, hidden_size,
             intermediate_size);
  DAEI_CHECK(hidden_size % num_attention_heads == 0, "bert config: hidden_size {} not divisible by {} heads",
             hidden_size, num_attention_heads);
  DAEI_CHECK(hidden_act == "gelu" || hidden_act == "gelu_new" || hidden_act == "relu",
             "bert config: unsupported hidden_act '{}'", hidden_act);
}

}  // namespace daei
