// The generator of the ZSInvert baseline (issue 23; reference notes §3): the LM that proposes next tokens while the
// black box's cosine ranks them. No pretrained LLM can be downloaded here, so the generator is a small T5 of the
// inverters' shape (inverter.* keys) and tokenizer, trained on the attacker's TRAINING TEXTS ONLY as a denoising
// autoencoder:
//   encoder input  the text's pieces, each dropped with probability r, r ~ U[lm.min_drop, lm.max_drop] per example
//                  (r near 1 leaves an (almost) empty input: the decoder learns an unconditional language model,
//                  which is what ZSInvert's stage A asks of it; a lower r teaches it to paraphrase a given text,
//                  what stage B asks: "write a sentence similar to this: {best}")
//   decoder target the whole text
// It never sees an embedding, so nothing in it is specific to the embedder: that is what "zero-shot" means here.
// The drop decisions are keyed by (run.seed, step, dataset row), so a resumed run and any world size draw the same.
// Final: runs/NAME/lm/final/lm/ (a Hugging Face T5 directory: config.json + model.safetensors, training.json).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "model/attack/inverter.h"
#include "model/net/t5.h"
#include "model/text/tokenizer_spm.h"

namespace daei {

class Communicator;
class Config;
class NoisyEmbedder;
class SplitMix;
class Trainer;

// The encoder input of one example: each piece of `ids` (eos, if last, excluded) dropped when rng.uniform() < rate,
// then eos appended. Rate 1 leaves [eos] alone: the empty text.
std::vector<int64_t> drop_pieces(const std::vector<int64_t>& ids, double rate, SplitMix& rng, int64_t eos_id);

// The key of (seed, step, row): the generator of that example's rate and drops.
uint64_t lm_example_key(uint64_t seed, int64_t step, int64_t row);

struct LmExample {
  double rate = 0;             // r ~ U[min_rate, max_rate): the first draw of the example's stream
  std::vector<int64_t> input;  // drop_pieces(ids, r, ...) with the rest of the stream
};
LmExample lm_corrupt(const std::vector<int64_t>& ids, uint64_t seed, int64_t step, int64_t row, double min_rate,
                     double max_rate, int64_t eos_id);

// One training example of a text-only T5 stage: what the encoder reads and what the decoder must write.
struct TextExample {
  std::vector<int64_t> input, target;
  double kept = 1;  // share of the text's pieces that the input keeps (logged)
};

// What a text-only T5 stage learns (the lm stage, zsinvert's generator; the pretrain stage, stages/recipes/pretrain.h): how a
// training text's token ids become an example, keyed by (step, row) so that a resumed run and any world size draw
// the same examples.
struct TextObjective {
  std::string section = "lm";      // config section of the budget (steps, batch_size, lr, ...), log tag
  std::string final_name = "lm";   // final/<final_name>/: a Hugging Face T5 directory
  int64_t extra_vocab = 0;         // ids past the tokenizer's (span corruption's sentinels)
  std::function<TextExample(const std::vector<int64_t>& ids, int64_t step, int64_t row)> make;
  std::string about_json;          // final/<final_name>/training.json
  std::string summary;             // the start line of the log
  int64_t max_length = 32;         // tokens of a training text (eos included)
  double lr = 0, weight_decay = 0;  // the section's optimizer values
};

// The lm.* keys the lm stage reads itself, read once by from_config (the values: configs/defaults/lm.yaml); steps,
// batch_size, grad_accum, schedule, warmup_steps, clip_norm and eval_every are the Trainer's (trainer_options).
struct LmOptions {
  double lr = 0, weight_decay = 0;
  int64_t max_length = 0;
  double min_drop = 0, max_drop = 0;

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("lr", s.lr), v("weight_decay", s.weight_decay), v("max_length", s.max_length);
    v("min_drop", s.min_drop), v("max_drop", s.max_drop);
  }
  static LmOptions from_config(const Config& cfg);
};

// The lm stage's objective: drop_pieces at a rate r ~ U[lm.min_drop, lm.max_drop] per example, the whole text as
// target.
TextObjective lm_objective(const Config& cfg, int64_t eos_id);

// Teacher-forced loss of the T5 on (encoder ids, labels), as a token sum (the Trainer divides by the global count).
TokenLoss lm_loss(T5ModelImpl& t5, const at::Tensor& input_ids, const at::Tensor& attention_mask,
                  const at::Tensor& labels);

// The generator's T5 shape: the inverters' (inverter_config), started from inverter.t5_dir when that is set;
// extra_vocab ids past the tokenizer's.
T5Config lm_t5_config(const Config& cfg, int64_t vocab_size, int64_t extra_vocab = 0);


// Texts by training row (no embeddings are read).
struct LmTrainData {
  int64_t rows = 0;
  std::function<std::vector<std::string>(const std::vector<int64_t>&)> texts;
  std::function<void(const std::vector<int64_t>&)> prefetch;  // optional read-ahead
};

// A T5 of the inverters' shape trained on training texts only, with the objective `obj` (default: lm_objective).
class LmStage {
 public:
  LmStage(const Config& cfg, Communicator& comm, const std::string& stage_dir, LmTrainData data,
          std::shared_ptr<SpmTokenizer> tok, bool resume, bool force);
  // token_box: the T5's token embeddings start from black-box queries of each piece (inverter.token_init), as a
  // fresh inverter's would; rows past the tokenizer's (sentinels) keep their seeded values.
  LmStage(const Config& cfg, Communicator& comm, const std::string& stage_dir, LmTrainData data,
          std::shared_ptr<SpmTokenizer> tok, bool resume, bool force, TextObjective obj,
          std::shared_ptr<const NoisyEmbedder> token_box = nullptr);
  ~LmStage();
  // The held-out CE on the first train.heldout_rows rows of `val` (drops keyed at step 0: the same inputs at every
  // evaluation), every lm.eval_every steps. Collective, like run().
  void enable_heldout(const Config& cfg, Communicator& comm, LmTrainData val);
  int run();

 private:
  // Encoder ids, mask and labels of rows of `d` at `step`; kept_share: the mean share of pieces kept.
  void batch(const LmTrainData& d, const std::vector<int64_t>& rows, int64_t step, at::Tensor& ids, at::Tensor& mask,
             at::Tensor& labels, double* kept_share) const;

  LmTrainData data_, val_;
  std::shared_ptr<SpmTokenizer> tok_;
  TextObjective obj_;
  T5Model model_{nullptr};
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace daei
