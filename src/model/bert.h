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
    v("vocab_size", s.vocab_size);
    v("hidden_size", s.hidden_size);
    v("num_hidden_layers", s.num_hidden_layers);
    v("num_attention_heads", s.num_attention_heads);
    v("intermediate_size", s.intermediate_size);
    v("hidden_act", s.hidden_act);
    v("hidden_dropout_prob", s.hidden_dropout_prob);
    v("attention_probs_dropout_prob", s.attention_probs_dropout_prob);
    v("max_position_embeddings", s.max_position_embeddings);
    v("type_vocab_size", s.type_vocab_size);
    v("layer_norm_eps", s.layer_norm_eps);
    v("pad_token_id", s.pad_token_id);
    v("daei_with_pooler", s.with_pooler);
  }

  static BertConfig from_json_text(const std::string& text, const std::string& source = "config.json");
  static BertConfig from_file(const std::string& path);
  std::string to_json_text() const;
  void validate() const;
};

struct BertOutput {
  torch::Tensor last_hidden_state;  // (B, T, H)
  torch::Tensor pooler_output;      // (B, H) tanh(dense(h[:, 0])), undefined without a pooler
};

class BertModelImpl : public torch::nn::Module {
 public:
  explicit BertModelImpl(const BertConfig& c);
  // input_ids (B, T); attention_mask (B, T) 1/0 (undefined = all ones); token_type_ids undefined = zeros.
  BertOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                     const torch::Tensor& token_type_ids = {});
  static std::shared_ptr<BertModelImpl> from_pretrained(const std::string& dir);
  void load_weights(const std::string& safetensors_path, bool strict = true);
  void load_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& source, bool strict = true);
  void save_pretrained(const std::string& dir) const;

  BertConfig cfg;
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
