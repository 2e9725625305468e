// PCGrad (Yu et al. 2020) as DAEI applies it to the denoiser in stage 3 (reference notes §2.4): where the
// cross-entropy gradient conflicts with the SURE gradient (negative inner product), the CE gradient loses its
// component along the SURE gradient:  g_ce ← g_ce − ⟨g_ce, g_sure⟩ / ‖g_sure‖² · g_sure  (skipped when ‖g_sure‖ = 0).
// The DAE's update is then g_sure + g_ce. DAEI does it per parameter tensor; `whole` treats the DAE's gradients as
// one flattened vector.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include <torch/types.h>

namespace daei {

struct PcgradStats {
  int64_t tensors = 0;    // tensors with both gradients
  int64_t conflicts = 0;  // of which projected (per tensor), or 0/1 for `whole`
  double cosine = 0;      // cos(g_ce, g_sure) over the flattened DAE gradients, before projection
};

// g_ce is projected in place (undefined entries are skipped). Both lists are aligned.
PcgradStats pcgrad_project(std::vector<at::Tensor>& g_ce, const std::vector<at::Tensor>& g_sure, bool whole);

// Stage 3's combine step on the global gradients of the two sets (0: SURE, 1: CE), aligned with `params`: the first
// n_first parameters (the inverter) take the CE gradient; the others (the DAE) take g_SURE + g_CE, with g_CE
// projected by PCGrad (mode per_tensor | whole | off). Writes each parameter's .grad; returns the logged terms
// pcgrad_conflict_frac and pcgrad_cos.
std::map<std::string, double> combine_sure_ce(std::vector<std::vector<at::Tensor>>& sets,
                                              const std::vector<at::Tensor>& params, size_t n_first,
                                              const std::string& mode);

// λ(t) rising linearly from 0 (t = 0) to lambda_max over warmup steps; warmup 0: lambda_max from the start.
double lambda_schedule(int64_t step, int64_t warmup, double lambda_max);

}  // namespace daei
