// daei's side of the benchmark entries (issue 15). bench/run.sh runs this program and the Python references in
// alternation and turns their JSON lines into bench/results.{json,md}. One subcommand a measurement:
//   matmul       fp32 matmul rate of this machine (torch::mm, N×N×N)
//   sure         stage-1 SURE step (forward + divergence + backward + AdamW); --variant hutchinson|batched|fd;
//                under mpirun with --mpi: data parallel, gradients averaged by GradReducer
//   sure-var     the divergence estimate of each variant at equal K on a fixed DAE: mean, std over probe draws,
//                and the exact divergence (d VJPs) for comparison
//   t5-step      stage-2 step of the small inverter (forward + backward + AdamW), with its counted matmul FLOPs;
//                under mpirun with --mpi 1: data parallel, gradients averaged by GradReducer
//                --fast-dropout/--fused-norm/--fused-ce/--fused-residual/--fused-attention 0|1 turn the T5 step's fused kernels off one by one
//   t5-levers    the same step in one process with each fused kernel alone (and all, none, and dropout 0),
//                configurations interleaved step by step so that all see the same load
//   t5-generate  greedy decoding, batch B, --label-len tokens (eos forbidden so every run decodes all of them)
//                t5-step and t5-generate take --precision fp32|bf16 (train.precision's matrix products; default fp32)
//   precision    this CPU's bf16 ISA as model/net/precision.h probes it (the bench header names it)
//   t5-epoch     one epoch over texts of the token lengths in --lengths: per-batch padding to the longest row,
//                length-bucketed batches, real-token-only loss
//   allreduce    (mpirun -np 2) GradReducer::reduce on the DAE's / the inverter's gradients vs raw MPI_Allreduce
//   stage3-step  a stage-3 step through the Trainer (SURE + CE sets, all-reduces, PCGrad), split into its phases;
//                under mpirun with --mpi 1 on N ranks
// Every line: {"times": [seconds per repetition after one warm-up], "minflt", "maxrss_kb", "malloc", "threads", ...}.
#include <mpi.h>
#include <sys/resource.h>
#include <torch/torch.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <nlohmann/json.hpp>

#include "bench_inverter.h"
#include "bench_util.h"
#include "core/allocator.h"
#include "dist/communicator.h"
#include "dist/grad_reducer.h"
#include "dist/mpi_process.h"
#include "model/net/generate.h"
#include "model/attack/inverter.h"
#include "model/net/precision.h"
#include "model/net/t5_kernels.h"
#include "core/error.h"
#include "data/dataset.h"
#include "stages/recipes/pcgrad.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/sure.h"
#include "stages/loop/trainer.h"

using namespace daei;
using json = nlohmann::json;
using namespace daei::bench;

namespace {

// ------------------------------------------------------------------------------------------------ stage 1

DaeOptions dae_options() {
  DaeOptions o;
  o.dim = arg("dim", 768), o.hidden = arg("hidden", 1024), o.depth = arg("depth", 3);
  return o;
}

// Batched probes: the K probe copies of the batch in ONE forward (K·B rows) and ONE vector–Jacobian product with a
// second-order graph; row k·B+b carries probe z_k of row b, so div = mean_k z_kᵀ J z_k exactly as K separate VJPs.
SureTerms sure_batched(Dae& dae, const at::Tensor& y_in, const at::Tensor& sigma, const at::Tensor& probes,
                       const std::vector<at::Tensor>& masks) {
  const int64_t K = probes.size(0), B = y_in.size(0), d = y_in.size(1);
  auto y = y_in.detach().repeat({K, 1}).requires_grad_(true);
  std::vector<at::Tensor> rep;
  for (const auto& m : masks) rep.push_back(m.repeat({K, 1}));
  auto r = dae->residual(y, sigma.repeat({K}), rep);
  auto z = probes.reshape({K * B, d});
  auto g = torch::autograd::grad({r}, {y}, {z}, true, true)[0];
  auto div = (z * g).sum(1).view({K, B}).mean(0);
  auto sq = r.narrow(0, 0, B).pow(2).sum(1);
  auto per = sq + 2.0 * sigma.pow(2) * div;
  return SureTerms{per.mean(), sq.mean().detach(), div.mean().detach()};
}

SureTerms sure_variant(const std::string& v, Dae& dae, const at::Tensor& y, const at::Tensor& sigma,
                       const at::Tensor& z, const std::vector<at::Tensor>& masks, int64_t probes) {
  if (v == "batched") return sure_batched(dae, y, sigma, z, masks);
  SureOptions so;
  so.divergence = v;
  so.probes = probes;
  return sure_loss(dae, y, sigma, z, masks, so);
}

json cmd_sure(bool mpi) {
  std::unique_ptr<Communicator> comm;
  if (mpi) comm = make_mpi_communicator();
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  const int64_t steps = arg("steps", 5), batch = arg("batch", 256), K = arg("probes", 5);
  const std::string variant = sarg("variant", "hutchinson");
  auto o = dae_options();
  torch::manual_seed(0);
  Dae dae(o);
  dae->train();
  std::unique_ptr<GradReducer> red;
  if (comm) {
    red = std::make_unique<GradReducer>(*comm, dae->parameters());
    red->broadcast_parameters();
  }
  torch::optim::AdamW opt(dae->parameters(), torch::optim::AdamWOptions(1e-3));
  torch::manual_seed(1 + rank);
  auto y = torch::randn({batch, o.dim}) * 0.04;
  auto sigma = torch::full({batch}, 0.01);
  std::vector<double> times, reduce_times;
  Usage u;
  for (int64_t s = 0; s < steps + 1; ++s) {
    auto gp = step_generator(1, s * world + rank, 3);
    auto z = rademacher({K, batch, o.dim}, gp);
    std::vector<at::Tensor> masks;
    for (int64_t i = 0; i < o.depth; ++i)
      masks.push_back((torch::rand({batch, 2 * o.hidden}) >= 0.1).to(torch::kFloat32) / 0.9);
    const double t0 = now();
    if (red) red->prepare_grads(); else opt.zero_grad();  // as the Trainer: backward writes into the buckets
    auto t = sure_variant(variant, dae, y, sigma, z, masks, K);
    t.loss.backward();
    const double t1 = now();
    if (red) red->reduce();
    const double t2 = now();
    opt.step();
    if (s > 0) {
      times.push_back(now() - t0);
      reduce_times.push_back(t2 - t1);
    }
  }
  json j{{"variant", variant}, {"times", times}, {"world", world}, {"rank", rank}, {"batch", batch},
         {"dim", o.dim},       {"hidden", o.hidden}, {"depth", o.depth}, {"probes", K}};
  if (red) j["reduce_times"] = reduce_times;
  u.fill(j);
  return j;
}

json cmd_sure_var() {
  const int64_t draws = arg("draws", 20), batch = arg("batch", 32), K = arg("probes", 5);
  const bool exact = arg("exact", 1) != 0;
  auto o = dae_options();
  torch::manual_seed(0);
  Dae dae(o);
  {  // a DAE whose residual is not identically zero (output_proj starts at zero)
    torch::NoGradGuard ng;
    for (auto& p : dae->named_parameters())
      if (p.key().rfind("output_proj", 0) == 0) p.value().normal_(0.0, 0.05);
  }
  dae->eval();  // deterministic: the estimators differ only by their probes
  auto y = torch::randn({batch, o.dim}) * 0.04;
  auto sigma = torch::full({batch}, 0.01);
  json out = json::object();
  double div_exact = std::nan("");
  if (exact) {  // rows are independent, so one VJP with e_i in every row gives J_ii for all rows at once
    auto yy = y.clone().requires_grad_(true);
    auto r = dae->residual(yy, sigma);
    double tr = 0;
    for (int64_t i = 0; i < o.dim; ++i) {
      auto e = torch::zeros_like(r);
      e.select(1, i).fill_(1.0);
      auto g = torch::autograd::grad({r}, {yy}, {e}, true, false)[0];
      tr += g.select(1, i).sum().item<double>();
    }
    div_exact = tr / static_cast<double>(batch);
  }
  out["exact_div"] = div_exact;
  for (const std::string v : {"hutchinson", "batched", "fd"}) {
    std::vector<double> est, times;
    for (int64_t k = 0; k < draws; ++k) {
      auto gp = step_generator(7, k, 5);
      auto z = rademacher({K, batch, o.dim}, gp);
      const double t0 = now();
      auto t = sure_variant(v, dae, y, sigma, z, {}, K);
      t.loss.backward();  // the cost of the estimate includes its backward, as in training
      times.push_back(now() - t0);
      est.push_back(t.div.item<double>());
      dae->zero_grad();
    }
    const double m = std::accumulate(est.begin(), est.end(), 0.0) / est.size();
    double var = 0;
    for (double e : est) var += (e - m) * (e - m);
    var /= std::max<size_t>(1, est.size() - 1);
    out[v] = json{{"mean", m}, {"var", var}, {"std", std::sqrt(var)}, {"times", times}};
  }
  out["batch"] = batch, out["probes"] = K, out["draws"] = draws, out["dim"] = o.dim, out["hidden"] = o.hidden,
  out["depth"] = o.depth;
  return out;
}

// ------------------------------------------------------------------------------------------------ stage 2

void set_t5_speed() {
  t5_speed().fast_dropout = flag_arg("fast-dropout", true);
  t5_speed().fused_norm = flag_arg("fused-norm", true);
  t5_speed().fused_ce = flag_arg("fused-ce", true);
  t5_speed().fused_residual = flag_arg("fused-residual", true);
  t5_speed().fused_attention = flag_arg("fused-attention", true);
}

// Matmul FLOPs of one teacher-forced forward (2·m·n·k each), S encoder positions, T decoder positions, N label
// tokens through the LM head. A training step counts 3× (backward: input and weight gradients).
double t5_forward_flops(const InverterConfig& c, double B, double T, double N) {
  const double S = c.repeat, d = c.t5.d_model, in = c.t5.num_heads * c.t5.d_kv, ff = c.t5.d_ff, V = c.t5.vocab_size;
  const double H = c.t5.num_heads, dk = c.t5.d_kv;
  double f = 2 * B * (c.dim * c.dim + c.dim * d * S);
  const double enc = 2 * B * S * d * in * 4 + 2 * 2 * B * H * S * S * dk + 2 * 2 * B * S * d * ff;
  const double dec = 2 * B * T * d * in * 4 + 2 * 2 * B * H * T * T * dk                   // self-attention
                     + 2 * B * T * d * in * 2 + 2 * B * S * d * in * 2 + 2 * 2 * B * H * T * S * dk  // cross
                     + 2 * 2 * B * T * d * ff;
  f += c.t5.num_layers * enc + c.t5.num_decoder_layers * dec + 2 * N * d * V;
  return f;
}

at::Tensor random_labels(int64_t B, int64_t T, int64_t V) { return torch::randint(2, V, {B, T}, torch::kLong); }

// --precision fp32|bf16: the process's matmul precision, as `daei` sets it from train.precision (no refusal here:
// the runner skips the bf16 entries on a CPU without native bf16).
Precision set_precision() {
  const std::string p = sarg("precision", "fp32");
  DAEI_CHECK(p == "fp32" || p == "bf16", "--precision must be fp32 or bf16, got '{}'", p);
  set_matmul_precision(p == "bf16" ? Precision::bf16 : Precision::fp32);
  return matmul_precision();
}

// Under mpirun with --mpi 1: data parallel (B rows a rank), gradients averaged by GradReducer each step.
json cmd_t5_step(bool mpi) {
  std::unique_ptr<Communicator> comm;
  if (mpi) comm = make_mpi_communicator();
  const int rank = comm ? comm->rank() : 0;
  const int64_t steps = arg("steps", 3, 1), B = arg("batch", 64, 1), T = arg("label-len", 32, 1);
  auto c = stage2_inverter_config();
  set_t5_speed();
  const Precision prec = set_precision();
  torch::manual_seed(0);
  Inverter m(c);
  m->train();
  std::unique_ptr<GradReducer> red;
  if (comm) {
    red = std::make_unique<GradReducer>(*comm, m->parameters());
    red->broadcast_parameters();
  }
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-4));
  torch::manual_seed(1 + rank);
  std::vector<double> times, reduce_times, losses;  // losses: the same seeds in either precision, comparable
  Usage u;
  // --profile FILE: a chrome trace of the steps after the warm-up (libtorch's legacy profiler), for finding the ops
  // that cost; timings of a profiled run are not reported figures.
  std::unique_ptr<torch::autograd::profiler::RecordProfile> prof;
  for (int64_t s = 0; s < steps + 1; ++s) {
    if (s == 1 && !sarg("profile", "").empty())
      prof = std::make_unique<torch::autograd::profiler::RecordProfile>(sarg("profile", ""));
    auto e = torch::randn({B, c.dim});
    auto labels = random_labels(B, T, c.t5.vocab_size);
    const double t0 = now();
    if (red) red->prepare_grads(); else opt.zero_grad();
    auto l = m->loss(e, labels);
    auto mean = l.sum / static_cast<double>(l.count);
    mean.backward();
    const double t1 = now();
    losses.push_back(mean.item<double>());
    if (red) red->reduce();
    const double t2 = now();
    opt.step();
    if (s > 0) times.push_back(now() - t0), reduce_times.push_back(t2 - t1);
  }
  prof.reset();
  int64_t n = 0;
  for (auto& p : m->parameters()) n += p.numel();
  json j{{"times", times}, {"flops", 3 * t5_forward_flops(c, B, T, B * T)}, {"params", n}, {"batch", B},
         {"label_len", T}, {"rank", rank}, {"losses", losses}, {"precision", precision_name(prec)}};
  if (red) j["reduce_times"] = reduce_times;
  u.fill(j);
  return j;
}

// Step time with each lever of issue 24 item 2 alone. One process, one model; every round runs one step of each
// configuration in turn (after a warm-up round), so load changes hit all of them alike. "none" is the libtorch op
// chains, "all" the default; "dropout0" is the default with every dropout rate set to 0 (not the same work: the
// figure says what the dropouts cost in all).
json cmd_t5_levers() {
  const int64_t rounds = arg("steps", 3, 1), B = arg("batch", 64, 1), T = arg("label-len", 32, 1);
  auto c = stage2_inverter_config();
  torch::manual_seed(0);
  Inverter m(c);
  m->train();
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-4));
  struct Cfg {
    const char* name;
    T5Speed s;
    bool no_dropout;
  };
  const std::vector<Cfg> cfgs = {{"none", {false, false, false, false, false}, false},
                                 {"fast_dropout", {true, false, false, false, false}, false},
                                 {"fused_norm", {false, true, false, false, false}, false},
                                 {"fused_ce", {false, false, true, false, false}, false},
                                 {"fused_residual", {false, false, false, true, false}, false},
                                 {"fused_attention", {false, false, false, false, true}, false},
                                 {"all", {true, true, true, true, true}, false},
                                 {"dropout0", {true, true, true, true, true}, true}};
  auto set_rate = [&](double p) {
    for (auto& mod : m->modules(/*include_self=*/false)) {
      if (auto* a = mod->as<T5AttentionImpl>()) a->dropout = p;
      if (auto* d = mod->as<T5DenseImpl>()) d->dropout = p;
      if (auto* st = mod->as<T5StackImpl>()) st->cfg.dropout_rate = p;
    }
  };
  torch::manual_seed(1);
  std::map<std::string, std::vector<double>> times;
  for (int64_t r = 0; r < rounds + 1; ++r) {
    for (const auto& cf : cfgs) {
      t5_speed() = cf.s;
      set_rate(cf.no_dropout ? 0.0 : c.t5.dropout_rate);
      auto e = torch::randn({B, c.dim});
      auto labels = random_labels(B, T, c.t5.vocab_size);
      const double t0 = now();
      opt.zero_grad();
      auto l = m->loss(e, labels);
      (l.sum / static_cast<double>(l.count)).backward();
      opt.step();
      if (r > 0) times[cf.name].push_back(now() - t0);
    }
  }
  t5_speed() = T5Speed{};
  json j{{"configs", times}, {"batch", B}, {"label_len", T}, {"dropout", c.t5.dropout_rate}};
  j["times"] = times["all"];
  return j;
}

json cmd_t5_generate() {
  const int64_t steps = arg("steps", 3), B = arg("batch", 64), T = arg("label-len", 32);
  auto c = stage2_inverter_config();
  const Precision prec = set_precision();
  torch::manual_seed(0);
  Inverter m(c);
  m->eval();
  GenerateOptions g;
  g.max_length = T + 1;  // counts the start token
  g.min_length = T + 1;  // eos forbidden: every run decodes T tokens
  std::vector<double> times;
  int64_t tokens = 0;
  std::vector<int64_t> first_ids;  // the first generation's tokens: how often bf16 picks fp32's token
  Usage u;
  for (int64_t s = 0; s < steps + 1; ++s) {
    auto e = torch::randn({B, c.dim});
    const double t0 = now();
    auto seq = m->generate(e, g);
    if (s > 0) times.push_back(now() - t0);
    tokens = seq.size(1) - 1;
    if (s == 0) first_ids.assign(seq.data_ptr<int64_t>(), seq.data_ptr<int64_t>() + seq.numel());
  }
  json j{{"times", times}, {"tokens", tokens}, {"batch", B}, {"ids", first_ids}, {"precision", precision_name(prec)}};
  u.fill(j);
  return j;
}

json cmd_t5_epoch() {
  const int64_t B = arg("batch", 64);
  const std::string file = sarg("lengths", "");
  const bool bucket = arg("bucket", 1) != 0;
  std::vector<int64_t> len;
  {
    std::ifstream in(file);
    TORCH_CHECK(in, "cannot read --lengths ", file);
    int64_t x;
    while (in >> x) len.push_back(x);
  }
  auto c = stage2_inverter_config();
  torch::manual_seed(0);
  Inverter m(c);
  m->train();
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-4));
  std::mt19937_64 rng(0);
  std::vector<int64_t> order(len.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::vector<int64_t>> batches;
  // Length bucketing: sort each window of 50 batches by length, cut it into batches, shuffle the batch order.
  const size_t window = bucket ? static_cast<size_t>(B) * 50 : static_cast<size_t>(B);
  for (size_t w = 0; w < order.size(); w += window) {
    auto e = std::min(order.size(), w + window);
    if (bucket)
      std::stable_sort(order.begin() + w, order.begin() + e, [&](int64_t a, int64_t b) { return len[a] < len[b]; });
    for (size_t i = w; i < e; i += B) batches.emplace_back(order.begin() + i, order.begin() + std::min(e, i + B));
  }
  std::shuffle(batches.begin(), batches.end(), rng);
  Usage u;
  int64_t tokens = 0, padded = 0;
  const double t0 = now();
  for (const auto& b : batches) {
    std::vector<std::vector<int64_t>> rows;
    for (auto r : b) {
      auto t = torch::randint(2, c.t5.vocab_size, {len[r]}, torch::kLong);
      rows.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + len[r]);
    }
    auto labels = labels_from_rows(rows);
    padded += labels.numel();
    auto e = torch::randn({static_cast<int64_t>(b.size()), c.dim});
    opt.zero_grad();
    auto l = m->loss(e, labels);
    (l.sum / static_cast<double>(l.count)).backward();
    opt.step();
    tokens += l.count;
  }
  json j{{"times", {now() - t0}}, {"tokens", tokens}, {"padded_positions", padded}, {"batches", batches.size()},
         {"texts", len.size()}, {"bucket", bucket}};
  u.fill(j);
  return j;
}

// ------------------------------------------------------------------------------------------------ stage 3

// A stage-3 step through the real Trainer: SURE on the DAE and cross-entropy through DAE → inverter as two gradient
// sets, each all-reduced, then PCGrad (combine_sure_ce, as stage 3). The Trainer's phase clock splits the step:
// "forward" holds both forwards and SURE's divergence VJPs (they run inside the loss), then each set's backward,
// each set's all-reduce, PCGrad, the optimizer. Random rows and labels: only the shapes matter for time.
json cmd_stage3_step(bool mpi) {
  std::unique_ptr<Communicator> comm;
  if (mpi) comm = make_mpi_communicator();
  else comm = std::make_unique<LocalCommunicator>();
  const int64_t steps = arg("steps", 4), batch = arg("batch", 64), T = arg("label-len", 32);
  auto o = dae_options();
  auto ic = stage2_inverter_config();
  ic.dim = o.dim;
  torch::manual_seed(0);
  Dae dae(o);
  Inverter inv(ic);
  dae->train();
  inv->train();
  const int64_t rows = batch * (steps + 1);
  auto noisy = torch::randn({rows, o.dim}) * 0.1;
  auto labels = random_labels(rows, T, ic.t5.vocab_size);
  const InMemoryDataset data(noisy, {}, 0.04);
  const std::string dir = fmt::format("{}/daei-bench-stage3-{}-{}", std::filesystem::temp_directory_path().string(),
                                      ::getpid(), comm->rank());
  TrainerOptions to;
  to.stage_dir = comm->broadcast(dir, 0);
  to.tag = "bench-stage3";
  to.total_steps = steps + 1;  // the first step warms up and is subtracted below
  to.global_batch = batch;
  to.ckpt_every = 0, to.log_every = 1000000, to.progress_every_s = 1e9, to.plot = false;
  std::vector<ParamGroupSpec> groups{{"inverter", inv->parameters(), 1e-3, 0.01, 0.0},
                                     {"dae", dae->parameters(), 2e-4, 0.01, 0.5}};
  Trainer t(*comm, to, rows, ModuleList{{"dae.", dae.ptr()}, {"inverter.", inv.ptr()}}, groups,
            std::vector<std::string>{"sure", "ce"});
  t.terms = {"loss", "pcgrad_conflict_frac", "pcgrad_cos"};
  SigmaSchedule sched;
  sched.mode = "fixed", sched.sigma0 = sched.sigma_max = 0.04;
  SureOptions so;
  so.probes = arg("probes", 5);
  std::map<std::string, double> after_warmup;
  t.loss = [&](const Batch& b) {
    if (b.step == 1 && b.micro == 0) after_warmup = t.phase_seconds();
    auto st = sure_step(dae, data, b, 1, sched, so);
    auto y = data.noisy(b.rows);
    auto e = dae->forward(y, torch::full({y.size(0)}, 0.04));
    auto tl = inv->loss(e, labels.index_select(0, torch::tensor(b.rows, torch::kLong)));
    LossOutput out;
    out.loss = st.loss;
    out.more.push_back({tl.sum, static_cast<double>(tl.count)});
    return out;
  };
  const size_t n_inv = inv->parameters().size();
  t.combine = [&](GradSets& sets) { return combine_sure_ce(sets, t.params(), n_inv, sarg("pcgrad", "per_tensor")); };
  Usage u;
  const double t0 = now();
  DAEI_CHECK(t.run() == kExitOk, "stage-3 bench run failed");
  const double wall = now() - t0;
  json phases;
  double total = 0;
  for (const auto& [k, v] : t.phase_seconds()) {
    const double per = (v - (after_warmup.count(k) ? after_warmup.at(k) : 0.0)) / static_cast<double>(steps);
    phases[k] = per;
    total += per;
  }
  if (comm->rank() == 0) std::filesystem::remove_all(to.stage_dir);
  json j{{"times", {total}}, {"phases", phases}, {"wall_s", wall}, {"world", comm->size()}, {"rank", comm->rank()},
         {"dae_params", static_cast<int64_t>(dae->parameters().size())}};
  u.fill(j);
  return j;
}

// ------------------------------------------------------------------------------------------------ dist, matmul

json cmd_allreduce() {
  auto comm = make_mpi_communicator();
  const int64_t reps = arg("reps", 10);
  const std::string which = sarg("which", "dae");
  const int64_t B = arg("batch", which == "dae" ? 128 : 32, 1);
  std::shared_ptr<torch::nn::Module> model;
  std::function<at::Tensor()> real_loss;  // the loss of a training step of this model, on fresh random rows
  if (which == "dae") {
    auto o = dae_options();
    auto dae = std::make_shared<DaeImpl>(o);
    dae->train();
    model = dae;
    real_loss = [dae, o, B] {  // stage 1's SURE step (Hutchinson, K = 2 probes)
      auto y = torch::randn({B, o.dim}) * 0.04;
      auto sigma = torch::full({B}, 0.01);
      auto z = torch::randint(0, 2, {2, B, o.dim}).to(torch::kFloat32) * 2 - 1;
      std::vector<at::Tensor> masks;
      for (int64_t i = 0; i < o.depth; ++i)
        masks.push_back((torch::rand({B, 2 * o.hidden}) >= 0.1).to(torch::kFloat32) / 0.9);
      Dae holder(dae);
      return sure_variant("hutchinson", holder, y, sigma, z, masks, 2).loss;
    };
  } else {
    auto c = stage2_inverter_config();
    set_t5_speed();
    auto inv = std::make_shared<InverterImpl>(c);
    inv->train();
    model = inv;
    real_loss = [inv, c, B] {  // stage 2's teacher-forced cross-entropy
      auto l = inv->loss(torch::randn({B, c.dim}), random_labels(B, arg("label-len", 32, 1), c.t5.vocab_size));
      return l.sum / static_cast<double>(l.count);
    };
  }
  auto params = model->parameters();
  int64_t n = 0;
  std::vector<at::Tensor> fresh;
  for (auto& p : params) {
    fresh.push_back(torch::randn_like(p));
    n += p.numel();
  }
  GradReducer red(*comm, params);
  auto flat = torch::randn({n});
  // Every repetition, each measured call right after the work that precedes it in training:
  //   "times":       prepare_grads(), a real training backward (untimed) that accumulates into the buckets, reduce();
  //   "raw_times":   the same real backward, then one MPI_Allreduce of the same bytes (the reference);
  //   "fresh_times": prepare_grads() and a backward of a trivial loss (gradients just written, hot in cache), reduce();
  //   "copy_times":  gradients as fresh tensors of their own (no prepare_grads()), which reduce() copies in first.
  std::vector<double> t_red, t_raw, t_fresh, t_copy;
  auto timed = [&](const std::function<void()>& f) {
    comm->barrier();
    const double t0 = now();
    f();
    return now() - t0;
  };
  // As the Trainer does: each rank's loss scaled by 1/world before backward, so reduce() sums (prescaled).
  const double scale = red.loss_scale();
  for (int64_t r = 0; r < reps + 1; ++r) {
    red.prepare_grads(/*prescaled=*/true);
    (real_loss() * scale).backward();
    const double a = timed([&] { red.reduce(); });
    red.prepare_grads(/*prescaled=*/true);
    (real_loss() * scale).backward();
    const double b = timed([&] {
      MPI_Allreduce(MPI_IN_PLACE, flat.data_ptr<float>(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    red.prepare_grads(/*prescaled=*/true);
    {
      auto loss = torch::zeros({});
      for (size_t i = 0; i < params.size(); ++i) loss = loss + (params[i] * fresh[i]).sum();
      loss.backward();
    }
    const double c = timed([&] { red.reduce(); });
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = fresh[i].clone();
    const double d = timed([&] { red.reduce(); });
    if (r > 0) t_red.push_back(a), t_raw.push_back(b), t_fresh.push_back(c), t_copy.push_back(d);
  }
  return json{{"which", which}, {"numel", n}, {"bytes", n * 4}, {"buckets", red.buckets().size()}, {"batch", B},
              {"times", t_red}, {"raw_times", t_raw}, {"fresh_times", t_fresh}, {"copy_times", t_copy},
              {"world", comm->size()}, {"rank", comm->rank()}};
}

// The peak GEMM rate, so the output is allocated once: on a machine whose page faults are slow (10 µs a page on
// some VMs, bench/notes.md) a fresh 4 MB output a call measured the faults, not the kernel, for the first ~9 calls.
json cmd_precision() {
  const CpuBf16& c = cpu_bf16();
  return json{{"isa", c.isa()}, {"native", c.native()}, {"missing", c.missing()}};
}

json cmd_matmul() {
  const int64_t N = arg("n", 1024), reps = arg("reps", 5), warmup = 2;
  auto a = torch::randn({N, N}), b = torch::randn({N, N}), c = torch::empty({N, N});
  std::vector<double> times;
  for (int64_t r = 0; r < reps + warmup; ++r) {
    const double t0 = now();
    torch::mm_out(c, a, b);
    if (r >= warmup) times.push_back(now() - t0);
  }
  return json{{"times", times}, {"flops", 2.0 * N * N * N}, {"n", N}};
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string malloc_mode = configure_allocator();
  if (argc < 2) {
    std::cerr << "usage: bench_entries matmul|precision|sure|sure-var|t5-step|t5-levers|t5-generate|t5-epoch|allreduce|stage3-step [--key value ...]\n";
    return 2;
  }
  const std::string cmd = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) g_args[std::string(argv[i]).substr(2)] = argv[i + 1];
  const bool mpi = cmd == "allreduce" || arg("mpi", 0) != 0;
  if (mpi) MpiProcess::init(&argc, &argv);
  torch::set_num_threads(static_cast<int>(arg("threads", 1)));
  json j;
  if (cmd == "matmul") j = cmd_matmul();
  else if (cmd == "precision") j = cmd_precision();
  else if (cmd == "sure") j = cmd_sure(mpi);
  else if (cmd == "sure-var") j = cmd_sure_var();
  else if (cmd == "t5-step") j = cmd_t5_step(mpi);
  else if (cmd == "t5-levers") j = cmd_t5_levers();
  else if (cmd == "t5-generate") j = cmd_t5_generate();
  else if (cmd == "t5-epoch") j = cmd_t5_epoch();
  else if (cmd == "allreduce") j = cmd_allreduce();
  else if (cmd == "stage3-step") j = cmd_stage3_step(mpi);
  else {
    std::cerr << "bench_entries: unknown subcommand " << cmd << "\n";
    return 2;
  }
  j["cmd"] = cmd;
  j["impl"] = "daei C++";
  j["malloc"] = malloc_mode;
  j["threads"] = torch::get_num_threads();
  if (!j.contains("rank") || j["rank"] == 0) std::cout << j.dump() << std::endl;
  if (mpi) MpiProcess::finalize();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_entries: error: " << e.what() << "\n";
  return 1;
}
