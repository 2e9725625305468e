#include "eval/dae_table.h"

#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <random>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace daei {

LinearEstimator wiener_oracle(const at::Tensor& clean, double sigma) {
  auto x = clean.to(torch::kFloat64);
  auto mean = x.mean(0);
  auto xc = x - mean;
  auto cov = torch::matmul(xc.t(), xc) / static_cast<double>(std::max<int64_t>(1, x.size(0) - 1));
  return wiener_from_signal_cov(mean, cov, sigma);
}

namespace {
// Percentile interval of stat(resampled row indices), numpy's linear quantiles.
std::pair<double, double> row_bootstrap(std::size_t n, int resamples, uint64_t seed,
                                        const std::function<double(const std::vector<std::size_t>&)>& stat) {
  DAEI_CHECK(n > 0 && resamples > 1, "DAE table: bootstrap of {} rows, {} resamples", n, resamples);
  std::mt19937_64 rng(seed);
  const uint64_t threshold = (0 - static_cast<uint64_t>(n)) % n;  // unbiased draws, as metrics::bootstrap_ci
  std::vector<std::size_t> idx(n);
  std::vector<double> v(static_cast<std::size_t>(resamples));
  for (auto& x : v) {
    for (auto& i : idx) {
      uint64_t r;
      do r = rng(); while (r < threshold);
      i = static_cast<std::size_t>(r % n);
    }
    x = stat(idx);
  }
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {
    const double h = p * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(h);
    return lo + 1 >= v.size() ? v.back() : v[lo] + (h - static_cast<double>(lo)) * (v[lo + 1] - v[lo]);
  };
  return {q(0.025), q(0.975)};
}
double sum_at(const std::vector<double>& x, const std::vector<std::size_t>& idx) {
  double s = 0;
  for (auto i : idx) s += x[i];
  return s;
}
std::vector<double> row_sq_error(const at::Tensor& e, const at::Tensor& clean) {
  auto d = (e.to(torch::kFloat64) - clean.to(torch::kFloat64)).pow(2).sum(1).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}
}  // namespace

std::pair<double, double> mse_cut_ci(const std::vector<double>& a, const std::vector<double>& b, int resamples,
                                     uint64_t seed) {
  DAEI_CHECK(a.size() == b.size(), "DAE table: {} and {} rows", a.size(), b.size());
  return row_bootstrap(a.size(), resamples, seed,
                       [&](const std::vector<std::size_t>& idx) { return 1.0 - sum_at(a, idx) / sum_at(b, idx); });
}

std::pair<double, double> mse_cut_diff_ci(const std::vector<double>& a, const std::vector<double>& w,
                                          const std::vector<double>& y, int resamples, uint64_t seed) {
  DAEI_CHECK(a.size() == y.size() && w.size() == y.size(), "DAE table: rows differ");
  return row_bootstrap(y.size(), resamples, seed, [&](const std::vector<std::size_t>& idx) {
    return (sum_at(w, idx) - sum_at(a, idx)) / sum_at(y, idx);
  });
}

DaeRow dae_row(Dae& dae, double sigma0, const LinearEstimator& wiener_noisy, const LinearEstimator& oracle,
               const at::Tensor& clean, const at::Tensor& noisy) {
  DAEI_CHECK(clean.sizes() == noisy.sizes() && clean.dim() == 2, "DAE table: clean {} and noisy {} rows differ",
             c10::str(clean.sizes()), c10::str(noisy.sizes()));
  torch::NoGradGuard ng;
  dae->eval();
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < noisy.size(0); i += 1024) {
    auto y = noisy.narrow(0, i, std::min<int64_t>(1024, noisy.size(0) - i)).to(torch::kFloat32);
    parts.push_back(dae->forward(y, torch::full({y.size(0)}, sigma0)));
  }
  auto den = torch::cat(parts, 0);
  auto mse = [&](const at::Tensor& e) { return (e.to(torch::kFloat64) - clean.to(torch::kFloat64)).pow(2).sum(1).mean().item<double>(); };
  auto cos = [&](const at::Tensor& e) {
    return torch::cosine_similarity(e.to(torch::kFloat64), clean.to(torch::kFloat64), 1).mean().item<double>();
  };
  DaeRow r;
  r.n = clean.size(0);
  auto wn = wiener_noisy.apply(noisy), wo = oracle.apply(noisy);
  r.mse_noisy = mse(noisy), r.cos_noisy = cos(noisy);
  r.mse_dae = mse(den), r.cos_dae = cos(den);
  r.mse_wiener_noisy_only = mse(wn), r.cos_wiener_noisy_only = cos(wn);
  r.mse_wiener_oracle = mse(wo), r.cos_wiener_oracle = cos(wo);
  const auto ey = row_sq_error(noisy, clean), ed = row_sq_error(den, clean), ew = row_sq_error(wn, clean);
  r.cut_dae_ci = mse_cut_ci(ed, ey);
  r.cut_wiener_ci = mse_cut_ci(ew, ey);
  r.cut_dae_minus_wiener_ci = mse_cut_diff_ci(ed, ew, ey);
  return r;
}

nlohmann::json to_json(const DaeRow& r) {
  auto red = [&](double m) { return r.mse_noisy > 0 ? 1.0 - m / r.mse_noisy : 0.0; };
  return {{"n", r.n},
          {"mse_noisy", r.mse_noisy},
          {"mse_dae", r.mse_dae},
          {"mse_wiener_noisy_only", r.mse_wiener_noisy_only},
          {"mse_wiener_oracle", r.mse_wiener_oracle},
          {"cos_noisy", r.cos_noisy},
          {"cos_dae", r.cos_dae},
          {"cos_wiener_noisy_only", r.cos_wiener_noisy_only},
          {"cos_wiener_oracle", r.cos_wiener_oracle},
          {"mse_reduction_dae", red(r.mse_dae)},
          {"mse_reduction_wiener_noisy_only", red(r.mse_wiener_noisy_only)},
          {"mse_reduction_wiener_oracle", red(r.mse_wiener_oracle)},
          {"mse_reduction_dae_ci", {r.cut_dae_ci.first, r.cut_dae_ci.second}},
          {"mse_reduction_wiener_noisy_only_ci", {r.cut_wiener_ci.first, r.cut_wiener_ci.second}},
          {"mse_reduction_dae_minus_wiener_ci", {r.cut_dae_minus_wiener_ci.first, r.cut_dae_minus_wiener_ci.second}}};
}

std::string format_table(const std::map<std::string, DaeRow>& rows, double sigma) {
  std::string s = fmt::format("DAE table (σ = {})\n{:<6} {:>6}  {:<44} {:>10} {:>9} {:>8}\n", sigma, "split", "n",
                              "system", "MSE", "cut", "cos");
  for (const auto& [split, r] : rows) {
    auto line = [&](const char* name, double m, double c) {
      s += fmt::format("{:<6} {:>6}  {:<44} {:>10.5f} {:>8.1f}% {:>8.4f}\n", split, r.n, name, m,
                       100.0 * (1.0 - m / r.mse_noisy), c);
    };
    line("noisy input", r.mse_noisy, r.cos_noisy);
    line("DAE (stage 1, SURE)", r.mse_dae, r.cos_dae);
    line("Wiener filter, noisy data only", r.mse_wiener_noisy_only, r.cos_wiener_noisy_only);
    line("Wiener filter, oracle (clean cov.; reference)", r.mse_wiener_oracle, r.cos_wiener_oracle);
  }
  return s;
}

}  // namespace daei
