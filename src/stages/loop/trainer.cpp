// The training loop (trainer.h): options from the config, the steps with their gradient sets, the control word,
// clipping and AdamW, and when to log, evaluate and checkpoint. The checkpoint files are CheckpointStore's, the
// stage folder's lock and metrics.jsonl StageFolder's and MetricsLog's.
#include "stages/loop/trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <sys/resource.h>
#include <cmath>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/rng.h"
#include "core/signals.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "dist/control.h"
#include "dist/grad_reducer.h"
#include "dist/shard_plan.h"
#include "stages/loop/curves.h"
#include "stages/loop/fused_adamw.h"
#include "stages/loop/stage_folder.h"

namespace daei {

namespace {

// Σ‖t‖² over defined tensors with one host synchronisation.
double sq_norm(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> parts;
  for (const auto& t : ts)
    if (t.defined()) parts.push_back(t.detach().to(torch::kFloat64).pow(2).sum());
  if (parts.empty()) return 0.0;
  return torch::stack(parts).sum().item<double>();
}
std::vector<at::Tensor> grads_of(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> g;
  for (const auto& p : params) g.push_back(p.grad());
  return g;
}
void scale_grads(const std::vector<at::Tensor>& params, double f) {
  torch::NoGradGuard g;
  for (const auto& p : params)
    if (p.grad().defined()) p.grad().mul_(f);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Adds each value to its term's (sum, count) in acc; `what` names where an undeclared term came from.
void add_declared_terms(std::map<std::string, std::pair<double, double>>& acc,
                        const std::map<std::string, double>& values, const std::vector<std::string>& declared,
                        const std::string& tag, const char* what) {
  for (const auto& [k, v] : values) {
    DAEI_CHECK(std::find(declared.begin(), declared.end(), k) != declared.end(),
               "[{}] {} term '{}' is not declared in Trainer::terms", tag, what, k);
    acc[k].first += v;
    acc[k].second += 1;
  }
}

}  // namespace

uint64_t attack_seed(const Config& cfg) {
  const int64_t s = cfg.integer("train.seed");
  return static_cast<uint64_t>(s >= 0 ? s : cfg.integer("run.seed"));
}

TrainerOptions trainer_options(const Config& cfg, const std::string& sk, const std::string& stage_dir) {
  TrainerOptions o;
  o.stage_dir = stage_dir;
  o.tag = sk;
  TrainerOptions::stage_fields(o, config_reader(cfg, sk));
  TrainerOptions::train_fields(o, config_reader(cfg, "train"));
  const bool shared_work = sk == "lm" || sk == "pretrain" || sk == "embedder_train";
  o.seed = shared_work ? static_cast<uint64_t>(cfg.integer("run.seed")) : attack_seed(cfg);
  o.bucket_bytes = cfg.integer("dist.bucket_mb") << 20;
  return o;
}

LossOutput token_sum_loss(const at::Tensor& sum, int64_t count, std::map<std::string, double> more_terms) {
  LossOutput out;
  out.loss = sum;
  out.count = static_cast<double>(count);
  out.terms = std::move(more_terms);
  out.terms["loss"] = sum.item<double>() / std::max<int64_t>(1, count);
  out.terms["tokens"] = static_cast<double>(count);
  return out;
}

at::Device train_device(const Config& cfg, int local_rank) {
  const std::string d = cfg.str("train.device");
  DAEI_CHECK(d == "auto" || d == "cpu" || d == "cuda", "train.device must be auto, cpu or cuda, got '{}'", d);
  const bool cuda = torch::cuda::is_available();
  DAEI_CHECK(d != "cuda" || cuda, "train.device is cuda but this libtorch has no usable CUDA device");
  if (d == "cpu" || !cuda) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % torch::cuda::device_count()));
}

Trainer::Trainer(Communicator& comm, TrainerOptions opt, int64_t n_rows, ModuleList modules,
                 std::vector<ParamGroupSpec> groups, std::vector<std::string> grad_sets)
    : comm_(comm),
      opt_(std::move(opt)),
      n_rows_(n_rows),
      modules_(std::move(modules)),
      groups_(std::move(groups)),
      grad_sets_(std::move(grad_sets)),
      store_(opt_.stage_dir, opt_.tag, opt_.keep_last),
      metrics_(std::make_unique<MetricsLog>(opt_.stage_dir)) {
  const int64_t W = comm_.size();
  DAEI_CHECK(!grad_sets_.empty(), "[{}] no gradient set declared", opt_.tag);
  DAEI_CHECK(opt_.total_steps >= 1, "[{}] {}.steps must be ≥ 1, got {}", opt_.tag, opt_.tag, opt_.total_steps);
  DAEI_CHECK(opt_.global_batch >= 1 && opt_.grad_accum >= 1 && opt_.global_batch % (W * opt_.grad_accum) == 0,
             "[{}] batch size {} must be a positive multiple of world size {} × grad_accum {}; change {}.batch_size or "
             "the number of ranks",
             opt_.tag, opt_.global_batch, W, opt_.grad_accum, opt_.tag);
  DAEI_CHECK(opt_.log_every >= 1, "train.log_every must be ≥ 1, got {}", opt_.log_every);
  local_batch_ = opt_.global_batch / W;
  micro_batch_ = local_batch_ / opt_.grad_accum;
  steps_per_epoch_ = steps_per_epoch(n_rows_, 1, opt_.global_batch, /*drop_last=*/true);
  DAEI_CHECK(steps_per_epoch_ >= 1, "[{}] {} training rows are fewer than one batch of {}", opt_.tag, n_rows_,
             opt_.global_batch);
  DAEI_CHECK(opt_.schedule == "linear" || opt_.schedule == "constant",
             "{}.schedule must be linear or constant, got '{}'", opt_.tag, opt_.schedule);
  std::vector<torch::optim::OptimizerParamGroup> pg;
  for (const auto& g : groups_) {
    DAEI_CHECK(g.lr > 0, "[{}] learning rate of group {} must be > 0, got {}", opt_.tag, g.name, g.lr);
    auto o = std::make_unique<torch::optim::AdamWOptions>(g.lr);
    o->betas({opt_.beta1, opt_.beta2}).eps(opt_.adam_eps).weight_decay(g.weight_decay);
    pg.emplace_back(g.params, std::move(o));
    params_.insert(params_.end(), g.params.begin(), g.params.end());
  }
  // The fused step has libtorch's arithmetic and state (fused_adamw.h): the switch changes speed, not results.
  if (opt_.fused_adamw)
    optim_ = std::make_unique<FusedAdamW>(pg, torch::optim::AdamWOptions(1e-3));
  else
    optim_ = std::make_unique<torch::optim::AdamW>(pg, torch::optim::AdamWOptions(1e-3));
  reducer_ = std::make_unique<GradReducer>(comm_, params_, opt_.bucket_bytes);
  // Same starting point everywhere: parameters and buffers (spectral-norm vectors) from rank 0.
  reducer_->broadcast_parameters();
  if (comm_.size() > 1) {
    torch::NoGradGuard ng;
    for (auto& [name, t] : module_state(modules_)) comm_.broadcast(t, 0);
  }
}

Trainer::~Trainer() = default;
torch::optim::AdamW& Trainer::optimizer() { return *optim_; }

double Trainer::lr_factor(int64_t step) const {
  const double s = static_cast<double>(step + 1);
  if (opt_.warmup_steps > 0 && step < opt_.warmup_steps) return s / opt_.warmup_steps;
  if (opt_.schedule == "constant") return 1.0;
  const double rest = std::max<int64_t>(1, opt_.total_steps - opt_.warmup_steps);
  return std::max(0.0, 1.0 - static_cast<double>(step - opt_.warmup_steps) / rest);
}

std::vector<double> Trainer::current_lrs() const {
  std::vector<double> out;
  for (auto& g : optim_->param_groups()) out.push_back(static_cast<const torch::optim::AdamWOptions&>(g.options()).lr());
  return out;
}

std::vector<int64_t> Trainer::local_rows(int64_t step) const {
  // The epoch order is evaluated per step (EpochOrder): memory O(local batch) whatever the number of rows.
  const EpochOrder order(n_rows_, opt_.seed, step / steps_per_epoch_);
  return step_rows(order, comm_.size(), comm_.rank(), step % steps_per_epoch_, local_batch_);
}

void Trainer::train_step(std::map<std::string, std::pair<double, double>>& acc, double& grad_norm,
                         bool& nonfinite) {
  const size_t S = grad_sets_.size();
  // "No gradient" stays distinguishable from zeros. One gradient set at N ranks: backward writes into the reducer's
  // buckets (no copy before the all-reduce); several sets are moved out after each backward, so they start empty.
  // With one set the loss is scaled by 1/world before backward, so the all-reduce's sum is the mean (no pass of
  // its own over the gradients).
  if (S == 1) reducer_->prepare_grads(/*prescaled=*/true);
  else for (auto& p : params_) p.mutable_grad() = at::Tensor();
  GradSets sets(S > 1 ? S : 0, std::vector<at::Tensor>(params_.size()));
  std::vector<double> counts(S, 0.0);
  std::vector<int> summed(S, -1);  // -1 unknown, 0 mean, 1 sum
  const auto rows = local_rows(step_);
  if (prefetch && step_ + 1 < opt_.total_steps) prefetch(local_rows(step_ + 1));  // all its micro-steps
  for (int64_t m = 0; m < opt_.grad_accum; ++m) micro_step(m, rows, sets, counts, summed, acc);
  reduce_grads(sets, counts, summed, acc);
  grad_norm = std::sqrt(sq_norm(grads_of(params_)));
  nonfinite = !std::isfinite(grad_norm);
}

void Trainer::micro_step(int64_t m, const std::vector<int64_t>& rows, GradSets& sets, std::vector<double>& counts,
                         std::vector<int>& summed, std::map<std::string, std::pair<double, double>>& acc) {
  using clock = std::chrono::steady_clock;
  const size_t S = grad_sets_.size(), P = params_.size();
  Batch b;
  const auto first = rows.begin() + m * micro_batch_;
  b.rows.assign(first, first + micro_batch_);
  b.step = step_;
  b.micro = m;
  b.global_offset = comm_.rank() * local_batch_ + m * micro_batch_;
  b.global_batch = opt_.global_batch;
  b.accum = opt_.grad_accum;
  torch::manual_seed(splitmix64(opt_.seed ^ splitmix64(static_cast<uint64_t>(step_) * 0x10001ULL + m) ^
                                (static_cast<uint64_t>(comm_.rank()) + 1) * 0x9E3779B97F4A7C15ULL));
  LossOutput out;
  auto t0 = clock::now();
  out = loss(b);  // bf16 products under train.precision bf16: model/net/precision.h, set at start
  phase_s_["forward"] += seconds_since(t0);
  std::vector<SetLoss> losses{{out.loss, out.count}};
  losses.insert(losses.end(), out.more.begin(), out.more.end());
  DAEI_CHECK(losses.size() == S, "[{}] the loss returned {} gradient sets, {} are declared", opt_.tag, losses.size(),
             S);
  for (size_t i = 0; i < S; ++i) {
    const int kind = losses[i].count >= 0 ? 1 : 0;
    DAEI_CHECK(summed[i] < 0 || summed[i] == kind, "[{}] gradient set {} mixes mean and summed losses", opt_.tag,
               grad_sets_[i]);
    summed[i] = kind;
    if (kind) counts[i] += losses[i].count;
    auto v = kind ? losses[i].value : losses[i].value / static_cast<double>(opt_.grad_accum);
    if (S == 1 && comm_.size() > 1) v = v * reducer_->loss_scale();
    t0 = clock::now();
    if (v.requires_grad()) v.backward({}, /*retain_graph=*/i + 1 < S);
    phase_s_["backward " + grad_sets_[i]] += seconds_since(t0);
    if (S > 1) {
      torch::NoGradGuard ng;
      for (size_t p = 0; p < P; ++p) {
        auto g = params_[p].grad();
        if (!g.defined()) continue;
        if (sets[i][p].defined()) sets[i][p].add_(g); else sets[i][p] = g.clone();
        params_[p].mutable_grad() = at::Tensor();
      }
    }
  }
  add_declared_terms(acc, out.terms, terms, opt_.tag, "logged");
}

void Trainer::reduce_grads(GradSets& sets, const std::vector<double>& counts, const std::vector<int>& summed,
                           std::map<std::string, std::pair<double, double>>& acc) {
  using clock = std::chrono::steady_clock;
  const size_t S = grad_sets_.size(), P = params_.size();
  // Token counts of the global batch, one small all-reduce for all sets.
  auto t0 = clock::now();
  auto c = torch::tensor(counts, torch::kFloat64);
  if (comm_.size() > 1) comm_.allreduce(c, ReduceOp::Sum);
  phase_s_["reduce counts"] += seconds_since(t0);
  const double W = comm_.size();
  auto normalise = [&](std::vector<at::Tensor>& g, size_t i) {
    if (summed[i] != 1) return;
    const double total = c[static_cast<int64_t>(i)].item<double>();
    torch::NoGradGuard ng;
    for (auto& t : g)
      if (t.defined()) t.mul_(total > 0 ? W / total : 0.0);  // reduced = Σ/W; want Σ/total
  };
  if (S == 1) {
    t0 = clock::now();
    reducer_->reduce();
    auto g = grads_of(params_);
    normalise(g, 0);
    phase_s_["reduce " + grad_sets_[0]] += seconds_since(t0);
    return;
  }
  for (size_t i = 0; i < S; ++i) {
    t0 = clock::now();
    reducer_->reduce(sets[i]);
    normalise(sets[i], i);
    phase_s_["reduce " + grad_sets_[i]] += seconds_since(t0);
  }
  t0 = clock::now();
  if (combine) {
    add_declared_terms(acc, combine(sets), terms, opt_.tag, "combine");  // the same global values on every rank
  } else {
    torch::NoGradGuard ng;
    for (size_t p = 0; p < P; ++p)
      for (size_t i = 0; i < S; ++i) {
        if (!sets[i][p].defined()) continue;
        if (params_[p].grad().defined()) params_[p].mutable_grad().add_(sets[i][p]);
        else params_[p].mutable_grad() = sets[i][p];
      }
  }
  phase_s_["combine"] += seconds_since(t0);
}


void Trainer::prepare_stage_dir() {
  // Rank 0 locks the folder, removes temporaries of dead processes and refuses to mix runs; the verdict is
  // broadcast so every rank fails (or goes on) together.
  std::string verdict;
  if (comm_.is_root()) {
    try {
      folder_ = std::make_unique<StageFolder>(opt_.stage_dir, opt_.tag);  // shared with a command that locked it first
      folder_->prepare_run(opt_.resume, opt_.force);
    } catch (const std::exception& e) {
      verdict = e.what();
      if (verdict.empty()) verdict = "error";
    }
  }
  verdict = comm_.broadcast(verdict, 0);
  if (!verdict.empty()) throw Error(verdict);
}

int Trainer::run() {
  DAEI_CHECK(static_cast<bool>(loss), "[{}] trainer has no loss closure", opt_.tag);
  prepare_stage_dir();
  if (opt_.resume) {
    const std::string ck = latest_checkpoint(opt_.stage_dir);
    if (!ck.empty())
      load_checkpoint(ck);
    else
      LOG_INFO("[{}] --resume: no complete checkpoint in {}, starting at step 0", opt_.tag, opt_.stage_dir);
  }
  if (comm_.is_root()) metrics_->keep_until(step_);  // drop lines from beyond the step we (re)start at
  signals::install_stop_handlers();
  Progress progress(opt_.tag, opt_.total_steps, "step", opt_.progress_every_s, step_);
  std::map<std::string, std::pair<double, double>> acc_terms;
  double acc_norm = 0;
  int64_t acc_n = 0;
  auto t_log = std::chrono::steady_clock::now();
  while (step_ < opt_.total_steps) {
    double gn = 0;
    bool nonfinite = false;
    train_step(acc_terms, gn, nonfinite);
    const auto t_opt = std::chrono::steady_clock::now();
    ControlWord local;
    local.stop = signals::stop_requested() || (opt_.stop_after > 0 && step_ + 1 == opt_.stop_after);
    local.save = opt_.ckpt_every > 0 && (step_ + 1) % opt_.ckpt_every == 0;
    local.nonfinite = nonfinite;
    local.end_of_data = step_ + 1 >= opt_.total_steps;
    const ControlWord cw = agree(comm_, local);
    update(cw.nonfinite);
    phase_s_["optimizer"] += seconds_since(t_opt);
    ++step_;
    acc_norm += gn;
    ++acc_n;
    if (step_ % opt_.log_every == 0 || cw.end_of_data) {
      const auto logged = reduce_terms(acc_terms);
      auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - t_log).count();
      if (comm_.is_root()) log_step(logged, acc_norm / acc_n, dt > 0 ? acc_n * opt_.global_batch / dt : 0.0);
      progress.update(step_, logged.count("loss") ? fmt::format("loss {:.5g}", logged.at("loss")) : "");
      acc_terms.clear();
      acc_norm = 0;
      acc_n = 0;
      t_log = now;
    }
    if (evaluate && opt_.eval_every > 0 && (step_ % opt_.eval_every == 0 || cw.end_of_data)) {
      auto ev = evaluate(step_);
      if (comm_.is_root()) {
        metrics_->log_eval(step_, ev);
        std::string s;
        for (auto& [k, v] : ev) s += fmt::format(" {} {:.5g}", k, v);
        LOG_INFO("[{}] eval at step {}:{}", opt_.tag, step_, s);
      }
    }
    if (cw.save || cw.stop || cw.end_of_data) save_checkpoint(CheckpointStore::checkpoint_name(step_), true);
    if (cw.stop && !cw.end_of_data) {
      LOG_INFO("[{}] stop requested: checkpoint at step {} written; run again with --resume to continue", opt_.tag,
               step_);
      return kExitStopped;
    }
  }
  save_checkpoint("final", false);
  if (comm_.is_root() && opt_.plot) plot_curves(opt_.stage_dir);
  log_where_time_and_memory_went();
  LOG_INFO("[{}] done: {} steps, final model in {}", opt_.tag, step_, stage_final_dir(opt_.stage_dir));
  return kExitOk;
}

void Trainer::update(bool skip) {
  const double f = lr_factor(step_);
  for (size_t i = 0; i < groups_.size(); ++i)
    static_cast<torch::optim::AdamWOptions&>(optim_->param_groups()[i].options()).lr(groups_[i].lr * f);
  if (skip) {
    LOG_WARN("[{}] step {}: non-finite gradient norm, update skipped", opt_.tag, step_ + 1);
    return;
  }
  for (const auto& g : groups_)
    if (g.clip_norm > 0) {
      const double n = std::sqrt(sq_norm(grads_of(g.params)));
      if (n > g.clip_norm) scale_grads(g.params, g.clip_norm / (n + 1e-6));
    }
  if (opt_.clip_norm > 0) {
    const double n = std::sqrt(sq_norm(grads_of(params_)));
    if (n > opt_.clip_norm) scale_grads(params_, opt_.clip_norm / (n + 1e-6));
  }
  optim_->step();
}

void Trainer::log_step(const std::map<std::string, double>& logged, double grad_norm, double examples_per_s) {
  const auto lrs = current_lrs();
  std::vector<std::pair<std::string, double>> lr;
  for (size_t i = 0; i < groups_.size(); ++i) lr.emplace_back(groups_[i].name, lrs[i]);
  metrics_->log_step(step_, logged, grad_norm, examples_per_s, lr);
}

void Trainer::log_where_time_and_memory_went() {
  double total = 0;
  for (const auto& [k, v] : phase_s_) total += v;
  if (total > 0) {
    std::string parts;
    for (const auto& [k, v] : phase_s_) parts += fmt::format("{}{} {:.0f} %", parts.empty() ? "" : ", ", k, 100 * v / total);
    LOG_INFO("[{}] where the step time went (rank 0): {}", opt_.tag, parts);
  }
  // Peak memory of every rank (whole process so far: the figure a scheduler's memory limit is checked against).
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const auto rss = comm_.allgather(fmt::format("{:.0f}", static_cast<double>(ru.ru_maxrss) / 1024.0));
  LOG_INFO("[{}] peak RSS per rank (MB): {}", opt_.tag, fmt::join(rss, ", "));
}


std::map<std::string, double> Trainer::reduce_terms(const std::map<std::string, std::pair<double, double>>& acc) {
  // Each declared term: (sum, number of productions) over ranks, micro-steps and logged steps.
  std::vector<double> vals;
  for (const auto& k : terms) {
    auto it = acc.find(k);
    vals.push_back(it == acc.end() ? 0.0 : it->second.first);
    vals.push_back(it == acc.end() ? 0.0 : it->second.second);
  }
  auto t = torch::tensor(vals.empty() ? std::vector<double>{0.0} : vals, torch::kFloat64);
  if (comm_.size() > 1) comm_.allreduce(t, ReduceOp::Sum);
  std::map<std::string, double> logged;
  for (size_t i = 0; i < terms.size(); ++i) {
    const double n = t[2 * i + 1].item<double>();
    if (n > 0) logged[terms[i]] = t[2 * i].item<double>() / n;
  }
  return logged;
}

// ---------------------------------------------------------------------------------------------------------------
// Checkpoints: rank 0 writes every file under a temporary name and renames the folder; after a barrier it writes
// DONE with the SHA-256 of every file and prunes (CheckpointStore).

void Trainer::save_checkpoint(const std::string& name, bool with_optimizer) {
  if (comm_.is_root()) {
    CheckpointState st;
    st.stage = opt_.tag;
    st.step = step_;
    st.steps_per_epoch = steps_per_epoch_;
    st.seed = opt_.seed;
    st.n_rows = n_rows_;
    st.global_batch = opt_.global_batch;
    st.grad_accum = opt_.grad_accum;
    st.world_size = comm_.size();
    const bool own_final = name == "final" && save_final;  // one folder a module instead of model.safetensors
    store_.write(name, own_final ? nullptr : &modules_, own_final ? save_final : save_extra,
                 with_optimizer ? optim_.get() : nullptr, st);
  }
  comm_.barrier();
  if (comm_.is_root()) store_.seal(name, step_);
  comm_.barrier();
  LOG_INFO("[{}] checkpoint {} (step {})", opt_.tag, store_.dir_of(name), step_);
}

void Trainer::load_checkpoint(const std::string& dir) {
  const CheckpointState st = store_.load(dir, modules_, *optim_, opt_.global_batch, n_rows_);
  step_ = st.step;
  LOG_INFO("[{}] resumed from {} at step {} (written by {} rank{}, now {})", opt_.tag, dir, step_, st.world_size,
           st.world_size == 1 ? "" : "s", comm_.size());
}

bool Trainer::is_complete(const std::string& dir) { return CheckpointStore::is_complete(dir); }
std::string Trainer::verify(const std::string& dir) { return CheckpointStore::verify(dir); }
std::string Trainer::latest_checkpoint(const std::string& stage_dir) { return CheckpointStore::latest(stage_dir); }
std::vector<std::string> Trainer::check_earlier_run(const std::string& stage_dir, bool resume, bool force) {
  return StageFolder::check_earlier_run(stage_dir, resume, force);
}

}  // namespace daei
