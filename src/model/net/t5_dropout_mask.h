// The dropout mask of the fused T5 kernels (t5_kernels.cpp), shared with the attention kernels (t5_attention.cpp),
// whose dropout draws and saves the same mask.
#pragma once
#include <torch/types.h>

namespace daei::t5_mask {

// A keep mask of like's shape, uint8 and contiguous: 1 with probability 1 − p, from splitmix64 over (seed, element
// index) with the seed one draw of torch's default CPU generator.
torch::Tensor new_keep_mask(const torch::Tensor& like, double p);
// out = in * mask * scale (multiplying, not selecting, so NaN/inf propagate as in torch::dropout).
torch::Tensor apply_mask(const torch::Tensor& in, const torch::Tensor& mask, double scale);

}  // namespace daei::t5_mask
