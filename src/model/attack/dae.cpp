#include "model/attack/dae.h"

#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/safetensors.h"

namespace daei {
namespace F = torch::nn::functional;

namespace {
at::Tensor normalize(const at::Tensor& x) { return x / x.norm().clamp_min(1e-12); }

std::string dae_json_text(const DaeOptions& o, double sigma0) { return json_fields_text(o, {{"sigma0", sigma0}}); }
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Spectrally normalised linear layer (torch.nn.utils.spectral_norm semantics, dim 0, eps 1e-12).

SNLinearImpl::SNLinearImpl(int64_t in, int64_t out, bool spectral_norm, int64_t power_iterations)
    : sn_(spectral_norm), iters_(power_iterations) {
  // nn.Linear's default initialisation: kaiming_uniform(a=√5) for W, U(±1/√in) for b.
  auto w = torch::empty({out, in});
  torch::nn::init::kaiming_uniform_(w, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  auto b = torch::empty({out}).uniform_(-bound, bound);
  w_ = register_parameter(sn_ ? "weight_orig" : "weight", w);
  b_ = register_parameter("bias", b);
  if (sn_) {
    u_ = register_buffer("weight_u", normalize(torch::randn({out})));
    v_ = register_buffer("weight_v", normalize(torch::randn({in})));
  }
}

at::Tensor SNLinearImpl::weight() {
  if (!sn_) return w_;
  if (is_training() && iterate_) {
    torch::NoGradGuard no_grad;
    auto w = w_.detach();
    for (int64_t i = 0; i < iters_; ++i) {
      v_.copy_(normalize(torch::mv(w.t(), u_)));
      u_.copy_(normalize(torch::mv(w, v_)));
    }
  }
  // Clones so that a later power iteration (a second forward before backward) does not modify saved tensors.
  auto u = u_.clone(), v = v_.clone();
  auto sigma = torch::dot(u, torch::mv(w_, v));
  return w_ / sigma;
}

double SNLinearImpl::sigma_estimate() const {
  torch::NoGradGuard no_grad;
  return torch::dot(u_, torch::mv(w_, v_)).item<double>();
}

at::Tensor SNLinearImpl::forward(const at::Tensor& x) { return torch::nn::functional::linear(x, weight(), b_); }

// ---------------------------------------------------------------------------------------------------------------

DaeBlockImpl::DaeBlockImpl(int64_t hidden, double dropout, bool spectral_norm, int64_t power_iterations)
    : p(dropout) {
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})));
  fc1 = register_module("fc1", SNLinear(hidden, 2 * hidden, spectral_norm, power_iterations));
  fc2 = register_module("fc2", SNLinear(2 * hidden, hidden, spectral_norm, power_iterations));
}

at::Tensor DaeBlockImpl::forward(const at::Tensor& x, const at::Tensor& cond, const at::Tensor& mask) {
  auto h = norm->forward(x);
  if (cond.defined()) h = h + cond;
  h = torch::gelu(fc1->forward(h));
  if (is_training() && p > 0) h = mask.defined() ? h * mask : torch::dropout(h, p, /*train=*/true);
  return x + fc2->forward(h);
}

// ---------------------------------------------------------------------------------------------------------------

DaeImpl::DaeImpl(const DaeOptions& o) : opt_(o) {
  DAEI_CHECK(o.dim > 0 && o.hidden > 0 && o.depth >= 0, "dae: bad sizes (dim {}, hidden {}, depth {})", o.dim,
             o.hidden, o.depth);
  DAEI_CHECK(o.dropout >= 0 && o.dropout < 1, "dae.dropout must be in [0, 1), got {}", o.dropout);
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
  input_proj_ = register_module("input_proj", SNLinear(o.dim, o.hidden, o.spectral_norm, o.power_iterations));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.depth; ++i)
    blocks_->push_back(DaeBlock(o.hidden, o.dropout, o.spectral_norm, o.power_iterations));
  if (o.sigma_cond) {
    sigma_cond_ = register_module("sigma_cond", torch::nn::Sequential(torch::nn::Linear(33, o.hidden), torch::nn::SiLU(),
                                                                      torch::nn::Linear(o.hidden, o.hidden)));
    freqs_ = register_buffer("freqs", torch::exp(torch::linspace(0.0, std::log(1000.0), 16)));
  }
  output_proj_ = register_module("output_proj", torch::nn::Linear(o.hidden, o.dim));
  torch::NoGradGuard no_grad;
  output_proj_->weight.zero_();
  output_proj_->bias.zero_();
}

at::Tensor DaeImpl::condition(const at::Tensor& sigma, int64_t batch) {
  auto s = sigma.to(freqs_.device(), torch::kFloat32).reshape({-1});
  if (s.numel() == 1) s = s.expand({batch});
  DAEI_CHECK(s.size(0) == batch, "dae: sigma has {} values for a batch of {}", s.size(0), batch);
  auto ls = torch::log(s).unsqueeze(1);  // [B, 1]
  auto arg = ls * freqs_.unsqueeze(0);   // [B, 16]
  auto feats = torch::cat({ls, torch::sin(arg), torch::cos(arg)}, 1);
  return sigma_cond_->forward(feats);
}

at::Tensor DaeImpl::residual(const at::Tensor& y, const at::Tensor& sigma, const std::vector<at::Tensor>& masks) {
  DAEI_CHECK(y.dim() == 2 && y.size(1) == opt_.dim, "dae: input must be [B, {}], got {}", opt_.dim, c10::str(y.sizes()));
  DAEI_CHECK(masks.empty() || static_cast<int64_t>(masks.size()) == opt_.depth, "dae: {} dropout masks for depth {}",
             masks.size(), opt_.depth);
  at::Tensor cond;
  if (opt_.sigma_cond) cond = condition(sigma, y.size(0));
  auto x = input_proj_->forward(norm_->forward(y));
  for (int64_t i = 0; i < opt_.depth; ++i)
    x = blocks_[i]->as<DaeBlock>()->forward(x, cond, masks.empty() ? at::Tensor() : masks[i]);
  return output_proj_->forward(x);
}

at::Tensor DaeImpl::forward(const at::Tensor& y, const at::Tensor& sigma, const std::vector<at::Tensor>& masks) {
  return y + residual(y, sigma, masks);
}

std::vector<SNLinear> DaeImpl::normalized_layers() const {
  std::vector<SNLinear> out{input_proj_};
  for (const auto& b : *blocks_) {
    auto* blk = b->as<DaeBlockImpl>();
    out.push_back(blk->fc1);
    out.push_back(blk->fc2);
  }
  return out;
}

}  // namespace daei

namespace daei {
void DaeImpl::set_power_iteration(bool on) {
  for (auto& l : normalized_layers()) l->set_power_iteration(on);
}

// ---------------------------------------------------------------------------------------------------------------
// The DAE's folder.

Dae Dae::load(const std::string& dir) {
  const auto j = nlohmann::json::parse(read_file(dir + "/dae.json"));
  DaeOptions o;
  DaeOptions::fields(o, [&](const char* key, auto&) {
    DAEI_CHECK(j.contains(key), "{}/dae.json: no '{}'", dir, key);  // every field written by save
  });
  read_json_fields(o, j, dir + "/dae.json");
  Dae dae(o);
  const std::string weights = dir + "/model.safetensors";
  load_module_state({{"", dae.ptr()}}, load_safetensors(weights), weights);
  dae->eval();
  dae->set_sigma0(j.at("sigma0").get<double>());
  return dae;
}

Dae Dae::load_for(const std::string& dir, double data_sigma) {
  Dae dae = load(dir);
  const double sigma0 = dae->sigma0();
  DAEI_CHECK(std::abs(sigma0 - data_sigma) <= 1e-6 * std::max(1e-12, sigma0),
             "{}: the DAE was trained at σ {} but the training cache is at σ {}", dir, sigma0, data_sigma);
  return dae;
}

void DaeImpl::save(const std::string& dir) const {
  save_module_folder(dir, *this, "dae.json", dae_json_text(opt_, sigma0_));
}

void DaeImpl::save_config(const std::string& dir) const {
  write_file_atomic(dir + "/dae.json", dae_json_text(opt_, sigma0_));
}
}  // namespace daei
