// The fused AdamW step (fused_adamw.h): libtorch's bookkeeping (state creation, step counts, bias corrections, in
// double as there), then one element pass a parameter (adamw_kernel.cpp), the parameters split into chunks over the
// intra-op threads.
#include "stages/loop/fused_adamw.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "stages/loop/adamw_kernel.h"

namespace daei {

namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;


bool plain_float(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kFloat && t.layout() == at::kStrided &&
         t.is_contiguous();
}

// One piece of the pass: a run of one parameter's elements with that parameter's scalars.
struct Segment {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t n;
  AdamWScalars s;
};
constexpr int64_t kSegmentElements = 1 << 16;  // small enough to balance threads, large enough to amortise a call

}  // namespace

bool libtorch_fuses_multiply_add() {
  static const bool fused = [] {
    // (1 + 2^-12)² - 1 = 2^-11 + 2^-24 exactly with one rounding; 2^-11 when the product is rounded first (a tie,
    // to even). 64 elements so the vectorised kernel, the one that fuses, computes them.
    const float x = 1.f + std::ldexp(1.f, -12);
    auto a = torch::full({64}, -1.f);
    a.add_(torch::full({64}, x), x);
    return a[0].item<float>() != std::ldexp(1.f, -11);
  }();
  return fused;
}

bool FusedAdamW::can_fuse() const {
  std::unordered_set<const void*> seen;  // a parameter listed twice is updated twice in order: libtorch's step
  for (const auto& group : param_groups_) {
    if (static_cast<const AdamWOptions&>(group.options()).amsgrad()) return false;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& g = p.grad();
      if (!plain_float(p) || !plain_float(g) || g.sizes() != p.sizes()) return false;
      if (!seen.insert(p.data_ptr()).second) return false;
      auto it = state_.find(param_state_key<StateKey>(p));
      if (it == state_.end()) continue;
      const auto& st = static_cast<const AdamWParamState&>(*it->second);
      for (const auto& t : {st.exp_avg(), st.exp_avg_sq()})
        if (!plain_float(t) || t.numel() != p.numel()) return false;
    }
  }
  return true;
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  last_step_fused_ = closure == nullptr && can_fuse();
  if (!last_step_fused_) return AdamW::step(std::move(closure));
  torch::NoGradGuard no_grad;
  std::vector<Segment> segments;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state_[param_state_key<StateKey>(p)];
      if (!slot) {
        auto fresh = std::make_unique<AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& st = static_cast<AdamWParamState&>(*slot);
      st.step(st.step() + 1);
      // Every scalar as libtorch forms it: in double, rounded to float when the kernel takes it.
      const double bias_correction1 = 1 - std::pow(beta1, st.step());
      const double bias_correction2 = 1 - std::pow(beta2, st.step());
      AdamWScalars s;
      s.decay = o.weight_decay() != 0;
      s.decay_factor = static_cast<float>(1 - o.lr() * o.weight_decay());
      s.beta1 = static_cast<float>(beta1);
      s.one_minus_beta1 = static_cast<float>(1 - beta1);
      s.beta2 = static_cast<float>(beta2);
      s.one_minus_beta2 = static_cast<float>(1 - beta2);
      s.sqrt_bias_correction2 = static_cast<float>(std::sqrt(bias_correction2));
      s.eps = static_cast<float>(o.eps());
      s.neg_step_size = static_cast<float>(-(o.lr() / bias_correction1));
      float* pp = p.data_ptr<float>();
      const float* gp = p.grad().data_ptr<float>();
      float* mp = st.exp_avg().data_ptr<float>();
      float* vp = st.exp_avg_sq().data_ptr<float>();
      for (int64_t off = 0; off < p.numel(); off += kSegmentElements)
        segments.push_back({pp + off, gp + off, mp + off, vp + off, std::min(kSegmentElements, p.numel() - off), s});
      // As an in-place op would: an autograd graph that saved the old values now refuses to run backward.
      torch::autograd::impl::bump_version(p);
    }
  }
  const bool fma = libtorch_fuses_multiply_add();
  at::parallel_for(0, static_cast<int64_t>(segments.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Segment& sg = segments[i];
      adamw_update(sg.p, sg.g, sg.m, sg.v, sg.n, sg.s, fma);
    }
  });
  return {};
}

}  // namespace daei
