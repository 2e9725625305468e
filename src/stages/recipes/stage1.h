// Stage 1 (paper §III-A, reference notes §2.1–2.3): the residual DAE h(y, σ) = y + r(y, σ), trained on noisy
// embeddings alone with the SURE loss, on the shared Trainer. Writes runs/NAME/stage1/final/dae/{model.safetensors,
// dae.json} (+ final/state.json, DONE); dae.json holds the DAE's shape and the release noise level σ₀. The DAE's
// folder is saved and loaded by model/attack/dae.h.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/attack/dae.h"
#include "stages/recipes/sure.h"

namespace daei {

class Communicator;
class Config;
class Trainer;

DaeOptions dae_options(const Config& cfg, int64_t dim);

// The stage1.sigma.* keys: how SigmaSchedule is built around the data's σ₀ (evaluation reads `assumed` too).
struct SigmaOptions {
  std::string mode;           // fixed | log_uniform
  double max_factor = 0;      // SigmaSchedule::sigma_max = max_factor · σ₀
  double assumed = 0;         // > 0: the σ₀ SURE assumes instead of the data's
  double decay_fraction = 0;

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("mode", s.mode), v("max_factor", s.max_factor), v("assumed", s.assumed), v("decay_fraction", s.decay_fraction);
  }
};

// The stage1.* keys stage 1 reads itself, read once by from_config (the values: configs/defaults/stage1.yaml); steps,
// batch_size, grad_accum, schedule, warmup_steps, clip_norm and eval_every are the Trainer's (trainer_options).
struct Stage1Options {
  int64_t eval_rows = 0;
  double lr = 0, weight_decay = 0;
  SureOptions sure;    // stage1.sure.*
  SigmaOptions sigma;  // stage1.sigma.*

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("eval_rows", s.eval_rows), v("lr", s.lr), v("weight_decay", s.weight_decay);
  }
  static Stage1Options from_config(const Config& cfg);
};

struct Batch;

// The stage-1 objective on one micro-batch (shared with stage 3): σ drawn from the schedule, extra noise, probes and
// dropout masks keyed by (seed, step) over the global batch and sliced to the micro-batch's rows, so N ranks on B/N
// compute what 1 rank on B computes.
struct SureStep {
  at::Tensor loss;  // mean over the micro-batch's rows
  double sigma = 0;
  std::map<std::string, double> terms;  // loss, sure_sq, sure_div, sigma, mse_reduction_est
};
SureStep sure_step(Dae& dae, const NoisyDataset& data, const Batch& b, uint64_t seed, const SigmaSchedule& sched,
                   const SureOptions& sure);
// Dropout masks of the DAE's blocks for a micro-batch, keyed by (seed, step, tag + block).
std::vector<at::Tensor> dae_dropout_masks(Dae& dae, const Batch& b, uint64_t seed, uint64_t tag);

class Stage1 {
 public:
  // val may be null (no periodic evaluation). force: a fresh run over an earlier run's checkpoints archives them.
  Stage1(const Config& cfg, Communicator& comm, const std::string& stage_dir, std::shared_ptr<const NoisyDataset> train,
         std::shared_ptr<const NoisyDataset> val, bool resume, bool force = false);
  ~Stage1();
  int run();  // kExitOk or kExitStopped
  Dae& dae() { return dae_; }
  Trainer& trainer() { return *trainer_; }
  // The SURE estimate of E‖h(y) − x‖² on (up to eval_rows of) a noisy set, at σ₀, in eval mode; collective.
  // Probes are keyed by the row index, so the estimate does not depend on the world size.
  std::map<std::string, double> evaluate(const NoisyDataset& data);

 private:
  Communicator& comm_;
  std::string stage_dir_;
  std::shared_ptr<const NoisyDataset> train_, val_;
  Dae dae_{nullptr};
  SureOptions sure_;
  SigmaSchedule sched_;
  uint64_t seed_;
  int64_t eval_rows_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace daei
