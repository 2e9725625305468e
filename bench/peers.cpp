// daei's side of the benchmarks against the peers' own code (issue 66; bench/peers/run.py drives it, the peers run
// in bench/peers/*.py). The weights are shared: `save` writes the inverter as a Hugging Face T5 directory (daei's
// T5 keeps HF's parameter names) and the DAE as model.safetensors, plus the inputs both sides read, so outputs and
// losses compare exactly.
//   save         --dir D + T5 sizes (bench_entries' flags) + --dae-dim/--dae-hidden/--dae-depth/--dae-batch/--probes
//                writes D/inverter/ (Inverter::save), D/inputs.safetensors (e_gen [B, dim], labels [B, T]), D/dae/
//                (Dae::save) and
//                D/sure_inputs.safetensors (y [B, d], probes [K, B, d])
//   t5-step      --dir D --steps N --precision fp32|bf16 --batch B --label-len T: the inverter loaded from D, its
//                eval-mode CE on the stored e_gen and labels (loss_eval), then train mode: forward + backward +
//                FusedAdamW (the Trainer's optimizer) a step; e and labels drawn before the clock
//   t5-generate  --dir D --steps N --beams 1|4 --no-repeat-ngram n --repetition-penalty p --label-len T: decodes the
//                stored e_gen T tokens (eos forbidden: min_length = max_length = T+1), prints the first run's ids
//   sure         --dir D --steps N: the eval-mode SURE loss on the stored y and probes (dropout off, no power
//                iteration: comparable with the peer), then train-mode steps: probes and dropout masks drawn, SURE
//                (K VJPs on one forward), backward, FusedAdamW, all inside the clock
// Every command prints one JSON line: {"times": [s per repetition after one warm-up], ...}.
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_inverter.h"
#include "bench_util.h"
#include "core/allocator.h"
#include "core/safetensors.h"
#include "model/attack/dae.h"
#include "model/attack/inverter.h"
#include "model/net/generate.h"
#include "model/net/precision.h"
#include "stages/loop/fused_adamw.h"
#include "stages/recipes/sure.h"

using namespace daei;
using namespace daei::bench;
using json = nlohmann::json;

namespace {

DaeOptions dae_options() {  // the stage-1 entry's sizes (paper: 768, 1024, depth 3)
  DaeOptions o;
  o.dim = arg("dae-dim", 768), o.hidden = arg("dae-hidden", 1024), o.depth = arg("dae-depth", 3);
  return o;
}

// DAEI_PERF_CTL=FIFO (bench/peers/perf_profile.py): "enable" to perf record's control fifo when the timed repetitions
// start (after the warm-up), "disable" when they end, so the profile holds the measured work alone.
void perf_ctl(const char* what) {
  const char* p = std::getenv("DAEI_PERF_CTL");
  if (p == nullptr || *p == 0) return;
  std::ofstream f(p);
  f << what << "\n";
}

std::string dir() {
  const std::string d = sarg("dir", "");
  if (d.empty()) throw std::invalid_argument("--dir DIR is required");
  return d;
}

json cmd_save() {
  const std::string D = dir();
  std::filesystem::create_directories(D);
  torch::manual_seed(arg("seed", 0));
  Inverter inv(stage2_inverter_config());
  inv->save(D + "/inverter");
  const int64_t B = arg("batch", 64), dB = arg("dae-batch", 256), K = arg("probes", 5);
  auto e = torch::randn({B, inv->cfg.dim});
  auto labels = torch::randint(2, inv->cfg.t5.vocab_size, {B, arg("label-len", 32, 1)}, torch::kLong);
  save_safetensors(D + "/inputs.safetensors", {{"e_gen", e}, {"labels", labels}});
  auto o = dae_options();
  Dae dae(o);
  {  // a DAE whose residual is not zero (output_proj starts at zero): the loss comparison then tests every layer
    torch::NoGradGuard ng;
    for (auto& p : dae->named_parameters())
      if (p.key().rfind("output_proj", 0) == 0) p.value().normal_(0.0, 0.02);
  }
  auto y = torch::randn({dB, o.dim}) * 0.04;
  {  // power iterations until u, v are near the top singular vectors (random ones make σ̂ tiny and W/σ̂ huge)
    torch::NoGradGuard ng;
    dae->train();
    for (int i = 0; i < 50; ++i) dae->residual(y, torch::full({dB}, 0.01));
    dae->eval();
  }
  dae->set_sigma0(0.01);
  dae->save(D + "/dae");
  auto gp = step_generator(7, 0, 5);
  save_safetensors(D + "/sure_inputs.safetensors", {{"y", y}, {"probes", rademacher({K, dB, o.dim}, gp)}});
  return json{{"dir", D}};
}

json cmd_t5_step() {
  const int64_t steps = arg("steps", 3, 1), B = arg("batch", 64, 1), T = arg("label-len", 32, 1);
  const std::string p = sarg("precision", "fp32");
  if (p != "fp32" && p != "bf16") throw std::invalid_argument("--precision must be fp32 or bf16");
  set_matmul_precision(p == "bf16" ? Precision::bf16 : Precision::fp32);
  Inverter m(InverterImpl::load(dir() + "/inverter"));
  double loss_eval = 0;
  {  // the teacher-forced CE on the stored e and labels, dropout off: the same number the peer computes
    const auto in = load_safetensors(dir() + "/inputs.safetensors");
    torch::NoGradGuard ng;
    m->eval();
    auto l = m->loss(in.at("e_gen"), in.at("labels"));
    loss_eval = (l.sum / static_cast<double>(l.count)).item<double>();
  }
  m->train();
  FusedAdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-4));
  torch::manual_seed(1);
  std::vector<double> times, losses;
  Usage u;
  for (int64_t s = 0; s < steps + 1; ++s) {
    if (s == 1) perf_ctl("enable");
    auto e = torch::randn({B, m->cfg.dim});
    auto labels = torch::randint(2, m->cfg.t5.vocab_size, {B, T}, torch::kLong);
    const double t0 = now();
    opt.zero_grad();
    auto l = m->loss(e, labels);
    auto mean = l.sum / static_cast<double>(l.count);
    mean.backward();
    opt.step();
    if (s > 0) times.push_back(now() - t0);
    losses.push_back(mean.item<double>());
  }
  perf_ctl("disable");
  json j{{"times", times}, {"losses", losses}, {"loss_eval", loss_eval}, {"precision", precision_name(matmul_precision())},
         {"fused_adamw", opt.last_step_fused()}};
  u.fill(j);
  return j;
}

json cmd_t5_generate() {
  const int64_t steps = arg("steps", 3, 1), T = arg("label-len", 32, 1);
  Inverter m(InverterImpl::load(dir() + "/inverter"));
  m->eval();
  auto e = load_safetensors(dir() + "/inputs.safetensors").at("e_gen");
  GenerateOptions g;
  g.max_length = g.min_length = T + 1;  // counts the start token; eos forbidden, every row decodes T tokens
  g.num_beams = arg("beams", 1, 1);
  g.no_repeat_ngram_size = arg("no-repeat-ngram", 0, 0);
  g.repetition_penalty = std::stod(sarg("repetition-penalty", "1.0"));
  std::vector<double> times;
  std::vector<std::vector<int64_t>> ids;
  Usage u;
  for (int64_t s = 0; s < steps + 1; ++s) {
    if (s == 1) perf_ctl("enable");
    const double t0 = now();
    auto seq = m->generate(e, g);
    if (s > 0) times.push_back(now() - t0);
    if (s == 0) {
      seq = seq.contiguous();
      for (int64_t r = 0; r < seq.size(0); ++r)
        ids.emplace_back(seq[r].data_ptr<int64_t>(), seq[r].data_ptr<int64_t>() + seq.size(1));
    }
  }
  perf_ctl("disable");
  json j{{"times", times}, {"ids", ids}, {"decoding", describe_decoding(g)}, {"tokens", T}};
  u.fill(j);
  return j;
}

json cmd_sure() {
  const int64_t steps = arg("steps", 3, 1);
  Dae dae = Dae::load(dir() + "/dae");  // eval mode
  const auto in = load_safetensors(dir() + "/sure_inputs.safetensors");
  const auto& y = in.at("y");
  const auto& probes = in.at("probes");
  const int64_t B = y.size(0), d = y.size(1), K = probes.size(0);
  SureOptions so;
  so.probes = K;
  auto sigma = torch::full({B}, 0.01);
  const auto ev = sure_loss(dae, y, sigma, probes, {}, so);
  json j{{"loss_eval", ev.loss.item<double>()}, {"sq_eval", ev.sq.item<double>()}, {"div_eval", ev.div.item<double>()}};
  dae->train();
  FusedAdamW opt(dae->parameters(), torch::optim::AdamWOptions(1e-3));
  const double p = dae->options().dropout;
  std::vector<double> times, losses;
  Usage u;
  for (int64_t s = 0; s < steps + 1; ++s) {
    if (s == 1) perf_ctl("enable");
    const double t0 = now();
    auto gp = step_generator(1, s, 3);
    auto z = rademacher({K, B, d}, gp);
    std::vector<at::Tensor> masks;
    for (int64_t i = 0; i < dae->options().depth; ++i)
      masks.push_back((torch::rand({B, dae->mask_width()}) >= p).to(torch::kFloat32) / (1.0 - p));
    opt.zero_grad();
    auto t = sure_loss(dae, y, sigma, z, masks, so);
    t.loss.backward();
    opt.step();
    if (s > 0) times.push_back(now() - t0);
    losses.push_back(t.loss.item<double>());
  }
  perf_ctl("disable");
  j["times"] = times, j["losses"] = losses, j["batch"] = B, j["dim"] = d, j["probes"] = K;
  u.fill(j);
  return j;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string malloc_mode = configure_allocator();
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::cerr << "usage: bench_peers save|t5-step|t5-generate|sure --dir DIR [--key value ...] (bench/peers.cpp)\n";
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) g_args[std::string(argv[i]).substr(2)] = argv[i + 1];
  torch::set_num_threads(static_cast<int>(arg("threads", 1)));
  json j;
  if (cmd == "save") j = cmd_save();
  else if (cmd == "t5-step") j = cmd_t5_step();
  else if (cmd == "t5-generate") j = cmd_t5_generate();
  else if (cmd == "sure") j = cmd_sure();
  else {
    std::cerr << "bench_peers: unknown subcommand " << cmd << "\n";
    return 2;
  }
  j["cmd"] = cmd, j["impl"] = "daei C++", j["malloc"] = malloc_mode, j["threads"] = torch::get_num_threads();
  j["torch"] = TORCH_VERSION;
  std::cout << j.dump() << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_peers: error: " << e.what() << "\n";
  return 1;
}
