// bench_adamw_fused: FusedAdamW::step against libtorch's AdamW::step over one inverter's parameters (bench/runner.py
// entry adamw_fused). One process, both optimizers on their own copy of the parameters and the same gradients; the
// steps alternate (fused, libtorch, fused, ...) after two warm-up steps each (state allocation), so load changes hit
// both alike. Prints one JSON line: {"times": fused s/step, "ref_times": libtorch s/step, "params", "tensors"}.
//   bench_adamw_fused [--steps N] [--dim 100] [--repeat 16] [--vocab 8000] [--d-model 128] [--d-kv 32] [--heads 4]
//                     [--d-ff 512] [--layers 2] [--threads 1]
#include <torch/torch.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "core/allocator.h"
#include "model/attack/inverter.h"
#include "stages/loop/fused_adamw.h"

using namespace daei;
using namespace daei::bench;

namespace {

// Two parameter groups as the Trainer builds them for stage 3 (different lr and weight decay).
template <class Optim>
std::unique_ptr<Optim> make_optim(const std::vector<at::Tensor>& params) {
  const size_t half = params.size() / 2;
  std::vector<torch::optim::OptimizerParamGroup> pg;
  pg.emplace_back(std::vector<at::Tensor>(params.begin(), params.begin() + half),
                  std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3).weight_decay(0.01)));
  pg.emplace_back(std::vector<at::Tensor>(params.begin() + half, params.end()),
                  std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(2e-4).weight_decay(0.0)));
  return std::make_unique<Optim>(pg, torch::optim::AdamWOptions(1e-3));
}

std::vector<at::Tensor> copy_with_grads(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) {
    auto c = p.detach().clone().requires_grad_(true);
    c.mutable_grad() = torch::randn_like(c) * 1e-2;
    out.push_back(c);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  configure_allocator();  // as the daei program and bench_entries: libtorch's temporaries depend on it
  for (int i = 1; i + 1 < argc; i += 2) g_args[std::string(argv[i]).substr(2)] = argv[i + 1];
  torch::set_num_threads(static_cast<int>(arg("threads", 1, 1)));
  const int64_t steps = arg("steps", 20, 1);
  InverterConfig c;
  c.dim = arg("dim", 100, 1);
  c.repeat = arg("repeat", 16, 1);
  c.t5.vocab_size = arg("vocab", 8000, 8);
  c.t5.d_model = arg("d-model", 128, 1);
  c.t5.d_kv = arg("d-kv", 32, 1);
  c.t5.num_heads = arg("heads", 4, 1);
  c.t5.d_ff = arg("d-ff", 512, 1);
  c.t5.num_layers = c.t5.num_decoder_layers = arg("layers", 2, 1);
  c.t5.feed_forward_proj = "relu";
  torch::manual_seed(0);
  Inverter m(c);
  const auto params = m->parameters();
  auto pf = copy_with_grads(params), pr = copy_with_grads(params);
  auto fused = make_optim<FusedAdamW>(pf);
  auto ref = make_optim<torch::optim::AdamW>(pr);
  std::vector<double> tf, tr;
  for (int64_t s = 0; s < steps + 2; ++s) {
    double t0 = now();
    fused->step();
    const double f = now() - t0;
    t0 = now();
    ref->step();
    const double r = now() - t0;
    if (s >= 2) tf.push_back(f), tr.push_back(r);
  }
  if (!fused->last_step_fused()) throw std::runtime_error("the fused step fell back to libtorch's");
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  nlohmann::json j{{"times", tf}, {"ref_times", tr}, {"params", n}, {"tensors", params.size()},
                   {"threads", torch::get_num_threads()}, {"impl", "daei C++"}, {"cmd", "adamw-fused"}};
  std::cout << j.dump() << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_adamw_fused: error: " << e.what() << "\n";
  return 1;
}
