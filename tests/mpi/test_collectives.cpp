#include <gtest/gtest.h>
#include <torch/torch.h>

#include "dist/communicator.h"
#include "dist/control.h"
#include "dist/grad_reducer.h"
#include "dist/mpi_process.h"

using namespace daei;

namespace {
std::unique_ptr<Communicator>& comm() {
  static auto c = make_mpi_communicator();
  return c;
}
}  // namespace

TEST(Mpi, RankInfo) {
  auto& c = *comm();
  EXPECT_GE(c.size(), 2);
  EXPECT_EQ(c.size(), MpiProcess::info().world);
  EXPECT_GE(c.local_rank(), 0);
  EXPECT_LT(c.local_rank(), c.size());
}

TEST(Mpi, AllreduceEveryDtype) {
  auto& c = *comm();
  const int W = c.size(), r = c.rank();
  const double sum = W * (W - 1) / 2.0;  // sum of ranks
  for (auto dt : {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16}) {
    auto t = torch::full({5}, r, dt);
    c.allreduce(t, ReduceOp::Sum);
    EXPECT_TRUE(torch::allclose(t.to(torch::kFloat64), torch::full({5}, sum, torch::kFloat64)));
    t = torch::full({3}, r, dt);
    c.allreduce(t, ReduceOp::Avg);
    EXPECT_NEAR(t[0].item<double>(), sum / W, 1e-2);
    t = torch::full({2}, r, dt);
    c.allreduce(t, ReduceOp::Max);
    EXPECT_EQ(t[1].item<double>(), W - 1);
  }
  for (auto dt : {torch::kInt64, torch::kInt32, torch::kUInt8}) {
    auto t = torch::full({4}, r + 1, dt);
    c.allreduce(t, ReduceOp::Sum);
    EXPECT_EQ(t[3].item<int64_t>(), W * (W + 1) / 2);
  }
  auto nc = torch::arange(6, torch::kFloat32).view({2, 3}).t();  // non-contiguous
  c.allreduce(nc, ReduceOp::Sum);
  EXPECT_TRUE(torch::equal(nc, torch::arange(6, torch::kFloat32).view({2, 3}).t() * W));
  EXPECT_EQ(c.allreduce(int64_t(r), ReduceOp::Max), W - 1);
  EXPECT_DOUBLE_EQ(c.allreduce(1.5, ReduceOp::Sum), 1.5 * W);
}

TEST(Mpi, BroadcastAndAllgather) {
  auto& c = *comm();
  auto t = torch::full({3}, c.rank() + 10, torch::kFloat64);
  c.broadcast(t, 1);
  EXPECT_EQ(t[0].item<double>(), 11.0);
  auto h = torch::full({2}, c.rank() * 0.5, torch::kBFloat16);
  c.broadcast(h, 0);
  EXPECT_EQ(h[1].item<double>(), 0.0);
  std::string s = c.rank() == 0 ? "hello from root" : "";
  EXPECT_EQ(c.broadcast(s, 0), "hello from root");
  auto all = c.allgather("r" + std::to_string(c.rank()) + std::string(c.rank(), 'x'));
  ASSERT_EQ(static_cast<int>(all.size()), c.size());
  for (int i = 0; i < c.size(); ++i) EXPECT_EQ(all[i], "r" + std::to_string(i) + std::string(i, 'x'));
  c.barrier();
}

// A small MLP trained 20 AdamW steps on one fixed global batch: N ranks on B/N == 1 rank on B.
TEST(Mpi, DataParallelEquivalence) {
  auto& c = *comm();
  const int W = c.size();
  const int64_t B = 12;  // divisible by 2 and 3
  ASSERT_EQ(B % W, 0);
  torch::manual_seed(3);
  auto X = torch::randn({B, 6});
  auto Y = torch::randn({B, 2});
  auto make = [] {
    torch::manual_seed(17);
    return torch::nn::Sequential(torch::nn::Linear(6, 16), torch::nn::Tanh(), torch::nn::Linear(16, 2));
  };
  auto train = [&](torch::nn::Sequential net, Communicator* dp, torch::Tensor x, torch::Tensor y) {
    torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
    std::unique_ptr<GradReducer> red;
    if (dp) {
      red = std::make_unique<GradReducer>(*dp, net->parameters());
      red->broadcast_parameters();
    }
    for (int step = 0; step < 20; ++step) {
      opt.zero_grad();
      auto loss = torch::mse_loss(net->forward(x), y);
      loss.backward();
      if (red) red->reduce();
      torch::nn::utils::clip_grad_norm_(net->parameters(), 0.5);  // sees the global gradient
      opt.step();
    }
    return net;
  };
  auto ref = train(make(), nullptr, X, Y);
  // Rank 0 starts from different weights on purpose: broadcast_parameters must fix that.
  auto dist = make();
  if (c.rank() == 0) {
    torch::NoGradGuard ng;
    for (auto& p : dist->parameters()) p.add_(0.0);
  } else {
    torch::NoGradGuard ng;
    for (auto& p : dist->parameters()) p.add_(1.0);
  }
  const int64_t b = B / W;
  dist = train(dist, &c, X.narrow(0, c.rank() * b, b), Y.narrow(0, c.rank() * b, b));
  auto pr = ref->parameters(), pd = dist->parameters();
  double max_diff = 0;
  for (size_t i = 0; i < pr.size(); ++i) max_diff = std::max(max_diff, (pr[i] - pd[i]).abs().max().item<double>());
  EXPECT_LE(max_diff, 1e-6) << "world " << W;
  // And every rank holds the same parameters.
  for (auto& p : pd) {
    auto mx = p.detach().clone(), mn = -p.detach().clone();
    c.allreduce(mx, ReduceOp::Max);
    c.allreduce(mn, ReduceOp::Max);
    EXPECT_TRUE(torch::equal(mx, -mn));
  }
}

TEST(Mpi, GradReducerZeroForMissingGrad) {
  auto& c = *comm();
  auto a = torch::zeros({3}, torch::requires_grad());
  auto b = torch::zeros({2}, torch::requires_grad());
  // Only rank 0 produces a gradient for b.
  auto loss = a.sum() * (c.rank() + 1);
  if (c.rank() == 0) loss = loss + b.sum() * 6;
  loss.backward();
  GradReducer red(c, {a, b});
  red.reduce();
  const double W = c.size();
  EXPECT_NEAR(a.grad()[0].item<double>(), (W + 1) / 2.0, 1e-6);
  EXPECT_NEAR(b.grad()[1].item<double>(), 6.0 / W, 1e-6);
}

// reduce() leaves every .grad a view of its bucket; the Trainer drops the .grad before each step, so the next
// backward writes fresh tensors. Over several steps the averages stay exact.
TEST(Mpi, GradReducerViewsAcrossSteps) {
  auto& c = *comm();
  auto a = torch::zeros({4}, torch::requires_grad());
  auto b = torch::zeros({2, 3}, torch::requires_grad());
  GradReducer red(c, {a, b});
  const double W = c.size();
  for (int step = 1; step <= 3; ++step) {
    a.mutable_grad() = at::Tensor();
    b.mutable_grad() = at::Tensor();
    auto loss = (a.sum() + 2 * b.sum()) * double((c.rank() + 1) * step);
    loss.backward();
    red.reduce();
    EXPECT_NEAR(a.grad()[1].item<double>(), step * (W + 1) / 2.0, 1e-6) << "step " << step;
    EXPECT_NEAR(b.grad()[1][2].item<double>(), 2 * step * (W + 1) / 2.0, 1e-6) << "step " << step;
    EXPECT_EQ(b.grad().sizes(), b.sizes());
  }
}

// prepare_grads(): backward accumulates into the buckets themselves (the .grad after backward is the alias set
// before it, so reduce() copies nothing), two micro-batches add up, a gradient on rank 0 only averages with zeros,
// and a parameter no rank touched (or frozen) ends without a gradient, as after a fresh backward.
TEST(Mpi, GradReducerPreparedGradsAccumulateInBuckets) {
  auto& c = *comm();
  auto a = torch::zeros({4}, torch::requires_grad());
  auto only0 = torch::zeros({2}, torch::requires_grad());
  auto untouched = torch::zeros({3}, torch::requires_grad());
  auto frozen = torch::zeros({2});
  GradReducer red(c, {a, only0, untouched, frozen});
  const double W = c.size();
  for (int step = 1; step <= 3; ++step) {
    red.prepare_grads();
    ASSERT_TRUE(a.grad().defined());
    EXPECT_FALSE(frozen.grad().defined());
    const void* in_bucket = a.grad().data_ptr();
    for (int micro = 0; micro < 2; ++micro) {
      auto loss = a.sum() * double((c.rank() + 1) * step);
      if (c.rank() == 0) loss = loss + only0.sum() * 6;
      loss.backward();
    }
    if (c.size() > 1) {
      EXPECT_EQ(a.grad().data_ptr(), in_bucket) << "backward replaced the bucket alias";
    }
    red.reduce();
    EXPECT_NEAR(a.grad()[3].item<double>(), 2 * step * (W + 1) / 2.0, 1e-6) << "step " << step;
    EXPECT_NEAR(only0.grad()[1].item<double>(), 12.0 / W, 1e-6) << "step " << step;
    EXPECT_FALSE(untouched.grad().defined()) << "step " << step;
    EXPECT_FALSE(frozen.grad().defined());
  }
}

// reduce(grads) copies back: two gradient sets reduced through the same buckets both keep their own averages.
TEST(Mpi, GradReducerSetsKeepTheirValues) {
  auto& c = *comm();
  auto a = torch::zeros({3}, torch::requires_grad());
  GradReducer red(c, {a});
  std::vector<at::Tensor> s1{torch::full({3}, double(c.rank() + 1))}, s2{torch::full({3}, 10.0 * (c.rank() + 1))};
  red.reduce(s1);
  red.reduce(s2);
  const double W = c.size();
  EXPECT_NEAR(s1[0][0].item<double>(), (W + 1) / 2.0, 1e-6);
  EXPECT_NEAR(s2[0][2].item<double>(), 10.0 * (W + 1) / 2.0, 1e-6);
}

TEST(Mpi, CollectiveStop) {
  auto& c = *comm();
  int last = -1;
  for (int step = 1; step <= 20; ++step) {
    last = step;
    ControlWord local;
    local.stop = (c.rank() == c.size() - 1 && step == 7);
    if (agree(c, local).stop) break;
  }
  auto all = c.allgather(std::to_string(last));
  for (auto& s : all) EXPECT_EQ(s, "7");
}

namespace {
// Counts the all-reduces that pass through it (the rest goes to the real communicator).
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : c_(inner) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  int local_rank() const override { return c_.local_rank(); }
  std::string kind() const override { return c_.kind(); }
  using Communicator::allreduce;
  using Communicator::broadcast;
  void allreduce(at::Tensor& t, ReduceOp op) override {
    ++allreduces;
    ops.push_back(op);
    c_.allreduce(t, op);
  }
  void broadcast(at::Tensor& t, int root) override { c_.broadcast(t, root); }
  std::vector<std::string> allgather(const std::string& s) override { return c_.allgather(s); }
  void barrier() override { c_.barrier(); }
  void abort(int code) override { c_.abort(code); }
  int allreduces = 0;
  std::vector<ReduceOp> ops;

 private:
  Communicator& c_;
};
}  // namespace

// The Trainer's path (prepare_grads, backward, reduce): one all-reduce a bucket of trainable parameters and nothing
// else, no presence all-reduce (the flags travel in the buckets' trailers, so "no rank reached it" still ends without
// a gradient). A bucket of frozen parameters is not sent.
// Named gradient sets still agree on presence first (one more all-reduce).
TEST(Mpi, GradReducerPreparedPathSendsEachTrainableBucketOnce) {
  auto& c = *comm();
  CountingCommunicator counting(c);
  auto a = torch::zeros({4}, torch::requires_grad());
  auto only0 = torch::zeros({3}, torch::requires_grad());
  auto untouched = torch::zeros({2}, torch::requires_grad());
  auto frozen = torch::zeros({5});
  // A cap of 20 bytes: buckets [a], [only0, untouched], [frozen].
  GradReducer red(counting, {a, only0, untouched, frozen}, 20);
  ASSERT_EQ(red.buckets().size(), 3u);
  ASSERT_EQ(red.buckets()[1].params, (std::vector<size_t>{1, 2}));
  red.prepare_grads();
  auto loss = a.sum() * double(c.rank() + 1);
  if (c.rank() == 0) loss = loss + only0.sum() * 6;
  loss.backward();
  counting.allreduces = 0;
  red.reduce();
  const int one_rank = c.size() == 1;  // at 1 rank reduce() has nothing to do
  EXPECT_EQ(counting.allreduces, one_rank ? 0 : 2) << "the two buckets of trainable parameters, nothing else";
  const double W = c.size();
  EXPECT_NEAR(a.grad()[2].item<double>(), (W + 1) / 2.0, 1e-6);
  EXPECT_NEAR(only0.grad()[1].item<double>(), 6.0 / W, 1e-6);
  EXPECT_FALSE(untouched.grad().defined());
  EXPECT_FALSE(frozen.grad().defined());
  std::vector<at::Tensor> set{torch::ones({4}), at::Tensor(), at::Tensor(), at::Tensor()};
  counting.allreduces = 0;
  red.reduce(set);
  EXPECT_EQ(counting.allreduces, one_rank ? 0 : 2) << "presence, then a's bucket";
  EXPECT_NEAR(set[0][0].item<double>(), 1.0, 1e-6);
  EXPECT_FALSE(set[1].defined());
}

// The Trainer's prescaled path: each rank's loss times loss_scale() = 1/world before backward, and reduce() sums the
// buckets (no averaging pass). The result is the mean; at a power-of-two world bit for bit the averaged path's.
TEST(Mpi, GradReducerPrescaledSumIsTheMean) {
  auto& c = *comm();
  CountingCommunicator counting(c);
  auto a = torch::zeros({5}, torch::requires_grad());
  auto b = torch::zeros({5}, torch::requires_grad());
  GradReducer red(counting, {a});
  GradReducer avg(c, {b});
  auto x = torch::randn({5}, torch::TensorOptions().dtype(torch::kFloat32)) * (c.rank() + 1);  // differs by rank
  red.prepare_grads(/*prescaled=*/true);
  ((a * x).sum() * 3.7 * red.loss_scale()).backward();
  counting.ops.clear();
  red.reduce();
  avg.prepare_grads();
  ((b * x).sum() * 3.7).backward();
  avg.reduce();
  const int W = c.size();
  if (W > 1) {
    ASSERT_EQ(counting.ops.size(), 1u);
    EXPECT_EQ(counting.ops[0], ReduceOp::Sum) << "a prescaled bucket is summed, not averaged";
  }
  const double d = (a.grad() - b.grad()).abs().max().item<double>();
  if ((W & (W - 1)) == 0)
    EXPECT_TRUE(torch::equal(a.grad(), b.grad())) << "world " << W << ": max |Δ| = " << d;
  else
    EXPECT_LE(d, 1e-5 * b.grad().abs().max().item<double>()) << "world " << W;
  // The mean itself: every rank's 3.7·x averaged.
  auto all = x.clone();
  c.allreduce(all, ReduceOp::Sum);
  EXPECT_TRUE(torch::allclose(a.grad(), all * 3.7 / W, 1e-5, 1e-6));
}
