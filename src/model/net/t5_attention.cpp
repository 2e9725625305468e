// The fused T5 attention kernels (t5_kernels.h): attention_core (training: one sgemm per (batch, head), dropout
// with the dropouts' mask) and attention_decode (incremental decoding: AVX2 dot products per query).
#include "model/net/t5_kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <dlfcn.h>
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "model/net/t5_dropout_mask.h"

namespace daei {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using t5_mask::apply_mask;
using t5_mask::new_keep_mask;

// ------------------------------------------------------------------------------------------------ attention core

// The process's BLAS sgemm_ (libtorch's own, through libblas.so.3), called directly: per (batch, head) matrix with
// the row stride of the (B, T, H·d_kv) projection layout, so no transposing copies and none of at::bmm's per-matrix
// select/dispatch (at::bmm on CPU loops over its batch calling mm, with 3 selects a matrix).
using SgemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);
SgemmFn sgemm_fn() {
  static SgemmFn f = reinterpret_cast<SgemmFn>(dlsym(RTLD_DEFAULT, "sgemm_"));
  return f;
}

// Row-major C (M×N, ldc) = op(A) · op(B), op = transpose when the flag is set (column-major BLAS on the transposes).
void gemm_rm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
             int ldc) {
  const float one = 1.0f, zero = 0.0f;
  const char a = ta ? 'T' : 'N', b = tb ? 'T' : 'N';
  sgemm_fn()(&b, &a, &N, &M, &K, &one, B, &ldb, A, &lda, &zero, C, &ldc);
}

struct AttnDims {
  int64_t B, H, Tq, Tk, dk;
  int64_t ld() const { return H * dk; }
};

// For every (b, h): fn(b, h) with the work split over threads.
template <class F>
void for_heads(const AttnDims& d, F fn) {
  at::parallel_for(0, d.B * d.H, 16, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) fn(i / d.H, i % d.H);
  });
}

struct AttentionCoreFn : public torch::autograd::Function<AttentionCoreFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_in, const torch::Tensor& k_in,
                               const torch::Tensor& v_in, const torch::Tensor& bias, int64_t heads, double p,
                               bool train) {
    auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
    const AttnDims d{q.size(0), heads, q.size(1), k.size(1), q.size(2) / heads};
    const int ld = static_cast<int>(d.ld());
    auto S = torch::empty({d.B, d.H, d.Tq, d.Tk}, q.options());
    const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
    float* sp = S.data_ptr<float>();
    for_heads(d, [&](int64_t b, int64_t h) {  // S = Q Kᵀ (no 1/sqrt(d_kv) in T5)
      gemm_rm(false, true, d.Tq, d.Tk, d.dk, qp + (b * d.Tq * d.H + h) * d.dk, ld, kp + (b * d.Tk * d.H + h) * d.dk,
              ld, sp + (b * d.H + h) * d.Tq * d.Tk, d.Tk);
    });
    const bool has_bias = bias.numel() > 0;
    if (has_bias) S.add_(bias);
    auto P = at::_softmax(S, -1, false);
    torch::Tensor mask, Pd = P;
    const double scale = train && p > 0 ? 1.0 / (1.0 - p) : 1.0;
    if (train && p > 0) {
      mask = new_keep_mask(P, p);
      Pd = apply_mask(P, mask, scale);
    }
    auto out = torch::empty({d.B, d.Tq, d.ld()}, q.options());
    const float* pp = Pd.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for_heads(d, [&](int64_t b, int64_t h) {  // O = P V, written in the (B, Tq, H·d_kv) layout
      gemm_rm(false, false, d.Tq, d.dk, d.Tk, pp + (b * d.H + h) * d.Tq * d.Tk, d.Tk,
              vp + (b * d.Tk * d.H + h) * d.dk, ld, op + (b * d.Tq * d.H + h) * d.dk, ld);
    });
    ctx->save_for_backward({q, k, v, P, mask});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["bias_grad"] = has_bias && bias.requires_grad();
    ctx->saved_data["bias_sizes"] = bias.sizes().vec();
    return out;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto sv = ctx->get_saved_variables();
    const auto &q = sv[0], &k = sv[1], &v = sv[2], &P = sv[3], &mask = sv[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const AttnDims d{q.size(0), ctx->saved_data["heads"].toInt(), q.size(1), k.size(1), 0};
    const AttnDims dd{d.B, d.H, d.Tq, d.Tk, q.size(2) / d.H};
    const int ld = static_cast<int>(dd.ld());
    auto dO = grads[0].contiguous();
    const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>(),
                *gp = dO.data_ptr<float>();
    auto dPd = torch::empty_like(P);
    float* dpp = dPd.data_ptr<float>();
    auto Pd = mask.defined() ? apply_mask(P, mask, scale) : P;
    const float* pdp = Pd.data_ptr<float>();
    auto dV = torch::empty_like(v);
    float* dvp = dV.data_ptr<float>();
    for_heads(dd, [&](int64_t b, int64_t h) {
      const int64_t tq = (b * dd.Tq * dd.H + h) * dd.dk, tk = (b * dd.Tk * dd.H + h) * dd.dk,
                    m = (b * dd.H + h) * dd.Tq * dd.Tk;
      gemm_rm(false, true, dd.Tq, dd.Tk, dd.dk, gp + tq, ld, vp + tk, ld, dpp + m, dd.Tk);   // dPd = dO Vᵀ
      gemm_rm(true, false, dd.Tk, dd.dk, dd.Tq, pdp + m, dd.Tk, gp + tq, ld, dvp + tk, ld);  // dV = Pdᵀ dO
    });
    auto dP = mask.defined() ? apply_mask(dPd, mask, scale) : dPd;
    auto dS = at::_softmax_backward_data(dP, P, -1, P.scalar_type()).contiguous();
    const float* dsp = dS.data_ptr<float>();
    auto dQ = torch::empty_like(q), dK = torch::empty_like(k);
    float *dqp = dQ.data_ptr<float>(), *dkp = dK.data_ptr<float>();
    for_heads(dd, [&](int64_t b, int64_t h) {
      const int64_t tq = (b * dd.Tq * dd.H + h) * dd.dk, tk = (b * dd.Tk * dd.H + h) * dd.dk,
                    m = (b * dd.H + h) * dd.Tq * dd.Tk;
      gemm_rm(false, false, dd.Tq, dd.dk, dd.Tk, dsp + m, dd.Tk, kp + tk, ld, dqp + tq, ld);  // dQ = dS K
      gemm_rm(true, false, dd.Tk, dd.dk, dd.Tq, dsp + m, dd.Tk, qp + tq, ld, dkp + tk, ld);   // dK = dSᵀ Q
    });
    torch::Tensor dbias;
    if (ctx->saved_data["bias_grad"].toBool()) dbias = at::sum_to(dS, ctx->saved_data["bias_sizes"].toIntVector());
    return {dQ, dK, dV, dbias, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// No bias, or a float bias broadcastable to (B, H, Tq, Tk): what both attention kernels accept.
bool attention_bias_fits(const torch::Tensor& bias, const torch::Tensor& q, const torch::Tensor& k, int64_t heads) {
  if (!bias.defined()) return true;
  if (bias.scalar_type() != torch::kFloat || bias.dim() > 4) return false;
  const std::vector<int64_t> full{q.size(0), heads, q.size(1), k.size(1)};
  const int64_t off = 4 - bias.dim();
  for (int64_t i = 0; i < bias.dim(); ++i)
    if (bias.size(i) != 1 && bias.size(i) != full[static_cast<size_t>(off + i)]) return false;
  return true;
}
}  // namespace

bool attention_core_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& bias, int64_t heads) {
  if (!sgemm_fn() || !q.device().is_cpu() || q.scalar_type() != torch::kFloat || k.scalar_type() != torch::kFloat ||
      v.scalar_type() != torch::kFloat || q.dim() != 3 || k.dim() != 3 || v.sizes() != k.sizes() ||
      q.size(0) != k.size(0) || q.size(2) != k.size(2) || heads <= 0 || q.size(2) % heads != 0)
    return false;
  if (!attention_bias_fits(bias, q, k, heads)) return false;
  const int64_t big = int64_t{1} << 30;  // BLAS takes int dimensions
  return q.size(1) < big && k.size(1) < big && q.size(2) < big;
}

torch::Tensor attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& bias, int64_t heads, double p, bool train) {
  DAEI_CHECK(attention_core_supported(q, k, v, bias, heads), "attention_core: unsupported shapes or dtypes");
  DAEI_CHECK(p >= 0.0 && p < 1.0, "attention_core: dropout p must be in [0, 1), got {}", p);
  // An undefined tensor cannot be an autograd input in libtorch 1.13: no bias travels as an empty tensor.
  return AttentionCoreFn::apply(q, k, v, bias.defined() ? bias : torch::empty({0}, q.options()), heads, p, train);
}

// ------------------------------------------------------------------------------------------------ decoding attention

namespace {
float dot_generic(const float* x, const float* y, int64_t n) {
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) a0 += x[i] * y[i], a1 += x[i + 1] * y[i + 1], a2 += x[i + 2] * y[i + 2], a3 += x[i + 3] * y[i + 3];
  for (; i < n; ++i) a0 += x[i] * y[i];
  return (a0 + a1) + (a2 + a3);
}
void axpy_generic(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
__attribute__((target("avx2,fma"))) float dot_avx2(const float* x, const float* y, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  float r = _mm_cvtss_f32(s);
  for (; i < n; ++i) r += x[i] * y[i];
  return r;
}
__attribute__((target("avx2,fma"))) void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}
bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
}  // namespace

bool attention_decode_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& bias, int64_t heads) {
  if (!q.device().is_cpu() || q.scalar_type() != torch::kFloat || k.scalar_type() != torch::kFloat ||
      v.scalar_type() != torch::kFloat || q.dim() != 3 || k.dim() != 3 || v.sizes() != k.sizes() ||
      q.size(0) != k.size(0) || q.size(2) != k.size(2) || heads <= 0 || q.size(2) % heads != 0 || k.size(1) == 0 ||
      k.stride(2) != 1 || v.stride(2) != 1)
    return false;
  return attention_bias_fits(bias, q, k, heads);
}

torch::Tensor attention_decode(const torch::Tensor& q_in, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& bias, int64_t heads) {
  DAEI_CHECK(attention_decode_supported(q_in, k, v, bias, heads), "attention_decode: unsupported shapes or dtypes");
  auto q = q_in.contiguous();
  const int64_t B = q.size(0), Tq = q.size(1), D = q.size(2), Tk = k.size(1), H = heads, dk = D / H;
  auto out = torch::zeros({B, Tq, D}, q.options());
  torch::Tensor b4;
  int64_t sb[4] = {0, 0, 0, 0};
  if (bias.defined()) {
    b4 = bias.expand({B, H, Tq, Tk});  // stride 0 where broadcast
    for (int i = 0; i < 4; ++i) sb[i] = b4.stride(i);
  }
  const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  const float* bp = b4.defined() ? b4.data_ptr<float>() : nullptr;
  float* op = out.data_ptr<float>();
  const int64_t ks0 = k.stride(0), ks1 = k.stride(1), vs0 = v.stride(0), vs1 = v.stride(1);
  const bool avx2 = cpu_has_avx2_fma();
  auto dot = avx2 ? dot_avx2 : dot_generic;
  auto axpy = avx2 ? axpy_avx2 : axpy_generic;
  at::parallel_for(0, B * H, 8, [&](int64_t s, int64_t e) {
    std::vector<float> w(static_cast<size_t>(Tk));
    for (int64_t i = s; i < e; ++i) {
      const int64_t b = i / H, h = i % H;
      for (int64_t t = 0; t < Tq; ++t) {
        const float* qr = qp + (b * Tq + t) * D + h * dk;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < Tk; ++j) {
          float sc = dot(qr, kp + b * ks0 + j * ks1 + h * dk, dk);  // no 1/sqrt(d_kv) in T5
          if (bp) sc += bp[b * sb[0] + h * sb[1] + t * sb[2] + j * sb[3]];
          w[j] = sc;
          mx = std::max(mx, sc);
        }
        float sum = 0;
        for (int64_t j = 0; j < Tk; ++j) sum += (w[j] = std::exp(w[j] - mx));
        const float inv = 1.0f / sum;
        float* orow = op + (b * Tq + t) * D + h * dk;
        for (int64_t j = 0; j < Tk; ++j) axpy(w[j] * inv, vp + b * vs0 + j * vs1 + h * dk, orow, dk);
      }
    }
  });
  return out;
}

}  // namespace daei
