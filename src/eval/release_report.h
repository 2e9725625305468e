// The defender's σ choice, made from the release alone before any attack (issue 63): for each σ on a grid, how well
// a noisy embedding still retrieves its own text among the test texts (recall@1, recall@10) and how close it stays to
// the clean one (mean cosine). The release's σ is the largest on the grid whose recall@1 stays >= the utility bar.
// Beside them, a ceiling on what any attack can read: the bits a noisy answer y = x + N(0, σ²I) carries about the
// clean embedding x are at most ½ Σ log2(1 + λ_i/σ²), λ the eigenvalues of x's covariance (a Gaussian x of that
// covariance attains it; every other distribution of that covariance carries less). By data processing no read-out of
// y (a DAE, a bag of words, an inverter) learns more about the text than that.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

namespace daei {

struct Recall {
  double at1 = 0, at10 = 0;
};
// recall@1 and @10 of noisy queries against the clean set (cosine); query i's answer is row i.
Recall recall_at(const at::Tensor& noisy, const at::Tensor& clean);

struct SigmaPoint {
  double sigma = 0;
  Recall recall;
  double mean_cos = 0;  // mean cos(noisy, clean)
  double bits_bound = 0;  // gaussian_channel_bits at this σ (infinite at σ 0)
};

struct SigmaReport {
  std::vector<SigmaPoint> points;
  double min_recall_at1 = 0.9;
  int64_t texts = 0;
  // the largest σ whose recall@1 >= min_recall_at1; -1 when none is
  double chosen = -1;
  // eigenvalues of the clean embeddings' sample covariance (n − 1 denominator), largest first
  std::vector<double> covariance_eigenvalues;
};

// ½ Σ log2(1 + λ_i/σ²): the capacity of the Gaussian channel y = x + N(0, σ²I) for inputs of covariance eigenvalues λ;
// infinite at σ 0 (unless every λ is 0). Estimated from a sample covariance the value is biased low (log det is
// concave), by little where λ_i/σ² is small.
double gaussian_channel_bits(const std::vector<double>& eigenvalues, double sigma);
// The sample covariance's eigenvalues of rows [n > 1, d], largest first (float64).
std::vector<double> covariance_eigenvalues(const at::Tensor& rows);

// clean [n, d]; unit_noise [n, d] of N(0, 1) (the release's noise at σ = 1, scaled by each σ of the grid).
SigmaReport sigma_report(const at::Tensor& clean, const at::Tensor& unit_noise, const std::vector<double>& grid,
                         double min_recall_at1);
std::string sigma_report_markdown(const SigmaReport& r, const std::string& embedder);
nlohmann::json sigma_report_json(const SigmaReport& r, const std::string& embedder);

}  // namespace daei
