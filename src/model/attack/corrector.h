// The Vec2Text corrector (paper §III-D; reference notes §1.2, §2.4): a fresh T5 conditioned on three views of a
// (target, hypothesis) pair of embeddings and on the hypothesis' tokens:
//   T_k = Linear(d→d) → Dropout(0) → GELU → Linear(d → d_model·R), k = 1, 2, 3 (separate weights)
//   encoder input = LayerNorm([eos, T1(ẽ)×R, eos, T3(ê)×R, eos, T2(ẽ−ê)×R, eos, embed(hypothesis ids)])
//   mask          = ones(4 + 3R) ‖ (hypothesis ids != pad)
// where ẽ is the target and ê the hypothesis' embedding. In DAEI both are already denoised by the frozen DAE
// (ẽ = DAE(y), ê = DAE(f(x̂))): the caller applies the DAE, the corrector itself is DAE-free.
//
// On disk (final/corrector/): config.json + model.safetensors (a Hugging Face T5 directory, Python loads it
// unchanged), corrector_heads.safetensors (vec2text's names: embedding_transform_{1,2,3}.{0,3}.{weight,bias},
// layernorm.{weight,bias}) and corrector.json (d, R). In memory the T5 is registered as "t5", as in the inverter.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/nn/modules/normalization.h>

#include "model/net/generate.h"
#include "model/attack/inverter.h"
#include "model/net/t5.h"

namespace daei {

// How a hypothesis' tokens are laid out for the corrector (issue 67); the correction loop builds them
// (eval/correction.h: hypothesis_batch).
//   daei:     the text's pieces then eos, no leading pad (the tokenizer's encode); daei's own correctors are trained
//             and evaluated with it (stage 4's hypotheses), so they keep it: changing it changes their results.
//   vec2text: the ids as generate() returned them: the decoder-start pad first (masked out by ids != pad), eos only
//             when decoding ended before max_length (vec2text's trainers/corrector.py feeds the corrector that way);
//             every imported vec2text corrector reads them so.
enum class HypothesisIds { daei, vec2text };

const char* hypothesis_ids_name(HypothesisIds h);  // "daei" / "vec2text", as corrector.json writes it

struct CorrectorConfig {
  int64_t dim = 768;    // embedding dimension d
  int64_t repeat = 16;  // R
  double layer_norm_eps = 1e-5;  // torch.nn.LayerNorm's default, as vec2text
  HypothesisIds hypothesis_ids = HypothesisIds::daei;  // corrector.json "hypothesis_ids" (absent: daei)
  T5Config t5;
};

class CorrectorImpl : public torch::nn::Module {
 public:
  explicit CorrectorImpl(const CorrectorConfig& c);

  // Number of encoder positions before the hypothesis tokens: 4 + 3R.
  int64_t prefix_length() const { return 4 + 3 * cfg.repeat; }
  // The encoder's inputs_embeds (B, 4+3R+L, d_model), LayerNorm applied, and its mask (B, 4+3R+L) int64.
  // target_e, hyp_e: (B, d); hyp_ids: (B, L) int64 padded with pad (0).
  std::pair<at::Tensor, at::Tensor> encoder_inputs(const at::Tensor& target_e, const at::Tensor& hyp_e,
                                                   const at::Tensor& hyp_ids);
  // Teacher-forced cross-entropy on the true text's tokens (labels from labels_from_rows): real tokens only.
  TokenLoss loss(const at::Tensor& target_e, const at::Tensor& hyp_e, const at::Tensor& hyp_ids,
                 const at::Tensor& labels);
  // Greedy (num_beams 1) or beam decoding: sequences (B * num_return_sequences, L) and their scores; rows
  // b*R+r. Runs under NoGradGuard; call eval() first.
  GenerateOutput generate(const at::Tensor& target_e, const at::Tensor& hyp_e, const at::Tensor& hyp_ids,
                          const GenerateOptions& opt);
  // The logits of the first decoding step (decoder start token only): float32 (B, vocab). No grad.
  at::Tensor first_step_logits(const at::Tensor& target_e, const at::Tensor& hyp_e, const at::Tensor& hyp_ids);

  void save(const std::string& dir) const;
  // In eval mode, on the CPU.
  static std::shared_ptr<CorrectorImpl> load(const std::string& dir);

  CorrectorConfig cfg;
  EmbeddingTransform embedding_transform_1{nullptr}, embedding_transform_2{nullptr}, embedding_transform_3{nullptr};
  torch::nn::LayerNorm layernorm{nullptr};
  T5Model t5{nullptr};  // registered as "t5": t5.shared.weight, t5.encoder.block.0...
};
TORCH_MODULE(Corrector);

// Warm start (issue 21; DAEI initialises its corrector from the trained inverter): every T5 tensor and T1 (the
// transform of the target ẽ, the inverter's role) are copied from `inverter`; T2 (ẽ−ê) and T3 (ê) are copied from
// the inverter's transform too when `copy_t2_t3`, else they keep their fresh initialisation. The corrector's
// LayerNorm has no counterpart in the inverter and stays fresh. Shapes must match (same T5, d and R); returns the
// corrector's names of the tensors copied.
std::vector<std::string> warm_start_corrector(CorrectorImpl& corrector, const InverterImpl& inverter, bool copy_t2_t3);

}  // namespace daei
