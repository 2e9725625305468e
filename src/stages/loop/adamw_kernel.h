// The element loop of the fused AdamW (fused_adamw.h): one pass over a parameter's values, its gradient and its two
// moment buffers, with libtorch 1.13's AdamW arithmetic in float. Plain C++, no torch include: it is compiled with
// its own flags (src/CMakeLists.txt: -O3 to vectorise, -fno-math-errno so sqrt vectorises, -ffp-contract=off so the
// compiler fuses no multiply-add that libtorch does not fuse).
#pragma once
#include <cstdint>

namespace daei {

// The per-parameter scalars, each already rounded to float as libtorch's kernels round their Scalar arguments.
struct AdamWScalars {
  bool decay = false;              // weight_decay != 0
  float decay_factor = 1.f;        // 1 - lr·weight_decay
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float sqrt_bias_correction2 = 1.f;  // √(1 - β2^step)
  float eps = 1e-8f;
  float neg_step_size = -1e-3f;       // -lr / (1 - β1^step)
};

// p, m (exp_avg) and v (exp_avg_sq) updated in place over n elements; g is read only.
// fused_multiply_add: libtorch's vectorised CPU kernels (AVX2/AVX512) compute exp_avg's add_ and exp_avg_sq's
// addcmul_ as one fused multiply-add each, its DEFAULT kernels as a multiply then an add; pass what libtorch does
// (libtorch_fuses_multiply_add() in fused_adamw.cpp) to get its results bit for bit.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s,
                  bool fused_multiply_add);

}  // namespace daei
