// Stage 2 (paper §III-B; reference notes §1.1, §2.4): the Vec2Text inverter trained with cross-entropy on pairs
// (embedding, text), on the shared Trainer. The same code trains the attack and its baselines, with the same model
// and the same step budget (the stage2.* keys):
//   dae-only        inputs DAE(y, σ₀) from the frozen stage-1 DAE (runs/NAME/stage2)
//   noisy-inverter  inputs y, no DAE (runs/NAME/noisy-inverter)
//   wiener-inverter inputs W(y), the noisy-only Wiener filter (runs/NAME/wiener-inverter; stage2.wiener_inverter)
//   clean-inverter  inputs clean f(x) — a reference outside the threat model; its data source lives in the
//                   evaluation library (src/eval), which the attack stages do not link.
// The DAE is applied on the fly: at quickstart sizes it costs under 1 % of a T5 step (measured, see the note).
// Final: runs/NAME/<stage>/final/inverter/ (a Hugging Face T5 directory + embedding_transform.safetensors).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "data/dataset.h"
#include "model/attack/inverter.h"
#include "model/text/tokenizer_spm.h"

namespace daei {

class Communicator;
class Config;
class Trainer;
class NoisyEmbedder;
struct LinearEstimator;

// What an inverter trains on: the embedding it sees and the text it must produce, by training row.
struct InverterTrainData {
  int64_t rows = 0, dim = 0;
  std::function<at::Tensor(const std::vector<int64_t>&)> embeddings;  // float32 [n, dim] on the CPU
  std::function<std::vector<std::string>(const std::vector<int64_t>&)> texts;
  std::function<void(const std::vector<int64_t>&)> prefetch;  // optional read-ahead of rows and texts
  std::string input;  // "denoised" | "noisy" | "clean" (logged, recorded in final/)
  // A guided inverter's guide lines by row (stages/recipes/guided.h): a bag-of-words model's top words of the row's
  // input, joined by spaces. Unset for every other inverter.
  std::function<std::vector<std::string>(const std::vector<int64_t>&)> guides;
};

// Inverter shape from the inverter.* keys (a fresh small T5), or inverter.t5_dir (a Hugging Face T5 to start from).
InverterConfig inverter_config(const Config& cfg, int64_t dim, int64_t vocab_size);
Inverter make_inverter(const Config& cfg, int64_t dim, int64_t vocab_size);
// The inverter folder inverter.init_from names (issue 49: a `daei import vec2text` OUT/inverter/, or a run's
// final/inverter/) as the start of a fresh inverter, at inverter.dropout: refused in one line naming the key where
// its shape is not the configured one (inverter.*, or inverter.t5_dir's), it reads embeddings of another dimension
// than `dim`, or it was made with another tokenizer than `tok` (model/attack/imported_models.h).
Inverter inverter_from_init(const Config& cfg, int64_t dim, const SpmTokenizer& tok);
// inverter.init_from, refused in one line when it is set and not an inverter folder; "" when unset.
std::string init_from_folder(const Config& cfg);

// The T5 tokenizer of the run: inverter.tokenizer when set (t5-base's spiece.model), otherwise a SentencePiece
// unigram model trained once on the training split's texts into runs/NAME/tokenizer/spm.model (rank 0 trains, the
// others wait; reused on resume). Collective.
std::shared_ptr<SpmTokenizer> run_tokenizer(const Config& cfg, Communicator& comm, const std::string& run_dir,
                                            const NoisyDataset& train);

// Token-id rows of texts for training (inverter.max_length_train, eos appended).
std::vector<std::vector<int64_t>> token_rows(const SpmTokenizer& tok, const std::vector<std::string>& texts,
                                             int64_t max_len);

// Where an inverter stage takes its budget and its start. The baselines use stage 2's; the extra-steps control
// (stage2-continued) continues the stage-2 inverter with stage 3's budget and inverter learning rate.
struct InverterBudget {
  std::string section = "stage2";            // steps, batch_size, schedule, warmup_steps, clip_norm, eval_every
  std::string lr_key = "stage2.lr";
  std::string weight_decay_key = "stage2.weight_decay";
  std::string init_dir;                      // an inverter folder to start from; "" = a fresh inverter: seeded
                                             // weights, or inverter.init_from's when set
  std::string pretrained_dir;                // a fresh inverter's T5 from the pretrain stage (stages/recipes/pretrain.h)
  // A fresh inverter's token embeddings from queries of the black box (inverter.token_init; stages/recipes/token_init.h).
  std::shared_ptr<const NoisyEmbedder> token_box;
  int64_t steps = 0;  // > 0: optimizer steps instead of the section's (the noisy inverter: stage2.noisy_steps)
  double lr = 0;      // > 0: instead of lr_key's value (stage2.noisy_lr)
  // A guided inverter (the data's guides set): how many words a guide line holds, the bow stage that makes them at
  // inference, and at most how many word pieces the encoder reads of a line.
  int64_t guide_words = 0;
  std::string guide_bow;
  int64_t guide_pieces = 0;
  bool guide_copy = false;  // the inverter's copy gate (guided.copy)
};

class InverterStage {
 public:
  // tag: "stage2" | "noisy-inverter" | "clean-inverter" | "stage2-continued" (log tag and folder name).
  InverterStage(const Config& cfg, Communicator& comm, const std::string& tag, const std::string& stage_dir,
                InverterTrainData data, std::shared_ptr<SpmTokenizer> tok, bool resume, bool force,
                const InverterBudget& budget = {});
  ~InverterStage();
  // The held-out CE (metrics.jsonl "eval", every stage2.eval_every steps) on the first train.heldout_rows rows of
  // `val`, inputs prepared as the training inputs are (DAE(y), y or clean). Collective, like run().
  void enable_heldout(const Config& cfg, Communicator& comm, InverterTrainData val);
  int run();
  Inverter& inverter() { return inverter_; }
  Trainer& trainer() { return *trainer_; }

 private:
  InverterTrainData data_, val_;
  std::shared_ptr<SpmTokenizer> tok_;
  Inverter inverter_{nullptr};
  int64_t max_len_;
  TokenLoss loss_of(const InverterTrainData& d, const std::vector<int64_t>& rows, const at::Device& device);
  std::unique_ptr<Trainer> trainer_;
};

// Stage 2 proper: DAE(y, σ₀) with the stage-1 DAE (frozen) over the noisy training cache.
InverterTrainData denoised_data(std::shared_ptr<const NoisyDataset> train, const std::string& dae_dir);
InverterTrainData noisy_data(std::shared_ptr<const NoisyDataset> train);
// The linear reference (issue 22 item 3): inputs W(y), the noisy-only Wiener filter of stages/recipes/wiener.h.
InverterTrainData wiener_data(std::shared_ptr<const NoisyDataset> train, const LinearEstimator& filter);

}  // namespace daei
