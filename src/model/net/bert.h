// BERT encoder (Devlin et al.) with Hugging Face BertModel parameter names, shaped like thenlper/gte-base:
//   embeddings.{word,position,token_type}_embeddings.weight, embeddings.LayerNorm.{weight,bias},
//   encoder.layer.N.attention.self.{query,key,value}.{weight,bias}, encoder.layer.N.attention.output.dense.*,
//   encoder.layer.N.attention.output.LayerNorm.*, encoder.layer.N.intermediate.dense.*,
//   encoder.layer.N.output.dense.*, encoder.layer.N.output.LayerNorm.*, pooler.dense.* (optional).
// Checkpoints whose names start with "bert." (BertFor* heads) load too; head tensors are ignored.
#pragma once
#include <map>
#include <string>
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "model/net/bert_config.h"

namespace daei {

// BertConfig: model/net/bert_config.h (no torch, so the config.json reader is fuzzed alone).

struct BertOutput {
  torch::Tensor last_hidden_state;  // (B, T, H); 0 at padded positions where the forward packed its rows
  torch::Tensor pooler_output;      // (B, H) tanh(dense(h[:, 0])), undefined without a pooler
};

class BertModelImpl : public torch::nn::Module {
 public:
  explicit BertModelImpl(const BertConfig& c);
  // input_ids (B, T); attention_mask (B, T) 1/0 (undefined = all ones); token_type_ids undefined = zeros.
  // In inference (eval mode, no grad) on a batch with padding, and with pack_padding, the layers run on the real
  // tokens only: the token-wise products skip the padding (sorted batches of corpus texts are half padding at the
  // long tail, bench/peers/findings.md), attention keeps the (B, T) layout; real positions equal the padded forward's
  // to rounding, padded ones are 0.
  BertOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                     const torch::Tensor& token_type_ids = {});
  static std::shared_ptr<BertModelImpl> from_pretrained(const std::string& dir);
  void load_weights(const std::string& safetensors_path, bool strict = true);
  void load_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& source, bool strict = true);
  void save_pretrained(const std::string& dir) const;

  BertConfig cfg;
  bool pack_padding = true;
  torch::nn::Module* embeddings = nullptr;
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm emb_norm{nullptr};
  torch::nn::ModuleList layer{nullptr};
  torch::nn::Linear pooler_dense{nullptr};
};
TORCH_MODULE(BertModel);

// Mean of the hidden states over positions where attention_mask is 1 (gte-base's sentence embedding).
torch::Tensor masked_mean_pool(const torch::Tensor& hidden, const torch::Tensor& attention_mask);

}  // namespace daei
