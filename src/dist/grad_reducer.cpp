#include "dist/grad_reducer.h"

#include <torch/torch.h>

#include "core/error.h"
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

namespace {
// The bucket's memory as a tensor of its own, not an autograd view of the bucket: libtorch's Optimizer::zero_grad
// detaches gradients in place, which a view refuses. It holds a reference to the bucket, so the memory outlives it.
at::Tensor bucket_alias(const at::Tensor& flat, const at::Tensor& view) {
  return torch::from_blob(view.data_ptr(), view.sizes(), view.strides(), [keep = flat](void*) {}, view.options());
}
}  // namespace

void GradReducer::ensure_bucket(size_t bi, const at::Device& device) {
  if (flat_.size() != buckets_.size()) flat_.resize(buckets_.size());
  auto& flat = flat_[bi];
  // The gradients, then one presence flag a parameter (reduce()'s trailer).
  const int64_t n = buckets_[bi].numel + static_cast<int64_t>(buckets_[bi].params.size());
  if (!flat.defined() || flat.device() != device)
    flat = torch::empty({n}, torch::TensorOptions().dtype(buckets_[bi].dtype).device(device));
}

double GradReducer::loss_scale() const { return 1.0 / comm_.size(); }

void GradReducer::prepare_grads(bool prescaled) {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
  grads_in_buckets_ = false;
  prescaled_ = prescaled;
  if (comm_.size() == 1 || params_.empty()) return;
  if (!arrived_) {
    arrived_ = std::make_shared<std::vector<char>>(params_.size(), 0);
    for (size_t i = 0; i < params_.size(); ++i)
      if (params_[i].requires_grad())
        params_[i].register_hook([flags = arrived_, i](const at::Tensor&) { (*flags)[i] = 1; });
  }
  std::fill(arrived_->begin(), arrived_->end(), 0);
  torch::NoGradGuard no_grad;
  const auto device = params_.front().device();
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    ensure_bucket(bi, device);
    flat_[bi].zero_();
    const Bucket& b = buckets_[bi];
    for (size_t k = 0; k < b.params.size(); ++k) {
      auto& p = params_[b.params[k]];
      if (!p.requires_grad()) continue;
      p.mutable_grad() = bucket_alias(flat_[bi], flat_[bi].narrow(0, b.offsets[k], p.numel()).view(p.sizes()));
    }
  }
  grads_in_buckets_ = true;
}

void GradReducer::reduce() {
  if (comm_.size() == 1) return;
  if (grads_in_buckets_) return reduce_prepared();
  std::vector<at::Tensor> grads;
  grads.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)  // a prepared zero that received nothing is "no gradient"
    grads.push_back(grads_in_buckets_ && !(*arrived_)[i] ? at::Tensor() : params_[i].grad());
  reduce_into(grads, /*as_views=*/true);
  for (size_t i = 0; i < params_.size(); ++i) params_[i].mutable_grad() = grads[i];
  grads_in_buckets_ = false;
}

// After prepare_grads() the gradients already lie in the buckets. Each bucket that holds a trainable parameter is sent
// once, with a trailer of presence flags (1 where this rank's backward reached the parameter): their average is
// > 0 where any rank had a gradient. So no copy and no separate presence all-reduce; the price is that a bucket of
// trainable parameters that no rank touched this step is still sent (as zeros). Prescaled losses are summed (the sum
// is the mean); otherwise averaged, one more pass over the bucket.
void GradReducer::reduce_prepared() {
  torch::NoGradGuard no_grad;
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    const Bucket& b = buckets_[bi];
    bool trainable = false;
    for (size_t i : b.params) trainable = trainable || params_[i].requires_grad();
    if (!trainable) continue;  // never has a gradient on any rank (the same parameters everywhere)
    auto& flat = flat_[bi];
    const auto np = static_cast<int64_t>(b.params.size());
    auto trailer = flat.narrow(0, b.numel, np);
    {
      std::vector<float> flags(b.params.size());
      for (size_t k = 0; k < b.params.size(); ++k) flags[k] = (*arrived_)[b.params[k]] ? 1.f : 0.f;
      trailer.copy_(torch::from_blob(flags.data(), {np}, torch::kFloat32));
    }
    for (size_t k = 0; k < b.params.size(); ++k) {  // backward accumulated into the aliases; anything else is copied
      auto& p = params_[b.params[k]];
      if (!(*arrived_)[b.params[k]]) continue;
      auto view = flat.narrow(0, b.offsets[k], p.numel());
      if (p.grad().data_ptr() != view.data_ptr() || !p.grad().is_contiguous()) view.copy_(p.grad().reshape({-1}));
    }
    comm_.allreduce(flat, prescaled_ ? ReduceOp::Sum : ReduceOp::Avg);
    const auto any = trailer.to(torch::kCPU, torch::kFloat32);
    const auto a = any.accessor<float, 1>();
    for (size_t k = 0; k < b.params.size(); ++k) {
      auto& p = params_[b.params[k]];
      if (a[static_cast<int64_t>(k)] > 0)
        p.mutable_grad() = bucket_alias(flat, flat.narrow(0, b.offsets[k], p.numel()).view(p.sizes()));
      else
        p.mutable_grad() = at::Tensor();  // no rank had one: "no gradient", as after a fresh backward
    }
  }
  grads_in_buckets_ = false;
}

void GradReducer::reduce(std::vector<at::Tensor>& grads) {
  DAEI_CHECK(grads.size() == params_.size(), "GradReducer: {} gradients for {} parameters", grads.size(),
             params_.size());
  if (comm_.size() == 1) return;
  // Copied back: a caller may reduce several gradient sets through the same buckets and keep them all.
  reduce_into(grads, /*as_views=*/false);
}

void GradReducer::reduce_into(std::vector<at::Tensor>& grads, bool as_views) {
  torch::NoGradGuard no_grad;
  // Which parameters have a gradient on any rank (Max over ranks of 0/1 flags).
  auto present = torch::zeros({static_cast<int64_t>(grads.size())}, torch::kFloat32);
  {
    auto a = present.accessor<float, 1>();
    for (size_t i = 0; i < grads.size(); ++i) a[i] = grads[i].defined() ? 1.f : 0.f;
  }
  const auto device = params_.front().device();
  present = present.to(device);
  comm_.allreduce(present, ReduceOp::Max);
  present = present.cpu();
  const auto any = present.accessor<float, 1>();
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    const Bucket& b = buckets_[bi];
    bool used = false;
    for (size_t k : b.params) used = used || any[k] > 0;
    if (!used) continue;  // a frozen bucket: nothing to send
    ensure_bucket(bi, device);
    auto& flat = flat_[bi];
    for (size_t k = 0; k < b.params.size(); ++k) {
      const size_t i = b.params[k];
      auto view = flat.narrow(0, b.offsets[k], params_[i].numel());
      if (grads[i].defined() && grads[i].data_ptr() == view.data_ptr() && grads[i].is_contiguous())
        continue;  // already in its bucket (backward accumulated into a prepare_grads() alias)
      if (grads[i].defined())
        view.copy_(grads[i].reshape({-1}));
      else if (!grads_in_buckets_)  // prepared buckets start zeroed
        view.zero_();
    }
    auto grad_part = flat.narrow(0, 0, b.numel);  // not the trailer: presence was agreed above
    comm_.allreduce(grad_part, ReduceOp::Avg);
    for (size_t k = 0; k < b.params.size(); ++k) {
      const size_t i = b.params[k];
      if (any[i] == 0) continue;
      auto view = flat.narrow(0, b.offsets[k], params_[i].numel()).view(params_[i].sizes());
      if (as_views)
        grads[i] = bucket_alias(flat, view);
      else if (!grads[i].defined())
        grads[i] = view.clone();
      else
        grads[i].copy_(view);
    }
  }
}

}  // namespace daei
