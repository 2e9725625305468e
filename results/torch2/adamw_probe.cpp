#include <torch/torch.h>
#include <cmath>
#include <cstdio>
int main() {
  torch::manual_seed(0);
  const int n = 100000;
  auto p = torch::randn({n});
  auto p0 = p.clone();
  p.set_requires_grad(true);
  torch::optim::AdamW opt({p}, torch::optim::AdamWOptions(1e-2).weight_decay(0.1).betas({0.9, 0.999}).eps(1e-8));
  std::vector<float> m(n, 0), v(n, 0), x(p0.data_ptr<float>(), p0.data_ptr<float>() + n);
  std::vector<float> mA = m, vA = v, xA = x;
  const double lr = 1e-2, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (int step = 1; step <= 3; ++step) {
    auto g = torch::randn({n});
    p.mutable_grad() = g.clone();
    opt.step();
    const float* gp = g.data_ptr<float>();
    double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    float decay = 1 - lr * wd, a1 = 1 - b1, a2 = 1 - b2, sbc2 = std::sqrt(bc2), st = -lr / bc1;
    int diffs[8] = {0};
    for (int i = 0; i < n; ++i) {
      // candidate 0: 1.13 order with fma moments
      float xi = x[i] * decay; float mi = std::fma(gp[i], a1, m[i] * (float)b1); float vi = std::fma(a2 * gp[i], gp[i], v[i] * (float)b2);
      float d = std::sqrt(vi) / sbc2 + (float)eps;
      float c0 = xi + (st * mi) / d;
      float c1 = std::fma(st, mi / d, xi);
      float c2 = xi + st * (mi / d);
      // lerp for m: m + w*(g-m)
      float ml = m[i] + a1 * (gp[i] - m[i]);
      float c3x = xi + (st * ml) / (std::sqrt(vi) / sbc2 + (float)eps);
      float d4 = std::sqrt(vi) * (1.0f / sbc2) + (float)eps;
      float c4 = xi + (st * mi) / d4;
      float d5 = std::fma(std::sqrt(vi), 1.0f / sbc2, (float)eps);
      float c5 = xi + (st * mi) / d5;
      float d6 = std::sqrt(vi) / sbc2 + (float)eps;
      float c6 = std::fma(st * mi, 1.0f / d6, xi);
      float c7 = xi + (st * mi) * (1.0f / d6);
      float got = p.data_ptr<float>()[i];
      diffs[4] += got != c4; diffs[5] += got != c5; diffs[6] += got != c6; diffs[7] += got != c7;
      if (got != c0 && diffs[0] < 3) std::printf("  i %d x %.9g decay %.9g xi %.9g m %.9g d %.9g st %.9g got %.9g c0 %.9g | alt: %.9g %.9g\n", i, x[i], decay, xi, mi, d, st, got, c0, (float)((double)xi + (double)st*mi/d), x[i]*decay + (st*mi)/d);
      diffs[0] += got != c0; diffs[1] += got != c1; diffs[2] += got != c2; diffs[3] += got != c3x;
      x[i] = got; m[i] = mi; v[i] = vi;  // follow torch's p; our m, v
    }
    auto& st_ = static_cast<torch::optim::AdamWParamState&>(*opt.state().begin()->second);
    int dm = 0, dv = 0;
    for (int i = 0; i < n; ++i) { dm += st_.exp_avg().data_ptr<float>()[i] != m[i]; dv += st_.exp_avg_sq().data_ptr<float>()[i] != v[i];
      m[i] = st_.exp_avg().data_ptr<float>()[i]; v[i] = st_.exp_avg_sq().data_ptr<float>()[i]; }
    std::printf("step %d: p mismatches c0 %d c1 %d c2 %d c3 %d c4 %d c5 %d c6 %d c7 %d | m %d v %d\n", step, diffs[0], diffs[1], diffs[2], diffs[3], diffs[4], diffs[5], diffs[6], diffs[7], dm, dv);
  }
}
