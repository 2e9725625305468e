#include "dist/grad_reducer.h"

#include <torch/torch.h>

#include "dist/communicator.h"

namespace daei {

std::vector<Bucket> plan_buckets(const std::vector<int64_t>& numels, const std::vector<at::ScalarType>& dtypes,
                                 int64_t cap_bytes) {
  std::vector<Bucket> out;
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t bytes = numels[i] * static_cast<int64_t>(c10::elementSize(dtypes[i]));
    bool fresh = out.empty() || out.back().dtype != dtypes[i] ||
                 (out.back().numel * static_cast<int64_t>(c10::elementSize(dtypes[i])) + bytes > cap_bytes &&
                  out.back().numel > 0);
    if (fresh) out.push_back(Bucket{dtypes[i], {}, {}, 0});
    Bucket& b = out.back();
    b.params.push_back(i);
    b.offsets.push_back(b.numel);
    b.numel += numels[i];
  }
  return out;
}

GradReducer::GradReducer(Communicator& comm, std::vector<at::Tensor> params, int64_t cap_bytes)
    : comm_(comm), params_(std::move(params)) {
  std::vector<int64_t> numels;
  std::vector<at::ScalarType> dtypes;
  for (const auto& p : params_) {
    numels.push_back(p.numel());
    dtypes.push_back(p.scalar_type());
  }
  buckets_ = plan_buckets(numels, dtypes, cap_bytes);
}

void GradReducer::broadcast_parameters(int root) {
  if (comm_.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (auto& p : params_) {
    at::Tensor t = p.detach();
    comm_.broadcast(t, root);
  }
}

void GradReducer::reduce() {
  if (comm_.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (const Bucket& b : buckets_) {
    const auto device = params_[b.params.front()].device();
    at::Tensor flat = torch::empty({b.numel}, torch::TensorOptions().dtype(b.dtype).device(device));
    for (size_t k = 0; k < b.params.size(); ++k) {
      const at::Tensor& p = params_[b.params[k]];
      auto view = flat.narrow(0, b.offsets[k], p.numel());
      if (p.grad().defined())
        view.copy_(p.grad().reshape({-1}));
      else
        view.zero_();
    }
    comm_.allreduce(flat, ReduceOp::Avg);
    for (size_t k = 0; k < b.params.size(); ++k) {
      at::Tensor p = params_[b.params[k]];
      auto view = flat.narrow(0, b.offsets[k], p.numel()).view(p.sizes());
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      p.mutable_grad().copy_(view);
    }
  }
}

}  // namespace daei
