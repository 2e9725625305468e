// The fused AdamW element loop (adamw_kernel.h). The order of operations is libtorch 1.13's AdamW::step, one tensor
// op a line there, one statement a line here:
//   p.mul_(1 - lr·wd)                              p = p · decay_factor            (when wd != 0)
//   exp_avg.mul_(β1).add_(g, 1 - β1)               m = m·β1 + (1-β1)·g
//   exp_avg_sq.mul_(β2).addcmul_(g, g, 1 - β2)     v = v·β2 + ((1-β2)·g)·g
//   denom = (exp_avg_sq.sqrt() / √bc2).add_(eps)   d = √v / √bc2 + eps
//   p.addcdiv_(exp_avg, denom, -lr/bc1)            p = p + ((-lr/bc1)·m) / d
// Each libtorch op rounds to float in between; so does each statement here (the file is built with
// -ffp-contract=off). Where libtorch's vectorised kernels fuse a multiply-add (the two moment updates), std::fma.
#include "stages/loop/adamw_kernel.h"

#include <cmath>

namespace daei {

namespace {

template <bool kFma>
__attribute__((always_inline)) inline void update_loop(float* __restrict p, const float* __restrict g,
                                                       float* __restrict m, float* __restrict v, int64_t n,
                                                       const AdamWScalars& s) {
  const bool decay = s.decay;
  const float wd = s.decay_factor, b1 = s.beta1, a1 = s.one_minus_beta1, b2 = s.beta2, a2 = s.one_minus_beta2;
  const float bc2 = s.sqrt_bias_correction2, eps = s.eps, step = s.neg_step_size;
  for (int64_t i = 0; i < n; ++i) {
    float x = p[i];
    if (decay) x = x * wd;
    const float gi = g[i];
    float mi = m[i] * b1;
    float vi = v[i] * b2;
    if constexpr (kFma) {
      mi = std::fma(gi, a1, mi);
      vi = std::fma(a2 * gi, gi, vi);
    } else {
      mi = mi + a1 * gi;
      vi = vi + (a2 * gi) * gi;
    }
    float d = std::sqrt(vi) / bc2;
    d = d + eps;
    x = x + (step * mi) / d;
    p[i] = x;
    m[i] = mi;
    v[i] = vi;
  }
}

#if defined(__x86_64__)
// libtorch fuses only where the CPU has FMA (its AVX2 and AVX512 kernels); this clone is compiled for that CPU.
__attribute__((target("avx2,fma"))) void update_fma(float* p, const float* g, float* m, float* v, int64_t n,
                                                    const AdamWScalars& s) {
  update_loop<true>(p, g, m, v, n, s);
}
#else
void update_fma(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  update_loop<true>(p, g, m, v, n, s);
}
#endif

void update_plain(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  update_loop<false>(p, g, m, v, n, s);
}

}  // namespace

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s,
                  bool fused_multiply_add) {
  if (fused_multiply_add)
    update_fma(p, g, m, v, n, s);
  else
    update_plain(p, g, m, v, n, s);
}

}  // namespace daei
