// Fused CPU kernels for the T5 training step (issue 24 item 2): each replaces a chain of libtorch element-wise ops
// whose intermediate tensors and passes over memory were a third of the step. Same math as the op chains they
// replace (tests/unit/test_t5_kernels.cpp); the dropout draws its mask from its own counter-based generator.
// Under train.precision bf16 (model/net/precision.h) only linear_cross_entropy_sum multiplies in bf16: the LM head is the
// step's largest GEMM. attention_core stays fp32: its products are one small sgemm per (batch, head) (T ≤ 64 by
// d_kv), whose cost is the call rather than the arithmetic, and attention is under 2 % of a step's FLOPs at the
// inverters' sizes (the q, k, v, o projections around it go bf16 through mp_linear). attention_decode has no GEMM
// (per-query dot products); rms_norm and the dropouts are element-wise passes, kept fp32 (T5 normalises in fp32).
#pragma once
#include <cstdint>
#include <torch/types.h>

namespace daei {

// Switches for the fused paths, all on by default. They exist so that bench/entries.cpp (t5-step) can time each
// lever alone, and DAEI_T5_KERNELS (none | all | dropout,norm,ce,residual,attention) sets them at start-up for measuring runs.
struct T5Speed {
  bool fast_dropout = true;  // fast_dropout() instead of torch::dropout
  bool fused_norm = true;    // rms_norm() as one autograd node instead of 6 ops
  bool fused_ce = true;      // linear_cross_entropy_sum() instead of linear + log_softmax + nll per chunk
  bool fused_residual = true;  // t5_dropout_add / t5_relu_dropout: the dropout applied in the add's / relu's pass
  bool fused_attention = true;  // attention_core() instead of transposes + matmul + add + softmax + dropout + matmul
};
T5Speed& t5_speed();

// Inverted dropout: zeroes each element with probability p, scales the kept ones by 1/(1-p). The mask is one byte an
// element, drawn from splitmix64 over (seed, element index) with the seed taken from torch's default CPU generator
// (one draw a call, so torch::manual_seed makes it reproducible). torch's CPU bernoulli_ draws one mt19937 number an
// element and keeps a float mask; this is several times cheaper. Identity when !train or p == 0.
torch::Tensor fast_dropout(const torch::Tensor& x, double p, bool train);

// Dropout as T5 uses it: fast_dropout or torch::dropout, by t5_speed().fast_dropout.
torch::Tensor t5_dropout(const torch::Tensor& x, double p, bool train);

// h + dropout(y) and dropout(relu(x)) in one pass each, forward and backward (masks from fast_dropout's generator);
// the op chains with t5_dropout when t5_speed().fused_residual is off.
torch::Tensor t5_dropout_add(const torch::Tensor& h, const torch::Tensor& y, double p, bool train);
torch::Tensor t5_relu_dropout(const torch::Tensor& x, double p, bool train);

// softmax(Q Kᵀ + bias) (with dropout when training) · V for q (B, Tq, H·d_kv), k and v (B, Tk, H·d_kv), bias
// broadcastable to (B, H, Tq, Tk); result (B, Tq, H·d_kv). One sgemm per (batch, head) on the projections' own
// layout (no transposing copies, no at::bmm per-matrix dispatch); saves the probabilities and a byte mask. float32
// on CPU only, and only where the process's BLAS exports sgemm_.
bool attention_core_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& bias, int64_t heads);
torch::Tensor attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& bias, int64_t heads, double p, bool train);

// Incremental decoding's attention (no gradient): Tq new queries over Tk keys/values, softmax(q kᵀ + bias) · v, in
// the projections' layout: q (B, Tq, H·d_kv) contiguous, k and v (B, Tk, H·d_kv) with unit stride in the last
// dimension (views of T5Cache's growing buffers), bias broadcastable to (B, H, Tq, Tk). Loops per (batch, head,
// query) with AVX2 dot products where the CPU has them: at decoding's sizes (one query, T ≤ 64 keys) a BLAS call per
// head costs more than its arithmetic. float32 on CPU only; no dropout (eval).
bool attention_decode_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& bias, int64_t heads);
torch::Tensor attention_decode(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& bias, int64_t heads);

// T5LayerNorm (RMS norm, no mean subtraction, no bias): w * x / sqrt(mean(x^2) + eps) over the last dimension, as one
// autograd node (forward saves 1/rms per row; backward is one pass). float32 or float64 x and w of one dtype only.
bool rms_norm_supported(const torch::Tensor& x, const torch::Tensor& w);
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps);

// sum over rows of cross_entropy(h · wᵀ, y), rows with y == -100 ignored, with at most `chunk` rows of logits alive
// (one reused buffer). When a gradient is needed the forward also computes d/dh and d/dw (softmax − one-hot, two
// matmuls a chunk) and backward only scales them: no (N, V) log-probabilities are kept for backward. Not
// differentiable twice. h (N, d), w (V, d) float32; y (N) int64.
bool linear_cross_entropy_supported(const torch::Tensor& h, const torch::Tensor& w);
torch::Tensor linear_cross_entropy_sum(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& y,
                                       int64_t chunk = 1024);

}  // namespace daei
