// The Vec2Text inverter (paper §III-B; reference notes §1.1): an embedding e (d) becomes R "repeat tokens"
//   embedding_transform = Linear(d→d) → Dropout → GELU → Linear(d → d_model·R)   (HF names embedding_transform.0/.3)
// given to a T5 encoder as inputs_embeds with an all-ones mask; the T5 decoder is trained with cross-entropy on
// the text's tokens. The T5 part keeps Hugging Face's parameter names, so `final/inverter/` is a Hugging Face T5
// directory (config.json + model.safetensors) that Python loads unchanged; the projection sits beside it in
// embedding_transform.safetensors with inverter.json (d, R).
#pragma once
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "model/net/t5.h"

namespace daei {

struct GenerateOptions;

// Cross-entropy as (sum over real tokens, number of real tokens): the Trainer divides the sum by the token count
// of the global batch, so N ranks on B/N equal 1 rank on B whatever the texts' lengths.
struct TokenLoss {
  at::Tensor sum;     // scalar
  int64_t count = 0;  // labels != -100
};

// LM head + cross-entropy on the positions whose label is not -100 only: no logits for padding, and at most
// `chunk_tokens` rows of logits alive at once in the forward.
TokenLoss t5_token_loss(T5ModelImpl& t5, const at::Tensor& decoder_hidden, const at::Tensor& labels,
                        int64_t chunk_tokens = 8192);

// Labels for T5 from token-id rows: (B, L) padded with -100, L = the longest row (no work on padding).
at::Tensor labels_from_rows(const std::vector<std::vector<int64_t>>& rows);

// Linear(d→d) → Dropout → GELU → Linear(d → d_model·R), reshaped to (B, R, d_model).
class EmbeddingTransformImpl : public torch::nn::Module {
 public:
  EmbeddingTransformImpl(int64_t dim, int64_t d_model, int64_t repeat, double dropout);
  at::Tensor forward(const at::Tensor& e);
  torch::nn::Sequential net{nullptr};
  int64_t dim, d_model, repeat;
};
TORCH_MODULE(EmbeddingTransform);

struct InverterConfig {
  int64_t dim = 768;     // embedding dimension d
  int64_t repeat = 16;   // R
  T5Config t5;
  // A guided inverter (issue 65 item 4; stages/recipes/guided.h) also reads a bag-of-words model's top `guide_words`
  // words of the same input, as word pieces after the R embedding tokens; `guide_bow` names the bow stage whose
  // final model gives them at inference. 0 = an unguided inverter.
  int64_t guide_words = 0;
  std::string guide_bow;
  int64_t guide_pieces = 0;  // at most this many word pieces of a guide line (eos included)
  // The copy gate (guided.copy): each decoding step adds softplus(copy_gate(h)) to the logits of the guide's pieces,
  // h the decoder's hidden state there. A from-scratch T5 learns late to copy from its encoder input (results/
  // content.md); the gate gives it a path that costs one linear layer, and lets it learn where to copy.
  bool guide_copy = false;
};

// The guide of a batch: word-piece ids (B, G) padded with pad, and their mask (B, G), 1 on real pieces
// (SpmTokenizer::encode_batch of the guide lines).
struct InverterGuide {
  at::Tensor ids, mask;
};

class InverterImpl : public torch::nn::Module {
 public:
  explicit InverterImpl(const InverterConfig& c);
  // The R embedding tokens (B, R, d_model).
  at::Tensor project(const at::Tensor& e);
  // What the encoder reads: the R embedding tokens (mask 1), then the guide's pieces when guided (mask: the
  // guide's). A guided inverter refuses a call without a guide, and an unguided one a guide, in one line.
  at::Tensor encoder_inputs(const at::Tensor& e, const InverterGuide* guide, at::Tensor& mask);
  // Teacher-forced loss of the texts' token rows (labels from labels_from_rows).
  TokenLoss loss(const at::Tensor& e, const at::Tensor& labels, const InverterGuide* guide = nullptr);
  // Greedy (num_beams 1) or beam decoding: (B * num_return_sequences, L) token ids.
  at::Tensor generate(const at::Tensor& e, const GenerateOptions& opt, const InverterGuide* guide = nullptr);
  // A guided inverter's copy gate, registered as "copy_gate" (Linear(d_model → 1), zero weight: softplus(0) at
  // first); call before the optimizer takes the parameters. Sets cfg.guide_copy.
  void enable_guide_copy();
  // (B, V): 1 where a piece of the row's guide is (pad and eos left out), else 0.
  at::Tensor guide_piece_mask(const InverterGuide& guide) const;
  // Next-token logits (N, V) of decoder states h (N, d_model) with the copy gate's raise of pieces (N, V).
  at::Tensor copy_logits(const at::Tensor& h, const at::Tensor& pieces);

  // final/inverter/: config.json + model.safetensors (Hugging Face T5) + embedding_transform.safetensors +
  // inverter.json. load() also accepts a plain Hugging Face T5 directory as the starting point (t5-base) when
  // `allow_fresh_projection`: the projection is then freshly initialised.
  void save(const std::string& dir) const;
  static std::shared_ptr<InverterImpl> load(const std::string& dir);

  InverterConfig cfg;
  EmbeddingTransform embedding_transform{nullptr};
  T5Model t5{nullptr};  // registered as "t5": checkpoints carry t5.shared.weight, ...
  torch::nn::Linear copy_gate{nullptr};  // with cfg.guide_copy only; saved in copy_gate.safetensors
};
TORCH_MODULE(Inverter);

}  // namespace daei
