// The one training loop that every stage uses. A stage supplies
//   - the modules to checkpoint (ModuleList: name prefix → module) and the AdamW parameter groups,
//   - `loss(batch)`: forward on the local micro-batch, returning the scalar to differentiate and named terms to log
//     (or calling backward itself, e.g. twice for PCGrad, and setting backward_done),
//   - optionally `grad_hook()`: runs after the gradients are averaged across ranks and before clipping (PCGrad),
//   - optionally `evaluate(step)`: periodic evaluation (called on every rank; may use collectives).
// The loop does the rest: the global batches of shard_plan (N ranks × local batch B/N = 1 rank × B), gradient
// accumulation, the all-reduce (GradReducer), the control word (stop / save / skip a non-finite step, all decided on
// reduced values), schedules, per-group and global clipping, AdamW, metrics.jsonl, rank-0 progress, checkpoints
// (stageK/ckpt-XXXXXXXX/{model.safetensors, optim.pt, state.json, DONE}, temp name + rename, keep last K), resume
// from the newest complete checkpoint (any world size), SIGUSR1/SIGTERM → checkpoint → exit 75, stageK/final/.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "stages/tensor_io.h"

namespace torch::optim {
class AdamW;
}

namespace daei {

class Communicator;
class Config;
class GradReducer;

struct ParamGroupSpec {
  std::string name;
  std::vector<at::Tensor> params;
  double lr = 1e-3;
  double weight_decay = 0.01;
  double clip_norm = 0.0;  // per-group clipping before the global one; 0 = off
};

struct TrainerOptions {
  std::string stage_dir;          // runs/NAME/stageK
  std::string tag = "train";      // log tag, e.g. "stage1"
  int64_t total_steps = 1000;     // optimizer steps
  int64_t global_batch = 256;     // rows per optimizer step over all ranks and micro-steps
  int64_t grad_accum = 1;         // micro-steps per optimizer step
  std::string schedule = "linear";  // constant | linear (both after a linear warmup)
  int64_t warmup_steps = 0;
  double clip_norm = 1.0;         // global clipping; 0 = off
  double beta1 = 0.9, beta2 = 0.999, adam_eps = 1e-8;
  int64_t log_every = 10, ckpt_every = 500, keep_last = 2, eval_every = 0;
  double progress_every_s = 10.0;
  uint64_t seed = 1234;
  bool resume = false;
  int64_t stop_after = 0;         // > 0: checkpoint and stop (exit 75) when this step is reached (tests, time slices)
};
// train.* keys (configs/defaults/train.yaml) layered under the stage's own keys (stageK.*).
TrainerOptions trainer_options(const Config& cfg, const std::string& stage_key, const std::string& stage_dir);

// One local micro-batch.
struct Batch {
  std::vector<int64_t> rows;  // dataset row indices of this rank's micro-batch
  int64_t step = 0;           // optimizer step being computed (0-based)
  int64_t micro = 0;          // micro-step within the optimizer step
  int64_t global_offset = 0;  // position of rows[0] within the step's global batch [0, global_batch)
  int64_t global_batch = 0;
  int64_t accum = 1;          // micro-steps per optimizer step (a self-backward loss divides by it)
};

struct LossOutput {
  at::Tensor loss;                       // local mean loss; the trainer calls (loss / accum).backward()
  std::map<std::string, double> terms;   // logged, averaged over micro-steps and ranks
  bool backward_done = false;            // the closure ran backward itself (scaled by 1/accum)
};

class Trainer {
 public:
  Trainer(Communicator& comm, TrainerOptions opt, int64_t n_rows, ModuleList modules,
          std::vector<ParamGroupSpec> groups);
  ~Trainer();

  std::function<LossOutput(const Batch&)> loss;
  std::function<void()> grad_hook;
  std::function<std::map<std::string, double>(int64_t step)> evaluate;
  // Extra files for every checkpoint and final/ (rank 0, into the temporary folder before DONE), e.g. dae.json.
  std::function<void(const std::string& dir)> save_extra;

  // Trains to total_steps; returns kExitOk, or kExitStopped after a checkpoint when a stop was requested.
  int run();
  int64_t step() const { return step_; }
  torch::optim::AdamW& optimizer();
  Communicator& comm() { return comm_; }
  double lr_factor(int64_t step) const;  // schedule multiplier at a step
  const std::vector<ParamGroupSpec>& groups() const { return groups_; }

  // Checkpoint layout helpers.
  static bool is_complete(const std::string& dir);            // has DONE
  static std::string latest_checkpoint(const std::string& stage_dir);  // "" when none complete
  static std::string final_dir(const std::string& stage_dir) { return stage_dir + "/final"; }

 private:
  void train_step(std::map<std::string, double>& terms_out, double& grad_norm, bool& nonfinite);
  void save_checkpoint(const std::string& name, bool with_optimizer);
  void load_checkpoint(const std::string& dir);
  void prune_checkpoints();
  void log_metrics(const std::map<std::string, double>& terms, double grad_norm, double ex_per_s);
  const std::vector<int64_t>& epoch_plan(int64_t epoch);

  Communicator& comm_;
  TrainerOptions opt_;
  int64_t n_rows_, local_batch_, micro_batch_, steps_per_epoch_;
  ModuleList modules_;
  std::vector<ParamGroupSpec> groups_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optim_;
  std::unique_ptr<GradReducer> reducer_;
  int64_t step_ = 0;
  int64_t plan_epoch_ = -1;
  std::vector<int64_t> plan_;
};

}  // namespace daei
