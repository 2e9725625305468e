// Data-parallel gradient averaging for libtorch, which has no DDP in C++. After backward():
//   reducer.reduce();   // every parameter's .grad becomes the mean over ranks
// Gradients are packed into flat buckets (~25 MB, one dtype each, fixed registration order, so every rank issues
// the same sequence of collectives), all-reduced, averaged and written back. A parameter with a gradient on some
// rank but not on another counts as zeros there; a parameter with a gradient on no rank stays without one (as on
// 1 rank, so AdamW skips it: a frozen branch is not weight-decayed at N ranks either). After prepare_grads() (the
// Trainer's one-gradient-set path) backward writes into the buckets and each bucket travels with a trailer of
// presence flags: one all-reduce a bucket, nothing copied. Gradient sets given to reduce(grads) (stage 3's two sets,
// PCGrad's) are copied into the buckets, and their presence is agreed by one small all-reduce first, so ranks never
// disagree on what is reduced.
// reduce(grads) reduces any list of tensors aligned with the parameters (a named gradient set of the Trainer).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>
#include <torch/types.h>

namespace daei {

class Communicator;

struct Bucket {
  at::ScalarType dtype;
  std::vector<size_t> params;   // indices into the parameter list, in order
  std::vector<int64_t> offsets; // element offset of each parameter in the flat buffer
  int64_t numel = 0;
};

// Pure layout function (tested without MPI): parameters are taken in order; a new bucket starts when the dtype
// changes or the cap would be exceeded; a parameter larger than the cap gets a bucket of its own.
std::vector<Bucket> plan_buckets(const std::vector<int64_t>& numels, const std::vector<at::ScalarType>& dtypes,
                                 int64_t cap_bytes);

class GradReducer {
 public:
  static constexpr int64_t kDefaultBucketBytes = 25 << 20;
  GradReducer(Communicator& comm, std::vector<at::Tensor> params, int64_t cap_bytes = kDefaultBucketBytes);

  // Copies rank 0's parameter values to every rank (call once before training).
  void broadcast_parameters(int root = 0);
  // Starts a step's backward pass. At one rank it drops every .grad. At N ranks each trainable parameter's .grad
  // becomes a zeroed alias of its place in the bucket, so backward accumulates straight into the buckets and reduce()
  // sends them without copying; hooks record which parameters received a gradient, so "no gradient" still differs
  // from zeros after reduce(). `prescaled`: the caller multiplies each rank's loss by loss_scale() = 1/world before
  // backward, so the all-reduce's sum is already the mean and reduce() makes no pass of its own over the buckets
  // (the averaging division costs as much as a copy). Exact for a power-of-two world (a scaling by 2^-k commutes with
  // rounding); otherwise equal to the divided mean to a few ulp.
  void prepare_grads(bool prescaled = false);
  double loss_scale() const;
  // Averages the parameters' .grad across ranks. Afterwards each .grad is a view into its bucket (no copy back): valid
  // until the next prepare_grads() or reduce(), which is what a training step needs.
  void reduce();
  // Averages `grads` (aligned with the parameters; undefined = no gradient on this rank) across ranks in place.
  void reduce(std::vector<at::Tensor>& grads);
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void reduce_into(std::vector<at::Tensor>& grads, bool as_views);
  void reduce_prepared();
  Communicator& comm_;
  std::vector<at::Tensor> params_;
  std::vector<Bucket> buckets_;
  void ensure_bucket(size_t bi, const at::Device& device);
  std::vector<at::Tensor> flat_;  // one buffer a bucket, kept between steps
  // Set by the gradient hooks after prepare_grads(): which parameters received a gradient this step. Shared with the
  // hooks, which may outlive the reducer.
  std::shared_ptr<std::vector<char>> arrived_;
  bool grads_in_buckets_ = false;
  bool prescaled_ = false;  // prepare_grads(true): the buckets are summed, not averaged
};

}  // namespace daei
