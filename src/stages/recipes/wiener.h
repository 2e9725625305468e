// The linear reference denoiser: the Wiener filter estimated from noisy rows alone (C_z = C_y − σ²I clipped to PSD;
// no clean data, no training), so it is inside the threat model. The DAE table scores it beside the DAE, and the
// wiener-inverter baseline (issue 22 item 3) trains an inverter on its output.
#pragma once
#include <string>
#include <torch/types.h>

#include "data/dataset.h"

namespace daei {

// x̂ = mean + (y − mean)·Wᵀ (W symmetric).
struct LinearEstimator {
  at::Tensor mean, W;  // float64 [d], [d, d]
  at::Tensor apply(const at::Tensor& y) const;  // float32 in, float32 out
  void save(const std::string& path, double sigma) const;  // safetensors "mean", "W"; metadata sigma
  // Refuses a file without mean and W, with mismatched shapes, non-finite values, or (dim > 0) another dimension.
  static LinearEstimator load(const std::string& path, int64_t dim = 0);
};

// Mean and covariance of a NoisyDataset's rows, accumulated in float64 chunks; max_rows 0 = all.
void row_moments(const NoisyDataset& data, int64_t max_rows, at::Tensor& mean, at::Tensor& cov);
// W = V diag(λ_z / (λ_z + σ²)) Vᵀ from the signal covariance's eigen-decomposition (λ clipped at 0).
LinearEstimator wiener_from_signal_cov(const at::Tensor& mean, const at::Tensor& cov_signal, double sigma);
LinearEstimator wiener_from_noisy(const at::Tensor& mean_y, const at::Tensor& cov_y, double sigma);

}  // namespace daei
