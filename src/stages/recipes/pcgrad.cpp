#include "stages/recipes/pcgrad.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace daei {

PcgradStats pcgrad_project(std::vector<at::Tensor>& g_ce, const std::vector<at::Tensor>& g_sure, bool whole) {
  torch::NoGradGuard ng;
  PcgradStats st;
  std::vector<size_t> both;
  for (size_t i = 0; i < g_ce.size() && i < g_sure.size(); ++i)
    if (g_ce[i].defined() && g_sure[i].defined()) both.push_back(i);
  st.tensors = static_cast<int64_t>(both.size());
  if (both.empty()) return st;
  // Inner products and norms in float64, gathered in one host synchronisation.
  std::vector<at::Tensor> dots, ss, cc;
  for (size_t i : both) {
    auto a = g_ce[i].reshape({-1}).to(torch::kFloat64), b = g_sure[i].reshape({-1}).to(torch::kFloat64);
    dots.push_back(a.dot(b));
    ss.push_back(b.dot(b));
    cc.push_back(a.dot(a));
  }
  auto D = torch::stack(dots).cpu(), S = torch::stack(ss).cpu(), C = torch::stack(cc).cpu();
  const double dot = D.sum().item<double>(), s2 = S.sum().item<double>(), c2 = C.sum().item<double>();
  st.cosine = (s2 > 0 && c2 > 0) ? dot / std::sqrt(s2 * c2) : 0.0;
  if (whole) {
    if (dot < 0 && s2 > 0) {
      st.conflicts = 1;
      for (size_t i : both) g_ce[i].sub_(g_sure[i], dot / s2);
    }
    return st;
  }
  auto d = D.accessor<double, 1>(), s = S.accessor<double, 1>();
  for (size_t k = 0; k < both.size(); ++k) {
    const auto kk = static_cast<int64_t>(k);
    if (d[kk] < 0 && s[kk] > 0) {
      g_ce[both[k]].sub_(g_sure[both[k]], d[kk] / s[kk]);
      ++st.conflicts;
    }
  }
  return st;
}

std::map<std::string, double> combine_sure_ce(std::vector<std::vector<at::Tensor>>& sets,
                                              const std::vector<at::Tensor>& params, size_t n_first,
                                              const std::string& mode) {
  std::vector<at::Tensor> ce_dae(sets[1].begin() + n_first, sets[1].end());
  std::vector<at::Tensor> sure_dae(sets[0].begin() + n_first, sets[0].end());
  PcgradStats st;
  if (mode != "off") st = pcgrad_project(ce_dae, sure_dae, mode == "whole");
  torch::NoGradGuard ng;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor g;
    if (i < n_first) {
      g = sets[1][i];
    } else {
      const auto& a = sure_dae[i - n_first];
      const auto& c = ce_dae[i - n_first];
      g = a.defined() && c.defined() ? a + c : (a.defined() ? a : c);
    }
    if (g.defined()) const_cast<at::Tensor&>(params[i]).mutable_grad() = g;
  }
  const double denom = mode == "whole" ? 1.0 : static_cast<double>(std::max<int64_t>(1, st.tensors));
  return {{"pcgrad_conflict_frac", static_cast<double>(st.conflicts) / denom}, {"pcgrad_cos", st.cosine}};
}

double lambda_schedule(int64_t step, int64_t warmup, double lambda_max) {
  if (warmup <= 0) return lambda_max;
  return lambda_max * std::min(1.0, static_cast<double>(step) / static_cast<double>(warmup));
}

}  // namespace daei
