// Additive attention masks shared by T5 and BERT (HF: (1 - mask) * torch.finfo(dtype).min).
#pragma once
#include <limits>
#include <torch/types.h>

namespace daei {

// The most negative finite value of dtype; float's lowest would round to -inf in half precision.
inline double mask_min(torch::Dtype dtype) {
  if (dtype == torch::kHalf) return -65504.0;
  if (dtype == torch::kBFloat16) return -3.3895313892515355e38;
  return std::numeric_limits<float>::lowest();
}

// mask (B, T) of 1/0 -> (B, 1, 1, T): 0 where attended, mask_min where masked.
inline torch::Tensor additive_attention_mask(const torch::Tensor& mask, torch::Dtype dtype) {
  return (1.0 - mask.to(dtype).unsqueeze(1).unsqueeze(1)) * mask_min(dtype);
}

}  // namespace daei
