// The one training loop that every stage uses. A stage supplies
//   - the modules to checkpoint (ModuleList: name prefix → module) and the AdamW parameter groups,
//   - `loss(batch)`: forward on the local micro-batch. It returns one loss per gradient set (declared with
//     `grad_sets`; one set "loss" by default), each a local mean (count < 0) or a local SUM over `count` units
//     (tokens): the Trainer divides a sum by the count of the global batch, so cross-entropy over texts of
//     different lengths keeps "N ranks on B/N = 1 rank on B";
//   - with several gradient sets, `combine(sets)`: runs on the averaged global gradients of every set and writes
//     the parameters' .grad (stage 3: PCGrad of g_SURE and g_CE on the DAE); it returns terms to log;
//   - `terms`: the names of the logged terms, declared up front so every rank reduces the same vector even when
//     a term is produced by some ranks only;
//   - optionally `evaluate(step)`: periodic evaluation (called on every rank; may use collectives);
//   - optionally `save_final(dir)`: one folder a module in final/ (final/dae/, final/inverter/ …).
// The loop does the rest: the global batches of shard_plan, gradient accumulation, the all-reduce (GradReducer,
// per gradient set), the control word (stop / save / skip a non-finite step, all decided on reduced values),
// schedules, per-group and global clipping, AdamW, metrics.jsonl (MetricsLog) and curves.png, rank-0 progress,
// checkpoints (CheckpointStore: stageK/ckpt-XXXXXXXX/{model.safetensors, optim.pt, state.json, DONE}, temp name +
// rename, SHA-256 of every file in DONE, keep the last K that verify, a damaged one removed), resume from the newest
// checkpoint that verifies (any world size), an exclusive lock on the stage folder (StageFolder), stageK/final/, and
// SIGUSR1/SIGTERM to a rank → checkpoint → that rank exits 75. Under mpirun the job's exit code is mpirun's: USR1 to
// mpirun is forwarded and gives 75; TERM to mpirun makes Open MPI abort the job with its own non-zero status, never
// 75 (launch/mpirun.sh turns TERM into USR1; README "Stopping and requeueing").
// AdamW is FusedAdamW (libtorch's results and state, one pass a parameter) unless train.fused_adamw is false.
// Randomness: before each micro-step the default generator is re-seeded from (seed, step, rank, micro-step), so
// dropout never depends on history and resume is exact on any number of ranks.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "stages/loop/checkpoint_store.h"

namespace torch::optim {
class AdamW;
}

namespace daei {

class Communicator;
class Config;
class GradReducer;
class MetricsLog;
class StageFolder;

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
  bool force = false;             // a fresh run over an earlier run's checkpoints archives them instead of refusing
  int64_t stop_after = 0;         // > 0: checkpoint and stop (exit 75) when this step is reached (tests, time slices)
  int64_t bucket_bytes = 25 << 20;  // dist.bucket_mb
  bool fused_adamw = true;        // FusedAdamW (one pass a parameter, libtorch's results) instead of libtorch's AdamW
  bool plot = true;               // curves.png at the end (gnuplot)

  // The config keys, listed once (read through core/fields.h), a line a topic: the stage's own section (stageK.*) …
  template <class Self, class Visit>
  static void stage_fields(Self& s, Visit&& v) {
    v("steps", s.total_steps), v("batch_size", s.global_batch), v("grad_accum", s.grad_accum);
    v("schedule", s.schedule), v("warmup_steps", s.warmup_steps), v("clip_norm", s.clip_norm);
    v("eval_every", s.eval_every);
  }
  // … and train.* (run.seed and dist.bucket_mb are read beside them).
  template <class Self, class Visit>
  static void train_fields(Self& s, Visit&& v) {
    v("adam_beta1", s.beta1), v("adam_beta2", s.beta2), v("adam_eps", s.adam_eps);
    v("log_every", s.log_every), v("progress_every_s", s.progress_every_s), v("plot", s.plot);
    v("ckpt_every", s.ckpt_every), v("keep_last", s.keep_last), v("stop_after", s.stop_after);
    v("fused_adamw", s.fused_adamw);
  }
};
// train.* keys (configs/defaults/train.yaml) layered under the stage's own keys (stageK.*).
// The seed of the attack's trained models (stage 1, the inverters, stage 3, the correctors; their initial weights,
// data order and noise streams): train.seed, or run.seed where train.seed is -1. The corpus, caches, tokenizer,
// pretrain, lm, the embedder and eval's bootstrap keep run.seed, so several training seeds share that work.
uint64_t attack_seed(const Config& cfg);

TrainerOptions trainer_options(const Config& cfg, const std::string& stage_key, const std::string& stage_dir);

// The device of this rank: train.device (auto | cpu | cuda); auto = cuda:local_rank % count when libtorch has CUDA.
at::Device train_device(const Config& cfg, int local_rank);

// One local micro-batch.
struct Batch {
  std::vector<int64_t> rows;  // dataset row indices of this rank's micro-batch
  int64_t step = 0;           // optimizer step being computed (0-based)
  int64_t micro = 0;          // micro-step within the optimizer step
  int64_t global_offset = 0;  // position of rows[0] within the step's global batch [0, global_batch)
  int64_t global_batch = 0;
  int64_t accum = 1;          // micro-steps per optimizer step
};

struct SetLoss {
  at::Tensor value;    // scalar to differentiate
  double count = -1;   // < 0: a local mean over the micro-batch's rows; ≥ 0: a sum over `count` units (0 is an
                       // empty micro-batch of a summed loss, not a mean)
};

struct LossOutput {
  at::Tensor loss;                       // gradient set 0
  double count = -1;                     // as SetLoss::count
  std::vector<SetLoss> more;             // gradient sets 1.. in the declared order
  std::map<std::string, double> terms;   // logged, averaged over micro-steps and the ranks that produced them
};
// A loss summed over `count` tokens (the Trainer divides by the global batch's count), logged as "loss" (its mean
// a token) and "tokens", beside the stage's other terms.
LossOutput token_sum_loss(const at::Tensor& sum, int64_t count, std::map<std::string, double> more_terms = {});

// Global gradients of every set, aligned with Trainer::params() (undefined: no gradient anywhere).
using GradSets = std::vector<std::vector<at::Tensor>>;

class Trainer {
 public:
  Trainer(Communicator& comm, TrainerOptions opt, int64_t n_rows, ModuleList modules,
          std::vector<ParamGroupSpec> groups, std::vector<std::string> grad_sets = {"loss"});
  ~Trainer();

  std::function<LossOutput(const Batch&)> loss;
  std::vector<std::string> terms;  // logged term names (declared up front; an undeclared term is an error)
  std::function<std::map<std::string, double>(GradSets&)> combine;
  std::function<std::map<std::string, double>(int64_t step)> evaluate;
  // A hint, before each step's forward: the rows this rank reads at the next step (the data source may load them
  // in the background while this step computes). Results never depend on it.
  std::function<void(const std::vector<int64_t>& rows)> prefetch;
  // Extra files for every checkpoint (rank 0, into the temporary folder before DONE), e.g. dae.json.
  std::function<void(const std::string& dir)> save_extra;
  // final/: one folder a module (rank 0, into the temporary folder). Without it final/ is a checkpoint's model.
  std::function<void(const std::string& dir)> save_final;

  // Trains to total_steps; returns kExitOk, or kExitStopped after a checkpoint when a stop was requested.
  int run();
  int64_t step() const { return step_; }
  torch::optim::AdamW& optimizer();
  Communicator& comm() { return comm_; }
  double lr_factor(int64_t step) const;  // schedule multiplier at a step
  const std::vector<ParamGroupSpec>& groups() const { return groups_; }
  const std::vector<at::Tensor>& params() const { return params_; }
  const TrainerOptions& options() const { return opt_; }
  // The learning rates the optimizer used at the last step, by group (for tests of the schedule).
  std::vector<double> current_lrs() const;
  // Host wall seconds spent in each part of the steps run so far: "forward" (the loss closure, data included),
  // "backward SET", "reduce SET" (the all-reduce of a gradient set, with the token counts' in "reduce counts"),
  // "combine", "optimizer" (agreement, clipping, AdamW). With a CUDA device only what the host waited for counts.
  const std::map<std::string, double>& phase_seconds() const { return phase_s_; }

  // Checkpoint layout helpers (CheckpointStore and StageFolder own the rules).
  static bool is_complete(const std::string& dir);            // has DONE
  // DONE present and every file it lists has its recorded SHA-256; "" when good, else what is wrong.
  static std::string verify(const std::string& dir);
  static std::string latest_checkpoint(const std::string& stage_dir);  // newest that verifies; "" when none
  // A fresh run (not resume) over an earlier run's checkpoints or final: without force an Error saying so; with
  // force the entries to archive (sorted). Only reads, so a command can check before it writes anything.
  static std::vector<std::string> check_earlier_run(const std::string& stage_dir, bool resume, bool force);

 private:
  void train_step(std::map<std::string, std::pair<double, double>>& acc, double& grad_norm, bool& nonfinite);
  // train_step's parts: a micro-step's forward and the backward of each gradient set (moved into sets when there
  // are several); then each set's all-reduce, normalised by the global token counts, and their combination.
  void micro_step(int64_t m, const std::vector<int64_t>& rows, GradSets& sets, std::vector<double>& counts,
                  std::vector<int>& summed, std::map<std::string, std::pair<double, double>>& acc);
  void reduce_grads(GradSets& sets, const std::vector<double>& counts, const std::vector<int>& summed,
                    std::map<std::string, std::pair<double, double>>& acc);
  void save_checkpoint(const std::string& name, bool with_optimizer);
  void load_checkpoint(const std::string& dir);
  void prepare_stage_dir();
  // Scheduled learning rates, then (unless skip: a non-finite step) per-group and global clipping and AdamW.
  void update(bool skip);
  // The mean of each logged term over ranks, micro-steps and steps since the last log line (collective).
  std::map<std::string, double> reduce_terms(const std::map<std::string, std::pair<double, double>>& acc);
  void log_step(const std::map<std::string, double>& logged, double grad_norm, double examples_per_s);  // rank 0
  void log_where_time_and_memory_went();  // phase shares (rank 0) and every rank's peak RSS (collective)
  std::vector<int64_t> local_rows(int64_t step) const;  // this rank's rows of a global step (all micro-steps)

  Communicator& comm_;
  TrainerOptions opt_;
  int64_t n_rows_, local_batch_, micro_batch_, steps_per_epoch_;
  ModuleList modules_;
  std::vector<ParamGroupSpec> groups_;
  std::vector<std::string> grad_sets_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optim_;
  std::unique_ptr<GradReducer> reducer_;
  int64_t step_ = 0;
  std::map<std::string, double> phase_s_;
  CheckpointStore store_;               // rank 0 writes, seals and prunes; every rank loads
  std::unique_ptr<StageFolder> folder_;  // rank 0: the stage folder, locked for the run
  std::unique_ptr<MetricsLog> metrics_;  // written by rank 0
};

}  // namespace daei
