// libFuzzer target for daei's reading of a model directory's JSON files (src/model/net/t5_config.cpp, bert_config.cpp,
// sbert_json.cpp): config.json (T5, BERT), modules.json, 1_Pooling/config.json, sentence_bert_config.json,
// tokenizer_config.json, 2_Dense/config.json. Any text must be refused with a daei::Error naming the file, or give
// a value that passes its rules. Byte 0 picks the reader. Build: tests/fuzz/run_fuzz.sh
#include "fuzz_util.h"
#include "model/net/bert_config.h"
#include "model/release/sbert_json.h"
#include "model/net/t5_config.h"

using daei::fuzz::require;

namespace {
// Every size a model allocates from must be positive and small enough that their products fit in int64.
bool fits(int64_t a, int64_t b) {
  int64_t p;
  return a > 0 && b > 0 && !__builtin_mul_overflow(a, b, &p);
}

// A module path must name a folder inside the model directory: relative, no ".." component.
bool inside(const std::string& path) {
  if (!path.empty() && path[0] == '/') return false;
  const std::string p = "/" + path + "/";
  return p.find("/../") == std::string::npos;
}

void read_one(int which, const std::string& text, const std::string& src) {
  switch (which) {
    case 0: {
      auto c = daei::T5Config::from_json_text(text, src);
      c.validate();
      require(fits(c.vocab_size, c.d_model) && fits(c.d_ff, c.d_model) && fits(c.num_heads * c.d_kv, c.d_model));
      break;
    }
    case 1: {
      auto c = daei::BertConfig::from_json_text(text, src);
      c.validate();
      require(fits(c.vocab_size, c.hidden_size) && fits(c.intermediate_size, c.hidden_size));
      break;
    }
    case 2:
      for (const auto& m : daei::parse_sbert_modules(text, src)) require(inside(m.path));
      break;
    case 3: {
      const std::string p = daei::parse_pooling_mode(text, src);
      require(p == "mean" || p == "cls");
      break;
    }
    case 4: {
      const int64_t n = daei::sbert_max_length(text, src, 512);
      require(n >= 2 && n <= 512);
      break;
    }
    case 5:
      daei::parse_model_type(text, src, "t5");
      break;
    case 6:
      daei::parse_do_lower_case(text, src);
      break;
    default: {
      const std::string a = daei::parse_dense_activation(text, src);
      require(a == "tanh" || a == "identity");
    }
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string src = "fuzz/model/config.json";
  try {
    read_one(data[0] & 7, daei::fuzz::rest(data, size), src);
  } catch (const daei::Error& e) {
    daei::fuzz::require_names(e, src);
  }
  return 0;
}
