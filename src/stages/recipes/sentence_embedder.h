// The contextual embedder stage (`daei train --stage embedder`): a GTR-like sentence embedder trained here, because
// GTR's weights cannot be downloaded on this machine (reference notes §1–2). The recipe at this machine's scale:
//   encoder      the T5 encoder (+ shared token embeddings) of the run's pretrain stage (final/t5; sentinel rows
//                dropped as load_pretrained_t5 does); the inverters' shape (inverter.*)
//   pooling      mean over non-pad tokens, eos included (sentence-transformers' mean pooling)
//   projection   dense d_model → embedder_train.dim, no bias, Identity activation (GTR's DenseGeneral)
//   output       L2-normalised
//   objective    unsupervised SimCSE (Gao et al. 2021): each training text encoded twice under T5 dropout
//                embedder_train.dropout; CE over cos(z1_i, z2_j)/τ with label i, made symmetric (the mean of the
//                z1→z2 and z2→z1 directions, as GTR's bidirectional in-batch loss and MNRL-symmetric) when
//                embedder_train.symmetric. In-batch negatives span the GLOBAL batch: the rows of every rank are
//                gathered, each rank computes the whole batch's loss with only its own rows carrying gradient, and
//                returns it as a sum over the global rows with its local row count, so the Trainer's all-reduce
//                (Σ over ranks / global count) gives exactly the one-rank gradient (see in_batch_loss_for_rank).
// Training texts only, no embedding of any text is read. Final: runs/NAME/embedder/final/st/, a sentence-transformers
// directory (modules.json, T5EncoderModel config.json + model.safetensors, spiece.model, 1_Pooling, 2_Dense,
// 3_Normalize) that `embedder.kind: t5`, `embedder.model: DIR` loads like a downloaded GTR; final/report.json: test
// recall@1 of clean and noisy queries against clean candidates (the embedder is the defender's model: evaluating it on
// test texts is allowed, it never trains on them).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/nn/modules/linear.h>

#include "model/net/t5.h"
#include "stages/recipes/lm.h"

namespace daei {

class Communicator;
class Config;
class SpmTokenizer;
class Trainer;

// T5 encoder → mean pool → dense (no bias) → L2 norm. Parameter names: shared.*, encoder.* (Hugging Face
// T5EncoderModel's) and dense.weight (2_Dense's linear.weight on export).
class ContextualEmbedderImpl : public torch::nn::Module {
 public:
  ContextualEmbedderImpl(const T5Config& t5, int64_t dim);
  // (B, L) ids and 1/0 mask → (B, dim) unit rows.
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& attention_mask);
  T5EncoderModel t5{nullptr};
  torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(ContextualEmbedder);

// Copies the pretrain stage's T5 (final/t5) encoder and token embeddings into `m` (every encoder tensor from the
// file; the decoder's are not used). A different shape or tokenizer is refused as load_pretrained_t5 refuses it.
void load_pretrained_encoder(ContextualEmbedderImpl& m, const Config& cfg, const std::string& pretrained_dir);

// The in-batch contrastive loss over a whole (global) batch: z1, z2 (B, d) unit rows, the two views; the mean over
// the B anchors of CE(cos(z1_i, z2_·)/τ, i), averaged with the z2→z1 direction when symmetric.
at::Tensor in_batch_contrastive_loss(const at::Tensor& z1, const at::Tensor& z2, double temperature, bool symmetric);

// Rows [offset, offset + local.size(0)) of the global batch of `global_rows` rows are `local` (with its gradient);
// the other ranks' rows are gathered (an all-reduce of a zero-filled buffer: adding zeros is exact) and carry none.
at::Tensor gather_global_rows(Communicator& comm, const at::Tensor& local, int64_t offset, int64_t global_rows);

// This rank's share of the global loss: in_batch_contrastive_loss on the gathered views × global rows. Summed over
// ranks, the gradients of these are global_rows × the full-batch loss's gradient; the Trainer divides by the global
// count (Σ local rows = global rows). `loss` receives the full-batch loss (the same on every rank) for the log.
at::Tensor in_batch_loss_for_rank(Communicator& comm, const at::Tensor& z1_local, const at::Tensor& z2_local,
                                  int64_t offset, int64_t global_rows, double temperature, bool symmetric,
                                  double* loss = nullptr);

// A sentence-transformers directory of `m` (written into `dir`, which must not exist yet: files go to a temporary
// sibling that is renamed into place): see the header comment. spiece: the run's SentencePiece model file.
void export_sentence_transformer(const ContextualEmbedderImpl& m, const std::string& spiece, int64_t max_length,
                                 const std::string& dir);

// recall@1 of each query among all texts' clean embeddings (row i is the right answer for query i), and the mean
// cosine of query i to its own clean row. queries, clean: (N, d), clean rows unit.
struct RecallAt1 {
  double recall = 0, mean_cos = 0;
};
RecallAt1 recall_at_1(const at::Tensor& queries, const at::Tensor& clean);

// The embedder_train.* keys the stage reads itself, read once by from_config (the values:
// configs/defaults/embedder_train.yaml); steps, batch_size, grad_accum, schedule, warmup_steps, clip_norm and
// eval_every are the Trainer's (trainer_options).
struct EmbedderTrainOptions {
  int64_t dim = 0, max_length = 0;
  double temperature = 0, dropout = 0;
  bool symmetric = false;
  double lr = 0, weight_decay = 0;
  int64_t report_texts = 0;
  std::vector<double> report_sigmas;

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("dim", s.dim), v("max_length", s.max_length);
    v("temperature", s.temperature), v("dropout", s.dropout), v("symmetric", s.symmetric);
    v("lr", s.lr), v("weight_decay", s.weight_decay);
    v("report_texts", s.report_texts), v("report_sigmas", s.report_sigmas);
  }
  static EmbedderTrainOptions from_config(const Config& cfg);
};

// Up to embedder_train.report_texts texts of the run's test split (corpus/test.jsonl), for the final report.
std::vector<std::string> embedder_report_texts(const Config& cfg, const std::string& run_dir);

struct EmbedderStageData {
  LmTrainData train, val;         // texts by row; val optional (held-out metrics)
  std::vector<std::string> report_texts;  // test texts of the final report (empty: no report)
  std::string tokenizer_file;     // the run's spm.model (copied as spiece.model)
  std::string pretrained_dir;     // the pretrain stage's final/t5; "" = seeded random weights (tests)
};

class EmbedderStage {
 public:
  EmbedderStage(const Config& cfg, Communicator& comm, const std::string& stage_dir, EmbedderStageData data,
                std::shared_ptr<SpmTokenizer> tok, bool resume, bool force);
  ~EmbedderStage();
  int run();
  ContextualEmbedderImpl& model() { return *model_; }
  // Token ids and mask of texts as the export's tokenizer makes them (max_length, padded to the longest).
  void encode(const std::vector<std::string>& texts, at::Tensor& ids, at::Tensor& mask) const;
  // Unit embeddings of texts in eval mode (no dropout), without gradients; the model is left in training mode.
  at::Tensor embed(const std::vector<std::string>& texts);

 private:
  std::map<std::string, double> heldout(int64_t step);
  void write_report(const std::string& final_dir);

  EmbedderStageData data_;
  std::shared_ptr<SpmTokenizer> tok_;
  ContextualEmbedder model_{nullptr};
  std::unique_ptr<Trainer> trainer_;
  Communicator& comm_;
  EmbedderTrainOptions options_;
  int64_t heldout_rows_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace daei
