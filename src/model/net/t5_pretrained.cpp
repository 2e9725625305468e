// Loading the pretrain stage's T5 into an inverter's or corrector's (what and why: t5_pretrained.h).
#include "model/net/t5_pretrained.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "model/net/t5.h"

namespace daei {

PretrainedLoad load_pretrained_t5(T5ModelImpl& t5, const std::string& dir) {
  const std::string about_file = dir + "/training.json", weights = dir + "/model.safetensors";
  DAEI_CHECK(file_exists(about_file) && file_exists(weights),
             "{}: not a pretrained T5 (needs training.json and model.safetensors; run `daei train --stage pretrain`)",
             dir);
  nlohmann::json about;
  try {
    about = nlohmann::json::parse(read_file(about_file));
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: not JSON ({})", about_file, e.what()));
  }
  DAEI_CHECK(about.value("stage", "") == "pretrain" && about.contains("tokenizer_vocab") && about.contains("sentinels"),
             "{}: not written by the pretrain stage", about_file);
  const int64_t V = about["tokenizer_vocab"].get<int64_t>(), S = about["sentinels"].get<int64_t>();
  const T5Config saved = T5Config::from_file(dir + "/config.json");
  const T5Config& mine = t5.cfg;
  DAEI_CHECK(saved.d_model == mine.d_model && saved.d_kv == mine.d_kv && saved.d_ff == mine.d_ff &&
                 saved.num_layers == mine.num_layers && saved.num_decoder_layers == mine.num_decoder_layers &&
                 saved.num_heads == mine.num_heads && saved.feed_forward_proj == mine.feed_forward_proj &&
                 saved.tie_word_embeddings == mine.tie_word_embeddings,
             "{}: the pretrained T5 (d_model {}, {}+{} layers, {} heads, d_ff {}) is not the shape of this model "
             "(d_model {}, {}+{} layers, {} heads, d_ff {}): train the pretrain stage again with these inverter.* keys",
             dir, saved.d_model, saved.num_layers, saved.num_decoder_layers, saved.num_heads, saved.d_ff, mine.d_model,
             mine.num_layers, mine.num_decoder_layers, mine.num_heads, mine.d_ff);
  DAEI_CHECK(saved.vocab_size == V + S && mine.vocab_size == V,
             "{}: vocabulary {} = {} pieces + {} sentinels does not fit this model's {} pieces (another tokenizer?)",
             dir, saved.vocab_size, V, S, mine.vocab_size);
  auto tensors = load_safetensors(weights);
  PretrainedLoad rep;
  for (auto& [name, t] : tensors) {
    if ((name == "shared.weight" || name == "lm_head.weight") && t.dim() == 2 && t.size(0) == V + S) {
      t = t.narrow(0, 0, V);
      rep.cut.push_back(name);
    } else {
      rep.copied.push_back(name);
    }
  }
  DAEI_CHECK(!rep.cut.empty(), "{}: no token embedding of {} rows", weights, V + S);
  load_module_state(t5, tensors, weights, /*strict=*/true, nullptr);
  return rep;
}

}  // namespace daei
