// The release report (daei release-report): recall of hand-made queries, the chosen σ, and the channel bound on the
// bits a noisy answer carries, against closed forms.
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "eval/release_report.h"

namespace daei {
namespace {

TEST(ReleaseReport, RecallCountsRowsScoringAboveTheOwnOne) {
  const auto clean = torch::tensor({{1.f, 0.f}, {0.f, 1.f}, {-1.f, 0.f}});
  // query 0 hits its own row; query 1 points nearer row 0; query 2 hits its own
  const auto noisy = torch::tensor({{1.f, 0.1f}, {1.f, 0.5f}, {-1.f, -0.2f}});
  const Recall r = recall_at(noisy, clean);
  EXPECT_DOUBLE_EQ(r.at1, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.at10, 1.0);
}

TEST(ReleaseReport, ChannelBitsOfAKnownSpectrum) {
  // ½ log2(1 + 3/1) + ½ log2(1 + 1/1) = 1 + 0.5 at σ 1; non-positive eigenvalues carry nothing
  EXPECT_NEAR(gaussian_channel_bits({3.0, 1.0, 0.0, -1e-18}, 1.0), 1.5, 1e-12);
  EXPECT_NEAR(gaussian_channel_bits({3.0}, 0.5), 0.5 * std::log2(13.0), 1e-12);
  EXPECT_TRUE(std::isinf(gaussian_channel_bits({3.0}, 0.0)));
  EXPECT_EQ(gaussian_channel_bits({0.0}, 0.0), 0.0);
  EXPECT_THROW(gaussian_channel_bits({1.0}, -0.1), std::exception);
}

TEST(ReleaseReport, CovarianceEigenvaluesOfHandMadeRows) {
  // rows ±a e1, ±b e2 (mean 0): covariance diag(2a²/3, 2b²/3) with the n − 1 denominator, largest first
  const double a = 0.3, b = 0.1;
  const auto rows = torch::tensor({{a, 0.0}, {-a, 0.0}, {0.0, b}, {0.0, -b}}, torch::kFloat64);
  const auto eig = covariance_eigenvalues(rows);
  ASSERT_EQ(eig.size(), 2u);
  EXPECT_NEAR(eig[0], 2 * a * a / 3, 1e-15);
  EXPECT_NEAR(eig[1], 2 * b * b / 3, 1e-15);
  // a shift of every row changes nothing (the covariance is centred)
  const auto shifted = covariance_eigenvalues(rows + 5.0);
  EXPECT_NEAR(shifted[0], eig[0], 1e-12);
  EXPECT_NEAR(shifted[1], eig[1], 1e-12);
}

TEST(ReleaseReport, EveryPointCarriesTheBoundAndTheChosenSigmaKeepsTheBar) {
  torch::manual_seed(3);
  const auto clean = torch::nn::functional::normalize(torch::randn({200, 16}),
                                                      torch::nn::functional::NormalizeFuncOptions().dim(1));
  const auto unit = torch::randn({200, 16});
  const SigmaReport r = sigma_report(clean, unit, {0.01, 0.1, 1.0, 10.0}, 0.9);
  ASSERT_EQ(r.points.size(), 4u);
  EXPECT_EQ(r.covariance_eigenvalues.size(), 16u);
  for (size_t i = 0; i < r.points.size(); ++i) {
    EXPECT_NEAR(r.points[i].bits_bound, gaussian_channel_bits(r.covariance_eigenvalues, r.points[i].sigma), 1e-12);
    if (i > 0) {
      EXPECT_LT(r.points[i].bits_bound, r.points[i - 1].bits_bound);  // more noise, fewer bits
    }
  }
  EXPECT_EQ(r.points[0].recall.at1, 1.0);  // σ 0.01 on unit vectors 16-d apart: every query finds its row
  EXPECT_LT(r.points[3].recall.at1, 0.9);  // σ 10: chance
  int chosen_points = 0;  // the chosen σ is the largest grid point keeping the bar
  for (const auto& p : r.points) {
    if (p.sigma == r.chosen) {
      ++chosen_points;
      EXPECT_GE(p.recall.at1, 0.9);
    }
    if (p.sigma > r.chosen) {
      EXPECT_LT(p.recall.at1, 0.9);
    }
  }
  EXPECT_EQ(chosen_points, 1);
  const auto j = sigma_report_json(r, "toy");
  EXPECT_NEAR(j["points"][1]["bits_bound"].get<double>(), r.points[1].bits_bound, 1e-12);
  EXPECT_EQ(j["covariance_eigenvalues"].size(), 16u);
  EXPECT_NE(sigma_report_markdown(r, "toy").find("| bits ≤ |"), std::string::npos);
}

}  // namespace
}  // namespace daei
