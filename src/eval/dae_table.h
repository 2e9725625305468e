// The DAE table (paper Table V plus two references it lacks): on each evaluation split, MSE (mean over rows of
// ‖x̂ − x‖²) and cosine to the clean embedding for
//   noisy input | the DAE h(y, σ₀) | the Wiener filter from noisy data only (C_z = C_y − σ²I clipped to PSD, from the
//   training split's noisy rows: no clean data, no training) | the oracle Wiener filter (clean covariance and mean
//   of a *different* split than the one scored — the training split's clean rows when the reference cache exists,
//   else val for test and test for val — a reference outside the threat model; fitted on the scored rows it would
//   be a projection onto them when rows ≤ dimension).
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>
#include <string>
#include <torch/types.h>
#include <nlohmann/json_fwd.hpp>

#include "data/dataset.h"
#include "model/attack/dae.h"
#include "stages/recipes/wiener.h"

namespace daei {

// The oracle: the same filter from clean rows' covariance (a reference outside the threat model).
LinearEstimator wiener_oracle(const at::Tensor& clean, double sigma);

struct DaeRow {
  int64_t n = 0;
  double mse_noisy = 0, mse_dae = 0, mse_wiener_noisy_only = 0, mse_wiener_oracle = 0;
  double cos_noisy = 0, cos_dae = 0, cos_wiener_noisy_only = 0, cos_wiener_oracle = 0;
  // 95 % bootstrap intervals over rows (1000 resamples, seed 1) of the MSE cuts 1 − ΣMSE(x)/ΣMSE(y), and of the
  // paired difference DAE cut − noisy-only Wiener cut (the same resampled rows for both).
  std::pair<double, double> cut_dae_ci, cut_wiener_ci, cut_dae_minus_wiener_ci;
};
// The bootstrap interval of 1 − Σa/Σb over rows (a, b per-row squared errors), resampling rows.
std::pair<double, double> mse_cut_ci(const std::vector<double>& a, const std::vector<double>& b, int resamples = 1000,
                                     uint64_t seed = 1);
// The same for (1 − Σa/Σy) − (1 − Σw/Σy) = (Σw − Σa)/Σy on the same resampled rows.
std::pair<double, double> mse_cut_diff_ci(const std::vector<double>& a, const std::vector<double>& w,
                                          const std::vector<double>& y, int resamples = 1000, uint64_t seed = 1);
DaeRow dae_row(Dae& dae, double sigma0, const LinearEstimator& wiener_noisy, const LinearEstimator& oracle,
               const at::Tensor& clean, const at::Tensor& noisy);
nlohmann::json to_json(const DaeRow& r);
std::string format_table(const std::map<std::string, DaeRow>& rows, double sigma);

}  // namespace daei
