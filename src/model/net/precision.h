// Mixed precision (DESIGN.md, Conventions): weights, optimizer state and checkpoints stay fp32; with
// `train.precision: bf16` (or `auto` where the hardware has it) the T5's matrix products run in bf16 through
// mp_linear, with fp32 inputs, outputs and gradients, so every fp32 kernel around them (norms, softmax, dropout, the
// loss) is unchanged. The setting is process-wide (one key, applied at start by the command line), with a
// thread-local guard for code that must stay fp32 whatever the key says (the black-box embedder).
#pragma once
#include <functional>
#include <string>
#include <torch/types.h>

namespace daei {

class Config;

enum class Precision { fp32, bf16 };
const char* precision_name(Precision p);

// What this CPU and its OS offer for bf16 products (cpuid leaf 7; xgetbv for the OS-enabled register state).
struct CpuBf16 {
  bool avx512_bf16 = false;  // cpuid 7.1 EAX bit 5
  bool amx_bf16 = false;     // cpuid 7.0 EDX bit 22
  bool os_avx512 = false;    // XCR0 has the opmask and ZMM state (bits 5-7) besides SSE/AVX (bits 1-2)
  bool os_amx = false;       // XCR0 has the tile state (bits 17-18)
  bool native() const { return (avx512_bf16 && os_avx512) || (amx_bf16 && os_amx); }
  std::string isa() const;      // "AVX512-BF16", "AMX-BF16", "AVX512-BF16 + AMX-BF16", or "none"
  std::string missing() const;  // why native() is false, one phrase
};
CpuBf16 probe_cpu_bf16();
const CpuBf16& cpu_bf16();  // probed once

// The key's value (fp32 | bf16 | auto) for a run on CUDA or on this CPU. Throws UsageError (one line) for any other
// value, and for bf16 where neither the device nor the CPU multiplies bf16 natively. *why: what was picked and why.
// auto on a CPU with native bf16 calls bf16_speedup (fp32's time ÷ bf16's at the model's products) where given, and
// keeps fp32 below kMinBf16Speedup: an ISA flag does not make the products faster (Intel's AVX512-BF16 without AMX
// runs the quickstart's T5 step 1.7× slower in bf16, results/precision_auto.md).
constexpr double kMinBf16Speedup = 1.1;
Precision resolve_precision(const std::string& value, bool cuda, const CpuBf16& cpu, std::string* why = nullptr,
                            const std::function<double()>& bf16_speedup = {});

// fp32's time ÷ bf16's (cast in, GEMM, cast out: mp_linear's forward with a fresh weight cast, as in training) for
// the three products of a T5 layer and its LM head: rows × d_model → d_ff, rows × d_ff → d_model, rows × d_model →
// vocab. The best of a few repetitions each, after a warm-up; about half a second at the quickstart's sizes.
double measure_bf16_speedup(int64_t rows, int64_t d_model, int64_t d_ff, int64_t vocab);

// Reads train.precision and train.device, sets the process's precision, logs one `[precision]` line. auto measures
// bf16 against fp32 at the inverter's shapes (inverter.*, stage2.batch_size × inverter.max_length_train rows, at
// most 1,024). agree (the ranks' mean, from the command line's communicator) makes every rank pick the same.
// why given: the line's text goes there instead and the caller logs it (main, once the run's daei.log is open).
Precision configure_precision(const Config& cfg, const std::function<double(double)>& agree = {},
                              std::string* why = nullptr);

Precision matmul_precision();  // this thread's guard's, else the process's
void set_matmul_precision(Precision p);

// Scoped thread-local override (the embedder stays fp32; tests compare both in one process).
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(Precision p);
  ~MatmulPrecisionGuard();
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  int prev_;
};

// Within its scope (generation: weights frozen, no optimizer step), bf16 copies of weights are made once and reused;
// outside it every call casts afresh (the fused AdamW writes parameters in place without bumping their version, so a
// cache that outlived a step could serve stale weights).
class Bf16WeightScope {
 public:
  Bf16WeightScope();
  ~Bf16WeightScope();
  Bf16WeightScope(const Bf16WeightScope&) = delete;
  Bf16WeightScope& operator=(const Bf16WeightScope&) = delete;

 private:
  bool owner_;
};

// y = x wᵀ (+ b). fp32: torch::linear. bf16 (fp32 x and w, the process's precision bf16): x and w cast to bf16, one
// bf16 GEMM (oneDNN on CPU, cuBLAS on CUDA), the result back to fp32; backward does grad_x and grad_w as bf16 GEMMs
// too and returns fp32 gradients, so the parameters' .grad and everything after stay fp32.
at::Tensor mp_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {});

// Casts by copy_ into a fresh tensor: libtorch 1.13's .to(kBFloat16) / .to(kFloat) on CPU take ~30× longer than
// copy_ (measured: 69 vs 2.2 ms for 2048×8000).
at::Tensor cast_copy(const at::Tensor& t, at::ScalarType dtype);
// A weight's bf16 copy: from the Bf16WeightScope's cache when one is open.
at::Tensor bf16_weight(const at::Tensor& w);

}  // namespace daei
