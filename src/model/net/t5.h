// T5 encoder-decoder (Raffel et al.) with parameter names identical to Hugging Face
// T5ForConditionalGeneration / T5EncoderModel, so `model.safetensors` checkpoints load unchanged:
//   shared.weight, encoder.block.N.layer.0.SelfAttention.{q,k,v,o}.weight,
//   {encoder,decoder}.block.0.layer.0.SelfAttention.relative_attention_bias.weight (block 0 only; shared by the stack),
//   encoder.block.N.layer.{0,1}.layer_norm.weight, ...layer.1.DenseReluDense.{wi | wi_0,wi_1}.weight, .wo.weight,
//   decoder.block.N.layer.1.EncDecAttention.*, decoder.block.N.layer.2.DenseReluDense.*, {encoder,decoder}.final_layer_norm.weight,
//   lm_head.weight (only when embeddings are not tied).
// Math as in HF: no 1/sqrt(d) scaling of scores, RMS layer norm in fp32, bucketed relative positions
// (bidirectional in the encoder, causal in the decoder), decoder output scaled by d_model^-0.5 when tied.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "model/net/attention_mask.h"
#include "model/net/t5_config.h"

namespace daei {

// T5Config: model/net/t5_config.h (no torch, so the config.json reader is fuzzed alone).

// HF T5Attention._relative_position_bucket.
torch::Tensor t5_relative_position_bucket(const torch::Tensor& relative_position, bool bidirectional,
                                          int64_t num_buckets, int64_t max_distance);

// Key/value cache for incremental decoding: per decoder layer, self-attention keys/values that grow by
// one position a step, cross-attention keys/values computed once from the encoder output. All in the projections'
// layout (B, T, H·d_kv). The self-attention ones are views of the first T positions of buffers with room to grow
// (doubling), so a step writes its position in place instead of concatenating the whole cache.
struct T5Cache {
  std::vector<torch::Tensor> self_k, self_v, cross_k, cross_v;  // (B, T, H·d_kv)
  std::vector<torch::Tensor> self_k_buf, self_v_buf;            // (B, capacity, H·d_kv), self_k = its first T
  int64_t length() const { return self_k.empty() || !self_k[0].defined() ? 0 : self_k[0].size(1); }
  // Reorders the batch dimension (beam search).
  void reorder(const torch::Tensor& index);
};

// Appends x (B, t, d) to the cached positions `view` (B, T, d), a view of `buf`; grows buf when it is full.
void append_cached_positions(torch::Tensor& view, torch::Tensor& buf, const torch::Tensor& x);

class T5LayerNormImpl : public torch::nn::Module {
 public:
  T5LayerNormImpl(int64_t d, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;
  double eps;
};
TORCH_MODULE(T5LayerNorm);

class T5AttentionImpl : public torch::nn::Module {
 public:
  T5AttentionImpl(const T5Config& c, bool is_decoder, bool has_relative_attention_bias);
  // Position bias (1, H, q_len, k_len) for queries at positions [k_len - q_len, k_len).
  torch::Tensor compute_bias(int64_t q_len, int64_t k_len);
  // x: (B, Tq, d). kv: (B, Tk, d) for cross-attention, undefined for self-attention.
  // bias: position bias + additive mask, broadcastable to (B, H, Tq, Tk). cache_k/v: optional in/out.
  // With a cache, cache_k/v hold the keys/values in the (B, T, H·d_kv) layout; self-attention appends to them
  // through buf_k/v (T5Cache's buffers), cross-attention (static_kv) computes them once.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& kv, const torch::Tensor& bias,
                        torch::Tensor* cache_k = nullptr, torch::Tensor* cache_v = nullptr, bool static_kv = false,
                        torch::Tensor* buf_k = nullptr, torch::Tensor* buf_v = nullptr);
  // (B, H, T, d_kv) queries/keys/values → softmax(q kᵀ + bias), dropout, · v, output projection.
  torch::Tensor attend(const torch::Tensor& qs, const torch::Tensor& ks, const torch::Tensor& vs,
                       const torch::Tensor& bias, int64_t B, int64_t Tq);
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
  torch::nn::Embedding relative_attention_bias{nullptr};
  bool is_decoder;
  int64_t n_heads, d_kv, num_buckets, max_distance;
  double dropout;
};
TORCH_MODULE(T5Attention);

class T5DenseImpl : public torch::nn::Module {  // DenseReluDense / DenseGatedActDense (same HF name)
 public:
  explicit T5DenseImpl(const T5Config& c);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear wi{nullptr}, wi_0{nullptr}, wi_1{nullptr}, wo{nullptr};
  bool gated;
  std::string act;
  double dropout;
};
TORCH_MODULE(T5Dense);

// One HF T5Layer*: a sub-layer with its pre-norm (`layer_norm`) and residual. kind: 0 self-attention,
// 1 cross-attention, 2 feed-forward.
class T5SubLayerImpl : public torch::nn::Module {
 public:
  T5SubLayerImpl(const T5Config& c, int kind, bool is_decoder, bool has_bias);
  int kind;
  double dropout;
  T5Attention attn{nullptr};  // registered as "SelfAttention" or "EncDecAttention"
  T5Dense ff{nullptr};        // registered as "DenseReluDense"
  T5LayerNorm layer_norm{nullptr};
};
TORCH_MODULE(T5SubLayer);

class T5StackImpl : public torch::nn::Module {
 public:
  T5StackImpl(const T5Config& c, bool is_decoder);
  // inputs_embeds (B, T, d); mask (B, T) of 1/0 (undefined = all ones). For the decoder, enc (B, S, d) and
  // enc_mask (B, S). With a cache, inputs_embeds holds only the new positions.
  torch::Tensor forward(const torch::Tensor& inputs_embeds, const torch::Tensor& mask,
                        const torch::Tensor& enc = {}, const torch::Tensor& enc_mask = {}, T5Cache* cache = nullptr);
  torch::nn::ModuleList block{nullptr};
  T5LayerNorm final_layer_norm{nullptr};
  T5Config cfg;
  bool is_decoder;
};
TORCH_MODULE(T5Stack);

struct T5Output {
  torch::Tensor logits;          // (B, T, V)
  torch::Tensor loss;            // scalar mean CE over labels != -100 (undefined without labels)
  torch::Tensor encoder_hidden;  // (B, S, d) after final_layer_norm
  torch::Tensor decoder_hidden;  // (B, T, d) after final_layer_norm (before the tied-embedding scaling)
};

// Mean cross-entropy over positions whose label is not -100 (HF CrossEntropyLoss(ignore_index=-100)).
torch::Tensor t5_ce_loss(const torch::Tensor& logits, const torch::Tensor& labels);

class T5ModelImpl : public torch::nn::Module {  // T5ForConditionalGeneration
 public:
  explicit T5ModelImpl(const T5Config& c);
  torch::Tensor embed(const torch::Tensor& ids);  // shared(ids)
  // Encoder over embeddings (the inverter's path) or token ids.
  torch::Tensor encode(const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask);
  torch::Tensor encode_ids(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
  // Decoder + lm_head: logits (B, T, V). With a cache, decoder_input_ids holds only the new positions.
  torch::Tensor decode(const torch::Tensor& decoder_input_ids, const torch::Tensor& encoder_hidden,
                       const torch::Tensor& encoder_mask, T5Cache* cache = nullptr,
                       const torch::Tensor& decoder_attention_mask = {}, torch::Tensor* decoder_hidden = nullptr);
  // Full teacher-forced pass. decoder_input_ids default to shift_right(labels). labels may be undefined
  // when decoder_input_ids are given (no loss then).
  T5Output forward(const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask,
                   const torch::Tensor& labels, const torch::Tensor& decoder_input_ids = {});
  T5Output forward_ids(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const torch::Tensor& labels, const torch::Tensor& decoder_input_ids = {});
  // decoder_start prepended, last position dropped, -100 replaced by pad (HF _shift_right).
  torch::Tensor shift_right(const torch::Tensor& labels) const;
  T5Cache make_cache() const;

  // Hugging Face directory (config.json + model.safetensors) / single weights file.
  static std::shared_ptr<T5ModelImpl> from_pretrained(const std::string& dir);
  void load_weights(const std::string& safetensors_path, bool strict = true);
  void save_pretrained(const std::string& dir) const;  // config.json + model.safetensors

  T5Config cfg;
  torch::nn::Embedding shared{nullptr};
  T5Stack encoder{nullptr}, decoder{nullptr};
  torch::nn::Linear lm_head{nullptr};  // only when !tie_word_embeddings
};
TORCH_MODULE(T5Model);

class T5EncoderModelImpl : public torch::nn::Module {  // T5EncoderModel: shared + encoder
 public:
  explicit T5EncoderModelImpl(const T5Config& c);
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
  torch::Tensor forward_embeds(const torch::Tensor& inputs_embeds, const torch::Tensor& attention_mask);
  // Loads the encoder half of a T5EncoderModel or T5ForConditionalGeneration checkpoint.
  static std::shared_ptr<T5EncoderModelImpl> from_pretrained(const std::string& dir);
  void load_weights(const std::string& safetensors_path, bool strict = true);
  T5Config cfg;
  torch::nn::Embedding shared{nullptr};
  T5Stack encoder{nullptr};
};
TORCH_MODULE(T5EncoderModel);

}  // namespace daei
