// TransformerEmbedder: a sentence-transformers-style text embedder on daei's T5 encoder or BERT (issue 5).
//
// A model directory is read like a sentence-transformers one:
//   modules.json                         [{"path": "", "type": "...Transformer"}, {"path": "1_Pooling", ...}, ...]
//   config.json + model.safetensors      the transformer (T5 encoder: T5EncoderModel or T5ForConditionalGeneration
//                                        weights; BERT: BertModel weights), spiece.model (T5) or vocab.txt (BERT)
//   1_Pooling/config.json                pooling_mode_mean_tokens | pooling_mode_cls_token
//   2_Dense/config.json + model.safetensors   optional linear.weight/linear.bias (+ activation: Identity | Tanh)
//   a module whose type ends in "Normalize"  optional L2 normalisation
//   sentence_bert_config.json            optional max_seq_length: caps embedder.max_length
// Without modules.json a preset applies: gtr-t5-base = T5 encoder + mean pooling, no dense, no normalisation
// (as vec2text uses it); gte-base = BERT + mean pooling + L2 normalisation.
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "model/release/embedder.h"

namespace daei {

struct TransformerEmbedderSpec {
  std::string dir;
  std::string kind;       // "t5" | "bert" (from embedder.kind; checked against config.json's model_type)
  std::string preset;     // used when dir has no modules.json
  int64_t max_length = 128;
  int64_t batch_size = 64;

  // The embedder.* keys, listed once (read through core/fields.h): dir is embedder.model.
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("model", s.dir), v("kind", s.kind), v("preset", s.preset);
    v("max_length", s.max_length), v("batch_size", s.batch_size);
  }
};

class TransformerEmbedder final : public Embedder {
 public:
  explicit TransformerEmbedder(const TransformerEmbedderSpec& spec);
  ~TransformerEmbedder() override;
  int64_t dim() const override { return dim_; }
  std::string id() const override { return id_; }
  at::Tensor embed(const std::vector<std::string>& texts) const override;

  // What the directory (or preset) asked for.
  std::string pooling() const { return pooling_; }  // "mean" | "cls"
  bool has_dense() const { return dense_w_.defined(); }
  bool normalize() const { return normalize_; }
  int64_t max_length() const { return max_length_; }  // tokens per text, special tokens included
  // The token ids embed() feeds the model for one text ([CLS] ... [SEP] or pieces + </s>, truncated to max_length).
  std::vector<int64_t> token_ids(const std::string& text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pooling_ = "mean", dense_act_ = "identity", id_;
  bool normalize_ = false;
  at::Tensor dense_w_, dense_b_;
  int64_t dim_ = 0, max_length_ = 128, batch_size_ = 64;
  mutable std::mutex mu_;
};

}  // namespace daei
