// vec2text's published models (reference notes §1.1, §1.2) as daei's inverter and corrector.
//
// vec2text saves an InversionModel or a CorrectorEncoderModel with Hugging Face's save_pretrained: a directory with
// config.json (the InversionConfig's fields: num_repeat_tokens, model_name_or_path, ...; no T5 config) and
// model.safetensors holding the whole module's state_dict:
//   inverter:  encoder_decoder.<T5 names>, embedding_transform.{0,3}.{weight,bias} (older checkpoints: .2 for .3),
//              embedder.* (the frozen embedding model vec2text keeps inside; not part of the attack, skipped)
//   corrector: encoder_decoder.<T5 names>, embedding_transform_{1,2,3}.{0,3}.{weight,bias}, layernorm.{weight,bias}
// The T5's shape is read from the tensors (vocabulary and d_model from the embedding, layers from the block
// indices, heads and buckets from the relative-attention table, d_kv and d_ff from the projections, relu or gated
// from wi / wi_0, tied unless lm_head differs from the embedding); the rest keeps T5's defaults (eps 1e-6, max
// distance 128, pad 0, eos 1). Only model.safetensors is read: a pytorch_model.bin is a Python pickle, refused.
// Every refusal is one line naming the file and the key: a tensor daei has no place for, one that is missing, a
// shape that does not fit, num_repeat_tokens that disagrees with the projection.
#pragma once
#include <memory>
#include <string>

#include "core/safetensors.h"
#include "model/attack/corrector.h"
#include "model/attack/inverter.h"

namespace daei {

// The T5 config of the tensors named `prefix` + Hugging Face T5 names in `tensors` (keys without the prefix are
// ignored). `source` names the file in errors.
T5Config vec2text_t5_config(const TensorMap& tensors, const std::string& prefix, const std::string& source);

// A vec2text InversionModel directory as daei's inverter (eval mode, CPU).
std::shared_ptr<InverterImpl> load_vec2text_inverter(const std::string& dir);
// A vec2text CorrectorEncoderModel directory as daei's corrector (eval mode, CPU).
std::shared_ptr<CorrectorImpl> load_vec2text_corrector(const std::string& dir);

}  // namespace daei
