#include "stages/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/signals.h"
#include "dist/communicator.h"
#include "dist/control.h"
#include "dist/grad_reducer.h"
#include "dist/shard_plan.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string hex(const at::Tensor& bytes) {
  auto t = bytes.contiguous();
  static const char* d = "0123456789abcdef";
  std::string s;
  const auto* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) s += d[p[i] >> 4], s += d[p[i] & 15];
  return s;
}

at::Tensor unhex(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size() / 2)}, torch::kUInt8);
  auto* p = t.data_ptr<uint8_t>();
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < s.size(); i += 2) p[i / 2] = static_cast<uint8_t>(v(s[i]) * 16 + v(s[i + 1]));
  return t;
}

double total_norm(const std::vector<at::Tensor>& params) {
  double sq = 0;
  for (const auto& p : params)
    if (p.grad().defined()) sq += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
  return std::sqrt(sq);
}

void scale_grads(const std::vector<at::Tensor>& params, double f) {
  torch::NoGradGuard g;
  for (const auto& p : params)
    if (p.grad().defined()) p.grad().mul_(f);
}

}  // namespace

TrainerOptions trainer_options(const Config& cfg, const std::string& sk, const std::string& stage_dir) {
  TrainerOptions o;
  o.stage_dir = stage_dir;
  o.tag = sk;
  o.total_steps = cfg.integer(sk + ".steps");
  o.global_batch = cfg.integer(sk + ".batch_size");
  o.grad_accum = cfg.integer(sk + ".grad_accum");
  o.schedule = cfg.str(sk + ".schedule");
  o.warmup_steps = cfg.integer(sk + ".warmup_steps");
  o.clip_norm = cfg.real(sk + ".clip_norm");
  o.beta1 = cfg.real("train.adam_beta1");
  o.beta2 = cfg.real("train.adam_beta2");
  o.adam_eps = cfg.real("train.adam_eps");
  o.log_every = cfg.integer("train.log_every");
  o.ckpt_every = cfg.integer("train.ckpt_every");
  o.keep_last = cfg.integer("train.keep_last");
  o.eval_every = cfg.integer(sk + ".eval_every");
  o.progress_every_s = cfg.real("train.progress_every_s");
  o.seed = static_cast<uint64_t>(cfg.integer("run.seed"));
  o.stop_after = cfg.integer("train.stop_after");
  return o;
}

Trainer::Trainer(Communicator& comm, TrainerOptions opt, int64_t n_rows, ModuleList modules,
                 std::vector<ParamGroupSpec> groups)
    : comm_(comm), opt_(std::move(opt)), n_rows_(n_rows), modules_(std::move(modules)), groups_(std::move(groups)) {
  const int64_t W = comm_.size();
  DAEI_CHECK(opt_.grad_accum >= 1 && opt_.global_batch % (W * opt_.grad_accum) == 0,
             "[{}] batch size {} must be a multiple of world size {} × grad_accum {}; change {}.batch_size or the "
             "number of ranks",
             opt_.tag, opt_.global_batch, W, opt_.grad_accum, opt_.tag);
  local_batch_ = opt_.global_batch / W;
  micro_batch_ = local_batch_ / opt_.grad_accum;
  steps_per_epoch_ = steps_per_epoch(n_rows_, 1, opt_.global_batch, /*drop_last=*/true);
  DAEI_CHECK(steps_per_epoch_ >= 1, "[{}] {} training rows are fewer than one batch of {}", opt_.tag, n_rows_,
             opt_.global_batch);
  DAEI_CHECK(opt_.schedule == "linear" || opt_.schedule == "constant",
             "{}.schedule must be linear or constant, got '{}'", opt_.tag, opt_.schedule);
  std::vector<torch::optim::OptimizerParamGroup> pg;
  for (const auto& g : groups_) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(g.lr);
    o->betas({opt_.beta1, opt_.beta2}).eps(opt_.adam_eps).weight_decay(g.weight_decay);
    pg.emplace_back(g.params, std::move(o));
    params_.insert(params_.end(), g.params.begin(), g.params.end());
  }
  optim_ = std::make_unique<torch::optim::AdamW>(pg, torch::optim::AdamWOptions(1e-3));
  reducer_ = std::make_unique<GradReducer>(comm_, params_);
  // Same starting point everywhere: parameters and buffers (spectral-norm vectors) from rank 0.
  reducer_->broadcast_parameters();
  if (comm_.size() > 1) {
    torch::NoGradGuard ng;
    for (auto& [name, t] : module_tensors(modules_)) comm_.broadcast(t, 0);
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

const std::vector<int64_t>& Trainer::epoch_plan(int64_t epoch) {
  if (epoch != plan_epoch_) {
    plan_ = shard_plan(n_rows_, comm_.size(), comm_.rank(), epoch, opt_.seed, local_batch_);
    plan_epoch_ = epoch;
  }
  return plan_;
}

void Trainer::train_step(std::map<std::string, double>& terms, double& grad_norm, bool& nonfinite) {
  optim_->zero_grad();
  const int64_t epoch = step_ / steps_per_epoch_, in_epoch = step_ % steps_per_epoch_;
  const auto& plan = epoch_plan(epoch);
  for (int64_t m = 0; m < opt_.grad_accum; ++m) {
    Batch b;
    const auto first = plan.begin() + in_epoch * local_batch_ + m * micro_batch_;
    b.rows.assign(first, first + micro_batch_);
    b.step = step_;
    b.micro = m;
    b.global_offset = comm_.rank() * local_batch_ + m * micro_batch_;
    b.global_batch = opt_.global_batch;
    b.accum = opt_.grad_accum;
    LossOutput out = loss(b);
    if (!out.backward_done) (out.loss / static_cast<double>(opt_.grad_accum)).backward();
    for (const auto& [k, v] : out.terms) terms[k] += v / static_cast<double>(opt_.grad_accum);
  }
  reducer_->reduce();
  if (grad_hook) grad_hook();
  grad_norm = total_norm(params_);
  nonfinite = !std::isfinite(grad_norm);
}

int Trainer::run() {
  DAEI_CHECK(static_cast<bool>(loss), "[{}] trainer has no loss closure", opt_.tag);
  make_dirs(opt_.stage_dir);
  if (opt_.resume) {
    const std::string ck = latest_checkpoint(opt_.stage_dir);
    if (!ck.empty())
      load_checkpoint(ck);
    else
      LOG_INFO("[{}] --resume: no complete checkpoint in {}, starting at step 0", opt_.tag, opt_.stage_dir);
  }
  const std::string metrics = opt_.stage_dir + "/metrics.jsonl";
  if (comm_.is_root()) {  // drop lines from beyond the step we (re)start at
    std::string kept;
    if (file_exists(metrics)) {
      std::ifstream in(metrics);
      for (std::string line; std::getline(in, line);) {
        auto j = json::parse(line, nullptr, false);
        if (!j.is_discarded() && j.value("step", int64_t(0)) <= step_) kept += line + "\n";
      }
    }
    write_file_atomic(metrics, kept);
  }
  signals::install_stop_handlers();
  Progress progress(opt_.tag, opt_.total_steps, "step", opt_.progress_every_s, step_);
  std::map<std::string, double> acc_terms;
  double acc_norm = 0;
  int64_t acc_n = 0;
  auto t_log = std::chrono::steady_clock::now();
  while (step_ < opt_.total_steps) {
    std::map<std::string, double> terms;
    double gn = 0;
    bool nonfinite = false;
    train_step(terms, gn, nonfinite);
    ControlWord local;
    local.stop = signals::stop_requested() || (opt_.stop_after > 0 && step_ + 1 == opt_.stop_after);
    local.save = opt_.ckpt_every > 0 && (step_ + 1) % opt_.ckpt_every == 0;
    local.nonfinite = nonfinite;
    local.end_of_data = step_ + 1 >= opt_.total_steps;
    const ControlWord cw = agree(comm_, local);
    const double f = lr_factor(step_);
    for (size_t i = 0; i < groups_.size(); ++i)
      static_cast<torch::optim::AdamWOptions&>(optim_->param_groups()[i].options()).lr(groups_[i].lr * f);
    if (cw.nonfinite) {
      LOG_WARN("[{}] step {}: non-finite gradient norm, update skipped", opt_.tag, step_ + 1);
      optim_->zero_grad();
    } else {
      for (const auto& g : groups_)
        if (g.clip_norm > 0) {
          const double n = total_norm(g.params);
          if (n > g.clip_norm) scale_grads(g.params, g.clip_norm / (n + 1e-6));
        }
      if (opt_.clip_norm > 0) {
        const double n = total_norm(params_);
        if (n > opt_.clip_norm) scale_grads(params_, opt_.clip_norm / (n + 1e-6));
      }
      optim_->step();
    }
    ++step_;
    for (const auto& [k, v] : terms) acc_terms[k] += v;
    acc_norm += gn;
    ++acc_n;
    if (step_ % opt_.log_every == 0 || cw.end_of_data) {
      // Terms are averaged over ranks (same number of rows each) and over the logged steps.
      std::vector<double> vals;
      for (auto& [k, v] : acc_terms) vals.push_back(v / acc_n);
      auto t = torch::tensor(vals, torch::kFloat64);
      if (!vals.empty()) comm_.allreduce(t, ReduceOp::Avg);
      size_t i = 0;
      for (auto& [k, v] : acc_terms) v = t[i++].item<double>();
      auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - t_log).count();
      log_metrics(acc_terms, acc_norm / acc_n, dt > 0 ? acc_n * opt_.global_batch / dt : 0.0);
      progress.update(step_, acc_terms.count("loss") ? fmt::format("loss {:.5g}", acc_terms["loss"]) : "");
      acc_terms.clear();
      acc_norm = 0;
      acc_n = 0;
      t_log = now;
    }
    if (evaluate && opt_.eval_every > 0 && (step_ % opt_.eval_every == 0 || cw.end_of_data)) {
      auto ev = evaluate(step_);
      if (comm_.is_root()) {
        json j{{"step", step_}, {"eval", ev}};
        std::ofstream(metrics, std::ios::app) << j.dump() << "\n";
        std::string s;
        for (auto& [k, v] : ev) s += fmt::format(" {} {:.5g}", k, v);
        LOG_INFO("[{}] eval at step {}:{}", opt_.tag, step_, s);
      }
    }
    if (cw.save || cw.stop || cw.end_of_data) save_checkpoint(fmt::format("ckpt-{:08d}", step_), true);
    if (cw.stop && !cw.end_of_data) {
      LOG_INFO("[{}] stop requested: checkpoint at step {} written; run again with --resume to continue", opt_.tag,
               step_);
      return kExitStopped;
    }
  }
  save_checkpoint("final", false);
  LOG_INFO("[{}] done: {} steps, final model in {}", opt_.tag, step_, final_dir(opt_.stage_dir));
  return kExitOk;
}

void Trainer::log_metrics(const std::map<std::string, double>& terms, double grad_norm, double ex_per_s) {
  if (!comm_.is_root()) return;
  json j{{"step", step_}, {"grad_norm", grad_norm}, {"examples_per_s", ex_per_s}};
  for (const auto& [k, v] : terms) j[k] = v;
  json lr = json::object();
  for (size_t i = 0; i < groups_.size(); ++i) lr[groups_[i].name] = groups_[i].lr * lr_factor(step_ - 1);
  j["lr"] = lr;
  std::ofstream(opt_.stage_dir + "/metrics.jsonl", std::ios::app) << j.dump() << "\n";
}

// ---------------------------------------------------------------------------------------------------------------
// Checkpoints: rank 0 writes every file under a temporary name and renames the folder; after a barrier it writes
// DONE. The contents do not depend on the world size (parameters and AdamW state are replicated).

bool Trainer::is_complete(const std::string& dir) { return file_exists(dir + "/DONE"); }

std::string Trainer::latest_checkpoint(const std::string& stage_dir) {
  std::string best;
  if (!fs::is_directory(stage_dir)) return best;
  for (const auto& e : fs::directory_iterator(stage_dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 13 && name.rfind("ckpt-", 0) == 0 && is_complete(e.path().string()) &&
        (best.empty() || name > fs::path(best).filename().string()))
      best = e.path().string();
  }
  return best;
}

void Trainer::save_checkpoint(const std::string& name, bool with_optimizer) {
  const std::string dir = opt_.stage_dir + "/" + name;
  if (comm_.is_root()) {
    const std::string tmp = temp_sibling(dir);
    fs::remove_all(tmp);
    make_dirs(tmp);
    save_tensors(tmp + "/model.safetensors", module_tensors(modules_));
    if (with_optimizer) {
      torch::serialize::OutputArchive ar;
      optim_->save(ar);
      ar.save_to(tmp + "/optim.pt");
    }
    json st{{"schema", "daei.checkpoint.v1"},
            {"stage", opt_.tag},
            {"step", step_},
            {"epoch", step_ / steps_per_epoch_},
            {"sampler", {{"epoch", step_ / steps_per_epoch_},
                         {"step_in_epoch", step_ % steps_per_epoch_},
                         {"seed", opt_.seed},
                         {"n_rows", n_rows_}}},
            {"global_batch", opt_.global_batch},
            {"grad_accum", opt_.grad_accum},
            {"world_size", comm_.size()},
            {"rng", {{"scheme", "counter-based: generator(seed, step, tag); nothing else to restore"},
                     {"seed", opt_.seed},
                     {"torch_cpu_default", hex(at::detail::getDefaultCPUGenerator().get_state())}}}};
    write_file_atomic(tmp + "/state.json", st.dump(2) + "\n");
    if (save_extra) save_extra(tmp);
    fs::remove_all(dir);
    fs::rename(tmp, dir);
  }
  comm_.barrier();
  if (comm_.is_root()) {
    write_file_atomic(dir + "/DONE", fmt::format("step {}\n", step_));
    prune_checkpoints();
  }
  comm_.barrier();
  LOG_INFO("[{}] checkpoint {} (step {})", opt_.tag, dir, step_);
}

void Trainer::prune_checkpoints() {
  std::vector<std::string> done;
  for (const auto& e : fs::directory_iterator(opt_.stage_dir)) {
    const std::string n = e.path().filename().string();
    if (n.size() == 13 && n.rfind("ckpt-", 0) == 0 && is_complete(e.path().string())) done.push_back(n);
  }
  std::sort(done.begin(), done.end());
  for (size_t i = 0; opt_.keep_last > 0 && i + opt_.keep_last < done.size(); ++i)
    fs::remove_all(opt_.stage_dir + "/" + done[i]);
}

void Trainer::load_checkpoint(const std::string& dir) {
  const json st = json::parse(read_file(dir + "/state.json"));
  DAEI_CHECK(st.value("schema", "") == "daei.checkpoint.v1", "{}: unknown checkpoint schema", dir);
  const int64_t gb = st.at("global_batch").get<int64_t>();
  DAEI_CHECK(gb == opt_.global_batch,
             "{}: checkpoint was trained with global batch {}, the config says {}; resume needs the same global batch",
             dir, gb, opt_.global_batch);
  DAEI_CHECK(st.at("sampler").at("n_rows").get<int64_t>() == n_rows_,
             "{}: checkpoint was trained on {} rows, the data now has {}", dir,
             st.at("sampler").at("n_rows").get<int64_t>(), n_rows_);
  load_module_tensors(modules_, load_tensors(dir + "/model.safetensors"), dir + "/model.safetensors");
  torch::serialize::InputArchive ar;
  ar.load_from(dir + "/optim.pt");
  optim_->load(ar);
  step_ = st.at("step").get<int64_t>();
  at::Generator cpu = at::detail::getDefaultCPUGenerator();  // a handle to the process-wide generator
  cpu.set_state(unhex(st.at("rng").at("torch_cpu_default").get<std::string>()));
  const int64_t was = st.at("world_size").get<int64_t>();
  LOG_INFO("[{}] resumed from {} at step {} (written by {} rank{}, now {})", opt_.tag, dir, step_, was,
           was == 1 ? "" : "s", comm_.size());
}

}  // namespace daei
