#include "stages/recipes/sure.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace daei {

SureTerms sure_loss(Dae& dae, const at::Tensor& y_in, const at::Tensor& sigma, const at::Tensor& probes,
                    const std::vector<at::Tensor>& masks, const SureOptions& opt) {
  const int64_t B = y_in.size(0), K = probes.size(0);
  DAEI_CHECK(K >= 1 && probes.size(1) == B && probes.size(2) == y_in.size(1), "sure: probes {} for a batch {}",
             c10::str(probes.sizes()), c10::str(y_in.sizes()));
  DAEI_CHECK(sigma.dim() == 1 && sigma.size(0) == B, "sure: sigma must be [B]");
  at::Tensor r, div;
  if (opt.divergence == "hutchinson") {
    auto y = y_in.detach().requires_grad_(true);
    r = dae->residual(y, sigma, masks);
    div = torch::zeros({B}, r.options());
    for (int64_t k = 0; k < K; ++k) {
      auto z = probes[k];
      auto g = torch::autograd::grad({r}, {y}, {z}, /*retain_graph=*/true, /*create_graph=*/true)[0];
      div = div + (z * g).sum(1);
    }
    div = div / static_cast<double>(K);
  } else if (opt.divergence == "fd") {
    auto eps = (sigma * opt.fd_eps).unsqueeze(1);  // [B, 1]
    std::vector<at::Tensor> ys{y_in.detach()};
    for (int64_t k = 0; k < K; ++k) ys.push_back(y_in.detach() + eps * probes[k]);
    std::vector<at::Tensor> rep_masks;
    for (const auto& m : masks) rep_masks.push_back(m.repeat({K + 1, 1}));
    auto r_all = dae->residual(torch::cat(ys, 0), sigma.repeat({K + 1}), rep_masks).view({K + 1, B, -1});
    r = r_all[0];
    div = ((probes * (r_all.narrow(0, 1, K) - r.unsqueeze(0))).sum(2) / eps.squeeze(1).unsqueeze(0)).mean(0);
  } else {
    DAEI_FAIL("stage1.sure.divergence must be hutchinson or fd, got '{}'", opt.divergence);
  }
  auto sq = r.pow(2).sum(1);
  auto per = sq + 2.0 * sigma.pow(2) * div;
  return SureTerms{per.mean(), sq.mean().detach(), div.mean().detach()};
}

double SigmaSchedule::upper(int64_t step) const {
  if (mode == "fixed") return sigma0;
  const double span = std::max(1.0, decay_fraction * static_cast<double>(total_steps));
  const double f = std::min(1.0, static_cast<double>(step) / span);
  return std::exp((1.0 - f) * std::log(sigma_max) + f * std::log(sigma0));
}

double SigmaSchedule::draw(int64_t step, double u01) const {
  if (mode == "fixed") return sigma0;
  DAEI_CHECK(mode == "log_uniform", "sigma schedule must be fixed or log_uniform, got '{}'", mode);
  const double hi = upper(step);
  return std::exp(std::log(sigma0) + u01 * (std::log(hi) - std::log(sigma0)));
}

at::Generator step_generator(uint64_t seed, int64_t step, uint64_t tag) {
  const uint64_t s = splitmix64(splitmix64(seed ^ 0x5155524553ULL) + static_cast<uint64_t>(step) * 0x9E37ULL) ^
                     splitmix64(tag + 0x7A11ULL);
  return at::make_generator<at::CPUGeneratorImpl>(s);
}

at::Tensor rademacher(at::IntArrayRef shape, at::Generator& gen) {
  return torch::randint(0, 2, shape, gen, torch::kFloat32) * 2.0 - 1.0;
}

}  // namespace daei
