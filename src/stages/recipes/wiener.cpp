#include "stages/recipes/wiener.h"

#include <torch/torch.h>

#include "core/error.h"
#include "core/safetensors.h"

namespace daei {

at::Tensor LinearEstimator::apply(const at::Tensor& y) const {
  auto y64 = y.to(torch::kFloat64);
  return (mean + torch::matmul(y64 - mean, W.t())).to(torch::kFloat32);
}

void LinearEstimator::save(const std::string& path, double sigma) const {
  save_safetensors(path, {{"mean", mean}, {"W", W}}, {{"sigma", fmt::format("{:.17g}", sigma)}});
}

LinearEstimator LinearEstimator::load(const std::string& path, int64_t dim) {
  auto t = load_safetensors(path);
  DAEI_CHECK(t.count("mean") && t.count("W"), "{}: not a linear estimator (needs tensors mean and W)", path);
  LinearEstimator e{t.at("mean").to(torch::kFloat64), t.at("W").to(torch::kFloat64)};
  const int64_t d = e.mean.numel();
  DAEI_CHECK(e.mean.dim() == 1 && e.W.dim() == 2 && e.W.size(0) == d && e.W.size(1) == d,
             "{}: mean {} and W {} do not match", path, c10::str(e.mean.sizes()), c10::str(e.W.sizes()));
  DAEI_CHECK(dim <= 0 || d == dim, "{}: a filter for {}-d embeddings, the run's are {}-d", path, d, dim);
  DAEI_CHECK(torch::isfinite(e.W).all().item<bool>() && torch::isfinite(e.mean).all().item<bool>(),
             "{}: non-finite values in the filter", path);
  return e;
}

void row_moments(const NoisyDataset& data, int64_t max_rows, at::Tensor& mean, at::Tensor& cov) {
  const int64_t n = max_rows > 0 ? std::min(max_rows, data.size()) : data.size();
  DAEI_CHECK(n >= 2, "Wiener filter: need at least 2 rows, have {}", n);
  const int64_t d = data.dim(), chunk = 8192;
  auto s = torch::zeros({d}, torch::kFloat64), ss = torch::zeros({d, d}, torch::kFloat64);
  for (int64_t i = 0; i < n; i += chunk) {
    std::vector<int64_t> idx;
    for (int64_t j = i; j < std::min(n, i + chunk); ++j) idx.push_back(j);
    auto y = data.noisy(idx).to(torch::kFloat64);
    s += y.sum(0);
    ss += torch::matmul(y.t(), y);
  }
  mean = s / static_cast<double>(n);
  cov = (ss - static_cast<double>(n) * torch::outer(mean, mean)) / static_cast<double>(n - 1);
}

LinearEstimator wiener_from_signal_cov(const at::Tensor& mean, const at::Tensor& cov_signal, double sigma) {
  auto [lam, V] = torch::linalg_eigh(0.5 * (cov_signal + cov_signal.t()));
  lam = lam.clamp_min(0.0);
  auto gain = lam / (lam + sigma * sigma);
  return LinearEstimator{mean, torch::matmul(V * gain.unsqueeze(0), V.t())};
}

LinearEstimator wiener_from_noisy(const at::Tensor& mean_y, const at::Tensor& cov_y, double sigma) {
  const int64_t d = cov_y.size(0);
  // C_z = C_y − σ²I, clipped to PSD through its eigenvalues.
  return wiener_from_signal_cov(mean_y, cov_y - sigma * sigma * torch::eye(d, torch::kFloat64), sigma);
}

}  // namespace daei
