// Stage 3 (paper §III-C, eqs. 18–19; reference notes §2.4): the DAE and the inverter fine-tuned together on
//   L = SURE(y) + λ(t)·CE(inverter(DAE(y)), text),   λ rising linearly from 0 to 1 over lambda_warmup_steps.
// Two gradient sets on the shared Trainer: g_SURE (DAE) and g_CE (DAE and inverter; the CE gradient flows through
// the DAE). Both are averaged across ranks and micro-steps first; then PCGrad projects g_CE on the DAE's
// parameters (per tensor, or the whole DAE as one vector) and the DAE's gradient is g_SURE + g_CE, the inverter's
// g_CE. One AdamW, two groups: inverter lr 1e-3, DAE lr 2e-4 (clipped to 0.5), all gradients clipped to 1.0.
// Starts from stage1/final/dae and stage2/final/inverter; writes stage3/final/{dae,inverter}/: the last step's
// models, or with `stage3.select_by: heldout_bleu` (DAEI's selection, notes §2.4) those of best held-out BLEU.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "model/attack/dae.h"
#include "model/attack/inverter.h"
#include "model/net/generate.h"
#include "model/text/tokenizer_spm.h"
#include "stages/recipes/sure.h"

namespace daei {

class BestKeeper;
class Communicator;
class Config;
class Trainer;

// A recovery's score against its text (eval's vec2text BLEU; the stages do not link the metrics).
using PairScore = std::function<double(const std::string& hypothesis, const std::string& reference)>;

// The stage3.* keys the joint stage reads itself, read once by from_config (the values: configs/defaults/stage3.yaml);
// steps, batch_size, grad_accum, schedule, warmup_steps, clip_norm and eval_every are the Trainer's
// (trainer_options), select_by and control the command line's.
struct Stage3Options {
  double lr_inverter = 0, lr_dae = 0, weight_decay = 0, dae_clip_norm = 0;
  double lambda_max = 0;
  int64_t lambda_warmup_steps = 0;
  std::string pcgrad;  // per_tensor | whole | off (from_config refuses another)

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("lr_inverter", s.lr_inverter), v("lr_dae", s.lr_dae), v("weight_decay", s.weight_decay);
    v("dae_clip_norm", s.dae_clip_norm), v("lambda_max", s.lambda_max), v("lambda_warmup_steps", s.lambda_warmup_steps);
    v("pcgrad", s.pcgrad);
  }
  static Stage3Options from_config(const Config& cfg);
};

class Stage3 {
 public:
  Stage3(const Config& cfg, Communicator& comm, const std::string& stage_dir, std::shared_ptr<const NoisyDataset> train,
         std::shared_ptr<SpmTokenizer> tok, const std::string& dae_dir, const std::string& inverter_dir, bool resume,
         bool force);
  ~Stage3();
  // The held-out CE of inverter(DAE(y, σ₀)) on the first train.heldout_rows rows of `val` (every stage3.eval_every
  // steps, DAE and inverter in eval mode). Collective, like run().
  void enable_heldout(const Config& cfg, Communicator& comm, std::shared_ptr<const NoisyDataset> val);
  // Before enable_heldout: each evaluation also decodes the held-out rows with eval.*'s decoding (eval_decoding, as
  // the evaluation's inverter rows), scores each recovery with `score` (logged as heldout_bleu), keeps the best
  // models in stage3/best/ and makes them the final ones.
  void select_by(PairScore score);
  int run();
  Dae& dae() { return dae_; }
  Inverter& inverter() { return inverter_; }
  Trainer& trainer() { return *trainer_; }

 private:
  std::shared_ptr<const NoisyDataset> train_, val_;
  std::shared_ptr<SpmTokenizer> tok_;
  Dae dae_{nullptr};
  Inverter inverter_{nullptr};
  SureOptions sure_;
  SigmaSchedule sched_;
  uint64_t seed_;
  int64_t max_len_, lambda_warmup_;
  double lambda_max_;
  bool whole_;
  std::unique_ptr<Trainer> trainer_;
  PairScore select_;
  GenerateOptions select_decoding_;
  std::unique_ptr<BestKeeper> best_;
  std::string stage_dir_;
};

}  // namespace daei
