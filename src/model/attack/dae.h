// The residual denoising autoencoder of DAEI (paper §III-A; reference notes §2.1):
//   h(y, σ) = y + r(y, σ)
//   r: LayerNorm → input_proj d→H → depth × pre-norm block (LN (+cond) → fc1 H→2H → GELU → dropout → fc2 2H→H,
//      residual) → output_proj H→d, zero-initialised so that h starts as the identity.
//   cond: features [log σ, sin(log σ·f_k), cos(log σ·f_k)], f_k = exp(linspace(ln 1, ln 1000, 16)) (33 values)
//         → Linear(33→H) → SiLU → Linear(H→H); the same vector is added inside every block.
// Spectral normalisation (one power iteration per training forward, as torch.nn.utils.spectral_norm) on
// input_proj, fc1 and fc2. Parameter names follow PyTorch's: `weight_orig` (parameter), `weight_u`, `weight_v`
// (buffers, saved in checkpoints).
// On disk a DAE is a folder: model.safetensors (those names) + dae.json (DaeOptions and the release noise level σ₀).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <string>
#include <vector>

namespace daei {

struct DaeOptions {
  int64_t dim = 768;        // embedding dimension d
  int64_t hidden = 1024;    // H
  int64_t depth = 3;
  double dropout = 0.1;
  bool spectral_norm = true;
  bool sigma_cond = true;
  int64_t power_iterations = 1;

  // The one list of fields: dae.json and the `dae:` config section are read and written through it.
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("dim", s.dim), v("hidden", s.hidden), v("depth", s.depth), v("dropout", s.dropout);
    v("spectral_norm", s.spectral_norm), v("sigma_cond", s.sigma_cond), v("power_iterations", s.power_iterations);
  }
};

// A Linear layer whose weight is divided by its largest singular value, estimated by power iteration.
class SNLinearImpl : public torch::nn::Module {
 public:
  SNLinearImpl(int64_t in, int64_t out, bool spectral_norm, int64_t power_iterations = 1);
  at::Tensor forward(const at::Tensor& x);
  // The weight used in forward (W / σ̂ with spectral norm; W otherwise). In training mode with spectral norm this
  // runs the power iteration first (updating u, v), as PyTorch does.
  at::Tensor weight();
  // σ̂ = uᵀ W v from the stored vectors, without iterating.
  double sigma_estimate() const;
  bool normalized() const { return sn_; }
  // Whether a training-mode forward runs the power iteration (on by default). Gradient accumulation turns it off
  // for all but the first micro-step, so that A micro-steps update u, v exactly as one big batch does.
  void set_power_iteration(bool on) { iterate_ = on; }
  at::Tensor raw_weight() const { return w_; }

 private:
  bool sn_, iterate_ = true;
  int64_t iters_;
  at::Tensor w_, b_, u_, v_;
};
TORCH_MODULE(SNLinear);

// One pre-norm residual block: x + fc2(drop(GELU(fc1(LN(x) + cond)))).
class DaeBlockImpl : public torch::nn::Module {
 public:
  DaeBlockImpl(int64_t hidden, double dropout, bool spectral_norm, int64_t power_iterations);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cond, const at::Tensor& mask);
  torch::nn::LayerNorm norm{nullptr};
  SNLinear fc1{nullptr}, fc2{nullptr};
  double p;
};
TORCH_MODULE(DaeBlock);

class Dae;

class DaeImpl : public torch::nn::Module {
 public:
  explicit DaeImpl(const DaeOptions& o);
  // r(y, σ): y [B, d], sigma [B] (or a 0-d tensor, expanded). dropout_masks: optional, one [B, 2H] mask per block,
  // already scaled by 1/(1-p) (see make_dropout_masks); used only in training mode. Without them training mode
  // draws dropout from torch's default generator.
  at::Tensor residual(const at::Tensor& y, const at::Tensor& sigma, const std::vector<at::Tensor>& dropout_masks = {});
  // h(y, σ) = y + r(y, σ).
  at::Tensor forward(const at::Tensor& y, const at::Tensor& sigma, const std::vector<at::Tensor>& dropout_masks = {});
  at::Tensor condition(const at::Tensor& sigma, int64_t batch);  // [B, H]
  const DaeOptions& options() const { return opt_; }
  std::vector<SNLinear> normalized_layers() const;  // input_proj and every fc1, fc2 (for tests)
  void set_power_iteration(bool on);                 // on every normalised layer
  int64_t mask_width() const { return 2 * opt_.hidden; }
  // σ₀: the release noise level the DAE is trained at and called with (dae.json's "sigma0"); 0 until set.
  double sigma0() const { return sigma0_; }
  void set_sigma0(double sigma0) { sigma0_ = sigma0; }
  // Writes dir/model.safetensors + dir/dae.json (the folder Dae::load reads).
  void save(const std::string& dir) const;
  // Writes dir/dae.json alone (a checkpoint's, whose weights the Trainer saves with the other modules').
  void save_config(const std::string& dir) const;

 private:
  DaeOptions opt_;
  double sigma0_ = 0;
  torch::nn::LayerNorm norm_{nullptr};
  SNLinear input_proj_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::Sequential sigma_cond_{nullptr};
  torch::nn::Linear output_proj_{nullptr};
  at::Tensor freqs_;  // buffer [16]
};

// TORCH_MODULE(Dae) written out, to hold the loaders of the DAE's folder.
class Dae : public torch::nn::ModuleHolder<DaeImpl> {
 public:
  using torch::nn::ModuleHolder<DaeImpl>::ModuleHolder;
  using Impl = DaeImpl;
  // A DAE built from dae.json in `dir` (its options and σ₀) with the weights of dir/model.safetensors, in eval mode.
  static Dae load(const std::string& dir);
  // load, refusing a DAE trained at another σ₀ than `data_sigma`, the σ of the noisy data it will denoise.
  static Dae load_for(const std::string& dir, double data_sigma);
};

}  // namespace daei
