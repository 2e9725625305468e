// A fused AdamW: libtorch's AdamW (same options, parameter groups and per-parameter state {step, exp_avg,
// exp_avg_sq}, same save/load, so optim.pt keeps its format and old checkpoints resume) whose step() runs one pass
// over each parameter's values, gradient and moments instead of libtorch's nine tensor ops and two temporaries.
// The arithmetic is libtorch 1.13's, float rounding for float rounding (adamw_kernel.cpp), and it matches its
// results bit for bit there (tests/unit/test_fused_adamw.cpp); on libtorch 2.x the moments still match bit for bit
// and the parameter update differs in the last bit of about 2 in 10,000 elements a step (results/torch2.md). Gradients are read where they live: at N
// ranks that is GradReducer's flat buckets (each .grad aliases its place in one).
// The fused pass needs every parameter that has a gradient to be a contiguous float32 CPU tensor with a
// contiguous gradient and no amsgrad; otherwise the step is libtorch's own (CUDA, other dtypes).
#pragma once
#include <torch/optim/adamw.h>

#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace daei {

// libtorch keys an optimizer's per-parameter state by the parameter's TensorImpl: its address printed as a string up
// to 1.13, the pointer itself in 2.x. Key = the optimizer's map's key_type, so both build.
template <class Key>
Key param_state_key(const at::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;  // what 1.13's c10::guts::to_string did
    s << p.unsafeGetTensorImpl();
    return s.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
  // Whether the last step() took the fused pass (false: libtorch's step ran).
  bool last_step_fused() const { return last_step_fused_; }

 private:
  bool can_fuse() const;
  bool last_step_fused_ = false;
  // the key type of libtorch's per-parameter state map (a string up to 1.13, the TensorImpl pointer in 2.x)
  using StateKey = std::decay_t<decltype(state_)>::key_type;
};

// True when libtorch's CPU kernels compute `a + alpha·b` as one fused multiply-add (its AVX2/AVX512 kernels; not
// its DEFAULT ones, e.g. under ATEN_CPU_CAPABILITY=default). Probed once with an add_ whose result tells.
bool libtorch_fuses_multiply_add();

}  // namespace daei
