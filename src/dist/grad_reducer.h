// Data-parallel gradient averaging for libtorch, which has no DDP in C++. After backward():
//   reducer.reduce();   // every parameter's .grad becomes the mean over ranks
// Gradients are packed into flat buckets (~25 MB, one dtype each, fixed registration order, so every rank issues
// the same sequence of collectives), all-reduced, averaged and written back. A parameter with a gradient on some
// rank but not on another counts as zeros there; a parameter with a gradient on no rank stays without one (as on
// 1 rank, so AdamW skips it: a frozen branch is not weight-decayed at N ranks either). The presence of gradients is
// agreed by one small all-reduce first, so ranks never disagree on what is reduced.
// reduce(grads) reduces any list of tensors aligned with the parameters (a named gradient set of the Trainer).
#pragma once
#include <cstddef>
#include <cstdint>
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
  // Averages the parameters' .grad across ranks. Afterwards each .grad is a view into its bucket (no copy back): valid
  // until the next reduce, which is what a training step needs (the Trainer drops every .grad before the next one).
  void reduce();
  // Averages `grads` (aligned with the parameters; undefined = no gradient on this rank) across ranks in place.
  void reduce(std::vector<at::Tensor>& grads);
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void reduce_into(std::vector<at::Tensor>& grads, bool as_views);
  Communicator& comm_;
  std::vector<at::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<at::Tensor> flat_;  // one buffer a bucket, kept between steps
};

}  // namespace daei
