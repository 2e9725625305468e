#include "eval/release_report.h"

#include <cmath>
#include <limits>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/error.h"

namespace daei {

Recall recall_at(const at::Tensor& noisy, const at::Tensor& clean) {
  namespace F = torch::nn::functional;
  const auto q = F::normalize(noisy, F::NormalizeFuncOptions().dim(1));
  const auto c = F::normalize(clean, F::NormalizeFuncOptions().dim(1));
  const auto sims = torch::matmul(q, c.t());
  const auto own = sims.diagonal().unsqueeze(1);
  const auto rank = (sims > own).sum(1);  // rows scoring strictly higher than the true one
  return {(rank < 1).to(torch::kFloat64).mean().item<double>(), (rank < 10).to(torch::kFloat64).mean().item<double>()};
}

double gaussian_channel_bits(const std::vector<double>& eigenvalues, double sigma) {
  DAEI_CHECK(sigma >= 0 && std::isfinite(sigma), "channel bits: σ {} must be a finite number >= 0", sigma);
  double bits = 0;
  for (double l : eigenvalues) {
    if (l <= 0) continue;  // a direction the inputs never move in carries nothing (rounding leaves tiny negatives)
    if (sigma == 0) return std::numeric_limits<double>::infinity();
    bits += 0.5 * std::log2(1.0 + l / (sigma * sigma));
  }
  return bits;
}

std::vector<double> covariance_eigenvalues(const at::Tensor& rows) {
  DAEI_CHECK(rows.dim() == 2 && rows.size(0) > 1, "covariance: rows {} must be [n > 1, d]", c10::str(rows.sizes()));
  const auto x = rows.to(torch::kFloat64);
  const auto centred = x - x.mean(0, /*keepdim=*/true);
  const auto cov = torch::matmul(centred.t(), centred) / static_cast<double>(rows.size(0) - 1);
  const auto eig = torch::linalg_eigvalsh(cov, "L").flip(0).contiguous();  // ascending → largest first
  return {eig.data_ptr<double>(), eig.data_ptr<double>() + eig.numel()};
}

SigmaReport sigma_report(const at::Tensor& clean, const at::Tensor& unit_noise, const std::vector<double>& grid,
                         double min_recall_at1) {
  DAEI_CHECK(clean.dim() == 2 && clean.sizes() == unit_noise.sizes() && clean.size(0) > 1,
             "sigma report: clean {} and noise {} must be two equal [n > 1, d] matrices", c10::str(clean.sizes()),
             c10::str(unit_noise.sizes()));
  DAEI_CHECK(!grid.empty(), "sigma report: the σ grid is empty");
  SigmaReport r;
  r.min_recall_at1 = min_recall_at1;
  r.texts = clean.size(0);
  r.covariance_eigenvalues = covariance_eigenvalues(clean);
  for (double sigma : grid) {
    DAEI_CHECK(sigma >= 0 && std::isfinite(sigma), "sigma report: σ {} on the grid must be a finite number >= 0", sigma);
    const auto noisy = clean + sigma * unit_noise;
    SigmaPoint p{sigma, recall_at(noisy, clean),
                 torch::cosine_similarity(noisy, clean, 1).mean().item<double>(),
                 gaussian_channel_bits(r.covariance_eigenvalues, sigma)};
    if (p.recall.at1 >= min_recall_at1 && sigma > r.chosen) r.chosen = sigma;
    r.points.push_back(p);
  }
  return r;
}

std::string sigma_report_markdown(const SigmaReport& r, const std::string& embedder) {
  std::string md = fmt::format(
      "Release {}: each of {} test texts queries the clean set with its noisy embedding. Bits ≤: ½ Σ log2(1 + "
      "λ_i/σ²) over the eigenvalues λ of the clean embeddings' covariance, the most a noisy answer can carry about its "
      "clean embedding (and so about its text) whatever reads it; retrieving one text among {} takes {:.1f}.\n\n"
      "| σ | recall@1 | recall@10 | cos(noisy, clean) | bits ≤ | recall@1 ≥ {} |\n|---|---|---|---|---|---|\n",
      embedder, r.texts, r.texts, std::log2(static_cast<double>(r.texts)), r.min_recall_at1);
  for (const auto& p : r.points)
    md += fmt::format("| {} | {:.4f} | {:.4f} | {:.4f} | {:.1f} | {} |\n", p.sigma, p.recall.at1, p.recall.at10,
                      p.mean_cos, p.bits_bound, p.recall.at1 >= r.min_recall_at1 ? "yes" : "no");
  md += r.chosen >= 0 ? fmt::format("\nChosen σ = {} (the largest on the grid with recall@1 ≥ {}).\n", r.chosen,
                                    r.min_recall_at1)
                      : fmt::format("\nNo σ on the grid keeps recall@1 ≥ {}.\n", r.min_recall_at1);
  return md;
}

nlohmann::json sigma_report_json(const SigmaReport& r, const std::string& embedder) {
  nlohmann::json j{{"embedder", embedder}, {"texts", r.texts}, {"min_recall_at_1", r.min_recall_at1}};
  j["chosen_sigma"] = r.chosen >= 0 ? nlohmann::json(r.chosen) : nlohmann::json(nullptr);
  for (const auto& p : r.points)
    j["points"].push_back({{"sigma", p.sigma}, {"recall_at_1", p.recall.at1}, {"recall_at_10", p.recall.at10},
                           {"cos_noisy_clean", p.mean_cos},
                           {"bits_bound", std::isfinite(p.bits_bound) ? nlohmann::json(p.bits_bound) : nlohmann::json()}});
  j["covariance_eigenvalues"] = r.covariance_eigenvalues;
  return j;
}

}  // namespace daei
