// Stein's unbiased risk estimate for the residual DAE (paper eqs. 12–15; reference notes §2.2–2.3).
//   L = mean_b [ ‖r(y)‖² + 2σ²·div r(y) ]      (the constant −dσ² is dropped, so L can be negative)
//   E[L] − dσ² = E‖h(y) − x‖²  for y = x + σ·n.
// div r by Hutchinson's estimator, mean_k z_kᵀ J z_k with K Rademacher probes, each zᵀJ a vector–Jacobian product
// with a second-order graph on ONE forward pass ("hutchinson"), or by Monte-Carlo finite differences,
// mean_k z_kᵀ (r(y + ε z_k) − r(y)) / ε with ε = fd_eps·σ, the K+1 inputs in one batched forward ("fd").
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <torch/types.h>

#include "model/attack/dae.h"

namespace daei {

struct SureOptions {
  std::string divergence = "hutchinson";  // hutchinson | fd
  int64_t probes = 5;                     // K
  double fd_eps = 0.01;                   // finite-difference step, relative to σ

  // The stage1.sure.* keys (stage 3 reads them too), listed once (core/fields.h).
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("divergence", s.divergence), v("probes", s.probes), v("fd_eps", s.fd_eps);
  }
};

struct SureTerms {
  at::Tensor loss;  // scalar, mean over the batch, differentiable
  at::Tensor sq;    // mean ‖r‖² (detached)
  at::Tensor div;   // mean divergence estimate (detached)
};

// y [B, d] noisy (no grad needed), sigma [B], probes [K, B, d] (±1), masks: the DAE's dropout masks for these rows
// (may be empty). The DAE must be in the mode the caller wants (train: dropout active, power iteration runs once).
SureTerms sure_loss(Dae& dae, const at::Tensor& y, const at::Tensor& sigma, const at::Tensor& probes,
                    const std::vector<at::Tensor>& masks, const SureOptions& opt);

// The noise-level schedule of reference notes §2.3. sigma0 is the level the data was released at.
//   fixed:       σ = σ₀ always.
//   log_uniform: σ ~ LogUniform[σ₀, upper(t)], upper decaying log-linearly from sigma_max to σ₀ over the first
//                decay_fraction of the steps, then σ₀; the batch gets extra noise √(σ² − σ₀²)·N(0, I).
struct SigmaSchedule {
  std::string mode = "log_uniform";
  double sigma0 = 0.01;
  double sigma_max = 0.02;
  double decay_fraction = 0.2;
  int64_t total_steps = 1;

  double upper(int64_t step) const;
  double draw(int64_t step, double u01) const;  // u01 uniform in [0, 1)
};

// Counter-based per-step randomness, independent of world size and of resume: a torch CPU generator seeded from
// (seed, step, tag). Tensors are drawn for the whole global batch and sliced by global row position, so N ranks on
// B/N rows draw exactly what 1 rank on B rows draws.
at::Generator step_generator(uint64_t seed, int64_t step, uint64_t tag);
at::Tensor rademacher(at::IntArrayRef shape, at::Generator& gen);

}  // namespace daei
