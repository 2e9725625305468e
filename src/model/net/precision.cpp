#include "model/net/precision.h"

#include <cpuid.h>
#include <torch/autograd.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

namespace daei {

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

// ------------------------------------------------------------------------------------------------ the probe

namespace {
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}
}  // namespace

CpuBf16 probe_cpu_bf16() {
  CpuBf16 c;
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  const bool osxsave = cx & (1u << 27);  // xgetbv is usable only then
  if (__get_cpuid_max(0, nullptr) < 7) return c;
  __cpuid_count(7, 0, a, b, cx, d);
  const bool avx512f = b & (1u << 16);
  c.amx_bf16 = d & (1u << 22);
  const unsigned max_sub = a;
  if (max_sub >= 1) {
    __cpuid_count(7, 1, a, b, cx, d);
    c.avx512_bf16 = avx512f && (a & (1u << 5));
  }
  if (osxsave) {
    const uint64_t xcr0 = read_xcr0();
    c.os_avx512 = (xcr0 & 0xE6) == 0xE6;
    c.os_amx = (xcr0 & (uint64_t{3} << 17)) == (uint64_t{3} << 17);
  }
  return c;
}

const CpuBf16& cpu_bf16() {
  static const CpuBf16 c = probe_cpu_bf16();
  return c;
}

std::string CpuBf16::isa() const {
  const bool v = avx512_bf16 && os_avx512, t = amx_bf16 && os_amx;
  return v && t ? "AVX512-BF16 + AMX-BF16" : v ? "AVX512-BF16" : t ? "AMX-BF16" : "none";
}

std::string CpuBf16::missing() const {
  if (native()) return "";
  if (avx512_bf16 && !os_avx512) return "the CPU has AVX512-BF16 but the OS has not enabled the AVX-512 state (XCR0)";
  if (amx_bf16 && !os_amx) return "the CPU has AMX-BF16 but the OS has not enabled the tile state (XCR0)";
  return "this CPU has neither AVX512-BF16 (cpuid 7.1 EAX bit 5) nor AMX-BF16 (cpuid 7.0 EDX bit 22)";
}

Precision resolve_precision(const std::string& value, bool cuda, const CpuBf16& cpu, std::string* why,
                            const std::function<double()>& bf16_speedup) {
  auto say = [&](const std::string& s) {
    if (why) *why = s;
  };
  if (value == "fp32") {
    say("fp32 (train.precision: fp32)");
    return Precision::fp32;
  }
  if (value != "bf16" && value != "auto")
    throw UsageError(fmt::format("train.precision must be fp32, bf16 or auto, got '{}'", value));
  if (cuda) {
    say(fmt::format("bf16 matrix products on CUDA (train.precision: {})", value));
    return Precision::bf16;
  }
  if (cpu.native() && value == "auto" && bf16_speedup) {
    const double s = bf16_speedup();
    if (!(s >= kMinBf16Speedup)) {
      say(fmt::format("fp32 (train.precision: auto; the CPU has {} but its bf16 products ran at {:.2f}× fp32's speed "
                      "at this model's shapes, below {:.2f}×)",
                      cpu.isa(), s, kMinBf16Speedup));
      return Precision::fp32;
    }
    say(fmt::format("bf16 matrix products: the CPU multiplies bf16 natively ({}) and {:.2f}× faster than fp32 at this "
                    "model's shapes (train.precision: auto)",
                    cpu.isa(), s));
    return Precision::bf16;
  }
  if (cpu.native()) {
    say(fmt::format("bf16 matrix products: the CPU multiplies bf16 natively ({}; train.precision: {})", cpu.isa(),
                    value));
    return Precision::bf16;
  }
  if (value == "bf16")
    throw UsageError(fmt::format("train.precision is bf16 but {}: bf16 products would be emulated, slower than fp32 "
                                 "(use fp32 or auto)",
                                 cpu.missing()));
  say(fmt::format("fp32 (train.precision: auto; {})", cpu.missing()));
  return Precision::fp32;
}

// ------------------------------------------------------------------------------------------------ the setting

namespace {
std::atomic<int> g_precision{static_cast<int>(Precision::fp32)};
thread_local int t_override = -1;  // -1: none
// weight → (weight, its bf16 copy); holding the weight keeps its address from being reused within the scope
using WeightCache = std::unordered_map<const c10::TensorImpl*, std::pair<at::Tensor, at::Tensor>>;
thread_local WeightCache* t_weights = nullptr;
}  // namespace

Precision configure_precision(const Config& cfg, const std::function<double(double)>& agree, std::string* why_out) {
  const std::string dev = cfg.str("train.device");
  const bool cuda = dev == "cuda" || (dev == "auto" && torch::cuda::is_available());
  auto speedup = [&] {
    const int64_t rows = std::min<int64_t>(1024, cfg.integer("stage2.batch_size") * cfg.integer("inverter.max_length_train"));
    double s = measure_bf16_speedup(rows, cfg.integer("inverter.d_model"), cfg.integer("inverter.d_ff"),
                                    cfg.integer("inverter.vocab_size"));
    if (agree) s = agree(s);
    return s;
  };
  std::string why;
  const Precision p = resolve_precision(cfg.str("train.precision"), cuda, cpu_bf16(), &why, speedup);
  set_matmul_precision(p);
  // The default (fp32 asked for) says nothing: a log line before a command's one-line refusal would be a second line.
  if (why_out)
    *why_out = why;
  else if (cfg.str("train.precision") != "fp32")
    LOG_INFO("[precision] {}", why);
  return p;
}


Precision matmul_precision() {
  return static_cast<Precision>(t_override >= 0 ? t_override : g_precision.load(std::memory_order_relaxed));
}

void set_matmul_precision(Precision p) { g_precision.store(static_cast<int>(p), std::memory_order_relaxed); }

MatmulPrecisionGuard::MatmulPrecisionGuard(Precision p) : prev_(t_override) { t_override = static_cast<int>(p); }
MatmulPrecisionGuard::~MatmulPrecisionGuard() { t_override = prev_; }

Bf16WeightScope::Bf16WeightScope() : owner_(t_weights == nullptr) {
  if (owner_) t_weights = new WeightCache();
}
Bf16WeightScope::~Bf16WeightScope() {
  if (!owner_) return;
  delete t_weights;
  t_weights = nullptr;
}

at::Tensor cast_copy(const at::Tensor& t, at::ScalarType dtype) {
  if (t.scalar_type() == dtype) return t;
  return at::empty(t.sizes(), t.options().dtype(dtype).memory_format(at::MemoryFormat::Contiguous)).copy_(t);
}

at::Tensor bf16_weight(const at::Tensor& w) {
  if (!t_weights) return cast_copy(w, at::kBFloat16);
  auto& slot = (*t_weights)[w.unsafeGetTensorImpl()];
  if (!slot.second.defined()) slot = {w, cast_copy(w, at::kBFloat16)};
  return slot.second;
}

// ------------------------------------------------------------------------------------------------ mp_linear

namespace {
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// y = x wᵀ (+ b) with a bf16 product, fp32 in and out; xb_out: the bf16 x (backward multiplies it).
at::Tensor bf16_linear(const at::Tensor& x, const at::Tensor& wb, const at::Tensor& b, at::Tensor* xb_out) {
  const int64_t in = x.size(-1), out = wb.size(0);
  auto xb = cast_copy(x, at::kBFloat16).view({-1, in});
  auto y = cast_copy(at::mm(xb, wb.t()), at::kFloat);
  if (b.defined() && b.numel() > 0) y.add_(b);
  auto sizes = x.sizes().vec();
  sizes.back() = out;
  if (xb_out) *xb_out = xb;
  return y.view(sizes);
}

// fp32 in and out, bf16 GEMMs inside. Saves the bf16 copies of x and w (half the bytes of fp32 x), which is what
// grad_w and grad_x multiply anyway.
struct Bf16LinearFn : public torch::autograd::Function<Bf16LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    at::Tensor xb;
    auto wb = bf16_weight(w);
    auto y = bf16_linear(x, wb, b, &xb);
    ctx->save_for_backward({xb, wb});
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    ctx->saved_data["bias"] = b.numel() > 0;
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto s = ctx->get_saved_variables();
    const auto &xb = s[0], &wb = s[1];
    auto g = grads[0].reshape({-1, wb.size(0)});
    auto gb = cast_copy(g, at::kBFloat16);
    at::Tensor gx, gw, gbias;
    if (ctx->needs_input_grad(0))
      gx = cast_copy(at::mm(gb, wb), at::kFloat).view(ctx->saved_data["x_sizes"].toIntVector());
    if (ctx->needs_input_grad(1)) gw = cast_copy(at::mm(gb.t(), xb), at::kFloat);
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) gbias = g.sum(0);  // fp32 reduction
    return {gx, gw, gbias};
  }
};
}  // namespace

at::Tensor mp_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const bool bf16 = matmul_precision() == Precision::bf16 && x.scalar_type() == at::kFloat &&
                    w.scalar_type() == at::kFloat && (!b.defined() || b.scalar_type() == at::kFloat) &&
                    x.numel() > 0 && x.dim() >= 1;
  if (!bf16) return torch::linear(x, w, b);
  // Nothing to differentiate (generation, eval): no autograd node, nothing saved.
  const bool grad = at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad() ||
                                                   (b.defined() && b.requires_grad()));
  if (!grad) return bf16_linear(x, bf16_weight(w), b, nullptr);
  // An undefined tensor cannot be an autograd input in libtorch 1.13: no bias travels as an empty tensor.
  return Bf16LinearFn::apply(x, w, b.defined() ? b : torch::empty({0}, w.options()));
}

double measure_bf16_speedup(int64_t rows, int64_t d_model, int64_t d_ff, int64_t vocab) {
  torch::NoGradGuard no_grad;
  const std::vector<std::pair<int64_t, int64_t>> products = {{d_model, d_ff}, {d_ff, d_model}, {d_model, vocab}};
  std::vector<at::Tensor> xs, ws;
  for (const auto& [in, out] : products) {
    xs.push_back(torch::randn({rows, in}));
    ws.push_back(torch::randn({out, in}));
  }
  auto seconds_of = [&](bool bf16) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < xs.size(); ++i) {
      if (bf16)
        (void)bf16_linear(xs[i], cast_copy(ws[i], at::kBFloat16), {}, nullptr);
      else
        (void)at::mm(xs[i], ws[i].t());
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Interleaved, so that a burst of load elsewhere hits both; the best of each.
  double fp32 = INFINITY, bf16 = INFINITY;
  for (int rep = 0; rep < 4; ++rep) {
    const double f = seconds_of(false), b = seconds_of(true);
    if (rep == 0) continue;  // warm-up: oneDNN compiles its kernels on first use
    fp32 = std::min(fp32, f);
    bf16 = std::min(bf16, b);
  }
  return fp32 / bf16;
}

}  // namespace daei
