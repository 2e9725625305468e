// The fused T5 kernels (t5_kernels.h) but attention: the switches, the dropouts with their counter-based mask,
// the RMS norm and the LM head's cross-entropy. The attention kernels are t5_attention.cpp.
#include "model/net/t5_kernels.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "model/net/precision.h"
#include "model/net/t5_dropout_mask.h"

namespace daei {

namespace {
// DAEI_T5_KERNELS=none | all | a comma list of dropout,norm,ce,residual,attention: for measuring runs of `daei train` with and without
// the fused kernels (held-out CE at equal steps). Unset means all.
T5Speed speed_from_env() {
  T5Speed s;
  const char* v = std::getenv("DAEI_T5_KERNELS");
  if (!v || !*v || std::string(v) == "all") return s;
  s = T5Speed{false, false, false, false, false};
  if (std::string(v) == "none") return s;
  std::string item;
  for (std::istringstream in(v); std::getline(in, item, ',');) {
    if (item == "dropout") s.fast_dropout = true;
    else if (item == "norm") s.fused_norm = true;
    else if (item == "ce") s.fused_ce = true;
    else if (item == "residual") s.fused_residual = true;
    else if (item == "attention") s.fused_attention = true;
    else
      throw UsageError(fmt::format("DAEI_T5_KERNELS='{}': '{}' is not one of all, none, or a comma list of dropout, norm, "
                              "ce, residual, attention", v, item));
  }
  return s;
}
}  // namespace

T5Speed& t5_speed() {
  static T5Speed s = speed_from_env();
  return s;
}

namespace {

// splitmix64's output function: a counter through it gives independent-looking 64-bit words (counter-based, so any
// split of the work over threads draws the same mask).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t seed_from_torch() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

// mask[i] = 1 with probability 1 - thr/2^32: two 32-bit draws per 64-bit word.
void draw_keep_mask(uint8_t* m, int64_t n, uint64_t seed, uint32_t thr) {
  at::parallel_for(0, (n + 1) / 2, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      const uint64_t r = mix64(seed + static_cast<uint64_t>(j + 1) * 0x9E3779B97F4A7C15ULL);
      const int64_t i = 2 * j;
      m[i] = static_cast<uint32_t>(r) >= thr;
      if (i + 1 < n) m[i + 1] = static_cast<uint32_t>(r >> 32) >= thr;
    }
  });
}

uint32_t drop_threshold(double p) {
  const double thr = std::ldexp(p, 32);
  return thr >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(thr);
}

}  // namespace

namespace t5_mask {

torch::Tensor apply_mask(const torch::Tensor& in, const torch::Tensor& mask, double scale) {
  auto x = in.contiguous();
  auto out = torch::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.numel();
  const uint8_t* __restrict__ m = mask.data_ptr<uint8_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "daei_dropout_apply", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* __restrict__ xp = x.data_ptr<scalar_t>();
    scalar_t* __restrict__ op = out.data_ptr<scalar_t>();
    const acc_t s = static_cast<acc_t>(scale);
    at::parallel_for(0, n, 1 << 15, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) op[i] = static_cast<scalar_t>(static_cast<acc_t>(xp[i]) * (m[i] * s));
    });
  });
  return out;
}

torch::Tensor new_keep_mask(const torch::Tensor& like, double p) {
  auto mask = torch::empty(like.sizes(), like.options().dtype(torch::kUInt8).memory_format(at::MemoryFormat::Contiguous));
  draw_keep_mask(mask.data_ptr<uint8_t>(), mask.numel(), seed_from_torch(), drop_threshold(p));
  return mask;
}

}  // namespace t5_mask

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using t5_mask::apply_mask;
using t5_mask::new_keep_mask;

struct FastDropoutFn : public torch::autograd::Function<FastDropoutFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, double p) {
    auto mask = new_keep_mask(x, p);
    const double scale = 1.0 / (1.0 - p);
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = scale;
    return apply_mask(x, mask, scale);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    auto mask = ctx->get_saved_variables()[0];
    return {apply_mask(g[0], mask, ctx->saved_data["scale"].toDouble()), torch::Tensor()};
  }
};

// h + dropout(y) in one pass: the residual add T5 does after every sub-layer.
struct DropoutAddFn : public torch::autograd::Function<DropoutAddFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& h_in, const torch::Tensor& y_in, double p) {
    auto h = h_in.contiguous();
    auto y = y_in.contiguous();
    auto mask = new_keep_mask(y, p);
    const double scale = 1.0 / (1.0 - p);
    auto out = torch::empty_like(h, at::MemoryFormat::Contiguous);
    const int64_t n = h.numel();
    const uint8_t* __restrict__ m = mask.data_ptr<uint8_t>();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, h.scalar_type(), "daei_dropout_add", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      const scalar_t* __restrict__ hp = h.data_ptr<scalar_t>();
      const scalar_t* __restrict__ yp = y.data_ptr<scalar_t>();
      scalar_t* __restrict__ op = out.data_ptr<scalar_t>();
      const acc_t s = static_cast<acc_t>(scale);
      at::parallel_for(0, n, 1 << 15, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          op[i] = static_cast<scalar_t>(static_cast<acc_t>(hp[i]) + static_cast<acc_t>(yp[i]) * (m[i] * s));
      });
    });
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = scale;
    return out;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    auto mask = ctx->get_saved_variables()[0];
    return {g[0], apply_mask(g[0], mask, ctx->saved_data["scale"].toDouble()), torch::Tensor()};
  }
};

// dropout(relu(x)) in one pass; the saved mask is keep ∧ (x > 0), so backward is one pass too.
struct ReluDropoutFn : public torch::autograd::Function<ReluDropoutFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, double p) {
    auto x = x_in.contiguous();
    auto mask = new_keep_mask(x, p);
    const double scale = 1.0 / (1.0 - p);
    auto out = torch::empty_like(x, at::MemoryFormat::Contiguous);
    const int64_t n = x.numel();
    uint8_t* __restrict__ m = mask.data_ptr<uint8_t>();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "daei_relu_dropout", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      const scalar_t* __restrict__ xp = x.data_ptr<scalar_t>();
      scalar_t* __restrict__ op = out.data_ptr<scalar_t>();
      const acc_t s = static_cast<acc_t>(scale);
      at::parallel_for(0, n, 1 << 15, [&](int64_t b, int64_t e) {
        // Branch-free (the mask is random, a branch would be mispredicted half the time); v·0 keeps NaN a NaN, as
        // torch's relu then dropout do.
        for (int64_t i = b; i < e; ++i) {
          const acc_t v = static_cast<acc_t>(xp[i]);
          const uint8_t k = m[i] & static_cast<uint8_t>(v > acc_t(0));
          m[i] = k;
          op[i] = static_cast<scalar_t>(v * (k * s));
        }
      });
    });
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = scale;
    return out;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    auto mask = ctx->get_saved_variables()[0];
    return {apply_mask(g[0], mask, ctx->saved_data["scale"].toDouble()), torch::Tensor()};
  }
};

// ------------------------------------------------------------------------------------------------ RMS norm

template <typename T>
void rms_forward(const T* x, const T* w, T* y, T* rinv, int64_t rows, int64_t d, double eps) {
  at::parallel_for(0, rows, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = x + r * d;
      double ss = 0;
      for (int64_t k = 0; k < d; ++k) ss += static_cast<double>(xr[k]) * xr[k];
      const T inv = static_cast<T>(1.0 / std::sqrt(static_cast<double>(static_cast<T>(ss / d)) + eps));
      rinv[r] = inv;
      T* __restrict__ yr = y + r * d;
      for (int64_t k = 0; k < d; ++k) yr[k] = w[k] * (xr[k] * inv);
    }
  });
}

// dx_k = r·g_k·w_k − x_k·r³·Σ_j(g_j·w_j·x_j)/d ;  dw_k = Σ_rows g_k·x_k·r.
template <typename T>
void rms_backward(const T* g, const T* x, const T* w, const T* rinv, T* gx, T* gw, int64_t rows, int64_t d) {
  const int nt = at::get_num_threads();
  std::vector<T> part(static_cast<size_t>(nt) * d, T(0));
  at::parallel_for(0, rows, 64, [&](int64_t b, int64_t e) {
    T* __restrict__ acc = part.data() + static_cast<size_t>(at::get_thread_num()) * d;
    for (int64_t r = b; r < e; ++r) {
      const T* gr = g + r * d;
      const T* xr = x + r * d;
      const T inv = rinv[r];
      double a = 0;
      for (int64_t k = 0; k < d; ++k) a += static_cast<double>(gr[k]) * w[k] * xr[k];
      const T c = static_cast<T>(a * inv * inv * inv / d);
      T* __restrict__ o = gx + r * d;
      for (int64_t k = 0; k < d; ++k) {
        o[k] = inv * gr[k] * w[k] - xr[k] * c;
        acc[k] += gr[k] * xr[k] * inv;
      }
    }
  });
  for (int64_t k = 0; k < d; ++k) {
    T s = 0;
    for (int t = 0; t < nt; ++t) s += part[static_cast<size_t>(t) * d + k];
    gw[k] = s;
  }
}

struct RmsNormFn : public torch::autograd::Function<RmsNormFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& w, double eps) {
    auto x = x_in.contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    auto y = torch::empty_like(x, at::MemoryFormat::Contiguous);
    auto rinv = torch::empty({rows}, x.options());
    auto wc = w.contiguous();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "daei_rms_norm", [&] {
      rms_forward<scalar_t>(x.data_ptr<scalar_t>(), wc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                            rinv.data_ptr<scalar_t>(), rows, d, eps);
    });
    ctx->save_for_backward({x, wc, rinv});
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto s = ctx->get_saved_variables();
    const auto &x = s[0], &w = s[1], &rinv = s[2];
    auto g = grads[0].contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    auto gx = torch::empty_like(x, at::MemoryFormat::Contiguous);
    auto gw = torch::empty_like(w);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "daei_rms_norm_backward", [&] {
      rms_backward<scalar_t>(g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                             rinv.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(), rows, d);
    });
    return {gx, gw, torch::Tensor()};
  }
};

// ------------------------------------------------------------------------------------------------ LM head + CE

// Loss sum over the rows; with gh/gw defined, also d(sum)/dh into gh and d(sum)/dw into gw (zeroed by the caller).
// bf16: the three products of a chunk (logits, d/dh, d/dw) take bf16 operands (the LM head is the step's largest
// GEMM); the logits come back to the fp32 buffer, so softmax, the loss and the gradients' sum over chunks stay fp32.
double linear_ce_chunks(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& y, int64_t chunk,
                        torch::Tensor* gh, torch::Tensor* gw, bool bf16) {
  const int64_t N = h.size(0), V = w.size(0);
  chunk = std::max<int64_t>(1, std::min(chunk, N));
  auto buf = torch::empty({chunk, V}, h.options());  // reused by every chunk
  const auto hb = bf16 ? cast_copy(h, at::kBFloat16) : h;
  const auto wb = bf16 ? bf16_weight(w) : w;
  const auto wt = wb.t();
  double total = 0;
  for (int64_t i = 0; i < N; i += chunk) {
    const int64_t n = std::min(chunk, N - i);
    auto hc = hb.narrow(0, i, n);
    auto lc = buf.narrow(0, 0, n);
    if (bf16) lc.copy_(at::mm(hc, wt)); else at::mm_out(lc, hc, wt);
    auto yc = y.narrow(0, i, n);
    auto valid = yc != -100;
    DAEI_CHECK(((yc >= 0).logical_and(yc < V)).logical_or(valid.logical_not()).all().item<bool>(),
               "cross-entropy: a label is outside [0, {})", V);
    auto yi = yc.masked_fill(valid.logical_not(), 0).unsqueeze(1);
    auto ly = lc.gather(1, yi).squeeze(1);
    auto mx = lc.amax(1, /*keepdim=*/true);
    lc.sub_(mx).exp_();  // in place: the buffer now holds exp(logit − max)
    auto se = lc.sum(1, /*keepdim=*/true);
    auto row_loss = (se.log() + mx).squeeze(1) - ly;  // logsumexp − logit of the label
    total += row_loss.masked_fill(valid.logical_not(), 0).to(torch::kDouble).sum().item<double>();
    if (gh) {
      // softmax − one-hot, zero on ignored rows
      lc.div_(se);
      lc.scatter_add_(1, yi, torch::full({n, 1}, -1.0, lc.options()));
      if (!valid.all().item<bool>()) lc.mul_(valid.to(lc.scalar_type()).unsqueeze(1));
      auto ghc = gh->narrow(0, i, n);
      if (bf16) {
        const auto lb = cast_copy(lc, at::kBFloat16);
        ghc.copy_(at::mm(lb, wb));
        gw->add_(at::mm(lb.t(), hc));
      } else {
        at::mm_out(ghc, lc, w);
        gw->addmm_(lc.t(), hc);
      }
    }
  }
  return total;
}

struct LinearCeFn : public torch::autograd::Function<LinearCeFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& h_in, const torch::Tensor& w_in,
                               const torch::Tensor& y, int64_t chunk) {
    auto h = h_in.contiguous();
    auto w = w_in.contiguous();
    auto gh = torch::empty_like(h);
    auto gw = torch::zeros_like(w);
    const double total = linear_ce_chunks(h, w, y, chunk, &gh, &gw, matmul_precision() == Precision::bf16);
    ctx->saved_data["gh"] = gh;
    ctx->saved_data["gw"] = gw;
    return torch::full({}, total, h.options());
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const auto& go = g[0];
    return {ctx->saved_data["gh"].toTensor() * go, ctx->saved_data["gw"].toTensor() * go, torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fast_dropout(const torch::Tensor& x, double p, bool train) {
  DAEI_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got {}", p);
  if (!train || p == 0.0 || x.numel() == 0) return x;
  if (p == 1.0) return x * 0.0;
  return FastDropoutFn::apply(x, p);
}

torch::Tensor t5_dropout(const torch::Tensor& x, double p, bool train) {
  if (t5_speed().fast_dropout && x.device().is_cpu()) return fast_dropout(x, p, train);
  return torch::dropout(x, p, train);
}

torch::Tensor t5_dropout_add(const torch::Tensor& h, const torch::Tensor& y, double p, bool train) {
  if (!train || p == 0.0) return h + y;
  if (!t5_speed().fused_residual || !h.device().is_cpu() || h.sizes() != y.sizes() ||
      h.scalar_type() != y.scalar_type() || p == 1.0)
    return h + t5_dropout(y, p, train);
  DAEI_CHECK(p > 0.0 && p < 1.0, "dropout: p must be in [0, 1], got {}", p);
  return DropoutAddFn::apply(h, y, p);
}

torch::Tensor t5_relu_dropout(const torch::Tensor& x, double p, bool train) {
  if (!train || p == 0.0) return torch::relu(x);
  if (!t5_speed().fused_residual || !x.device().is_cpu() || p == 1.0) return t5_dropout(torch::relu(x), p, train);
  DAEI_CHECK(p > 0.0 && p < 1.0, "dropout: p must be in [0, 1], got {}", p);
  return ReluDropoutFn::apply(x, p);
}

bool rms_norm_supported(const torch::Tensor& x, const torch::Tensor& w) {
  return x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == w.scalar_type() &&
         (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble) && w.dim() == 1 && x.dim() >= 1 &&
         x.size(-1) == w.size(0) && x.numel() > 0;
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  DAEI_CHECK(rms_norm_supported(x, w), "rms_norm: float32/float64 CPU tensors of one dtype with w (d) expected");
  return RmsNormFn::apply(x, w, eps);
}

bool linear_cross_entropy_supported(const torch::Tensor& h, const torch::Tensor& w) {
  return h.device().is_cpu() && w.device().is_cpu() && h.scalar_type() == torch::kFloat &&
         w.scalar_type() == torch::kFloat && h.dim() == 2 && w.dim() == 2 && h.size(1) == w.size(1);
}

torch::Tensor linear_cross_entropy_sum(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& y,
                                       int64_t chunk) {
  DAEI_CHECK(linear_cross_entropy_supported(h, w), "linear_cross_entropy_sum: float32 CPU h (N, d), w (V, d)");
  DAEI_CHECK(y.dim() == 1 && y.size(0) == h.size(0), "linear_cross_entropy_sum: y must be (N)");
  const bool need_grad = torch::GradMode::is_enabled() && (h.requires_grad() || w.requires_grad());
  if (need_grad) return LinearCeFn::apply(h, w, y, chunk);
  torch::NoGradGuard ng;
  return torch::full({}, linear_ce_chunks(h.contiguous(), w.contiguous(), y, chunk, nullptr, nullptr,
                                          matmul_precision() == Precision::bf16),
                     h.options());
}

}  // namespace daei
