#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/control.h"
#include "dist/grad_reducer.h"
#include "dist/mpi_process.h"
#include "dist/shard_plan.h"

using namespace daei;

TEST(ShardPlan, EveryItemOncePerEpochEqualSteps) {
  for (int64_t n : {0, 1, 7, 10, 97, 100}) {
    for (int world : {1, 2, 3, 4}) {
      for (int64_t lb : {1, 3, 8}) {
        std::multiset<int64_t> seen;
        size_t len = 0;
        for (int r = 0; r < world; ++r) {
          auto p = shard_plan(n, world, r, /*epoch=*/2, /*seed=*/11, lb);
          if (r == 0) len = p.size();
          EXPECT_EQ(p.size(), len) << "unequal step counts n=" << n << " world=" << world;
          EXPECT_EQ(p.size() % lb, 0u);
          for (auto i : p)
            if (i >= 0) seen.insert(i);
        }
        ASSERT_EQ(static_cast<int64_t>(seen.size()), n) << "n=" << n << " world=" << world << " lb=" << lb;
        int64_t expect = 0;
        for (auto i : seen) EXPECT_EQ(i, expect++);  // each exactly once
      }
    }
  }
}

TEST(ShardPlan, RanksTogetherSeeTheOneRankBatches) {
  // N ranks on local batch B/N read exactly the global batches that 1 rank with batch B reads.
  const int64_t n = 50, B = 6;
  auto one = shard_plan(n, 1, 0, 3, 5, B);
  for (int world : {2, 3}) {
    std::vector<std::vector<int64_t>> parts;
    for (int r = 0; r < world; ++r) parts.push_back(shard_plan(n, world, r, 3, 5, B / world));
    for (size_t step = 0; step * B < one.size(); ++step)
      for (int r = 0; r < world; ++r)
        for (int64_t j = 0; j < B / world; ++j)
          EXPECT_EQ(parts[r][step * (B / world) + j], one[step * B + r * (B / world) + j]);
  }
}

TEST(ShardPlan, DeterministicAndEpochsDiffer) {
  EXPECT_EQ(shard_plan(100, 2, 1, 0, 9), shard_plan(100, 2, 1, 0, 9));
  EXPECT_NE(shard_plan(100, 2, 1, 0, 9), shard_plan(100, 2, 1, 1, 9));
  EXPECT_NE(shard_plan(100, 2, 1, 0, 9), shard_plan(100, 2, 1, 0, 10));
  EXPECT_EQ(steps_per_epoch(10, 3, 2, true), 1);
  EXPECT_EQ(steps_per_epoch(10, 3, 2, false), 2);
  EXPECT_THROW(shard_plan(10, 2, 2, 0, 0), daei::Error);
}

TEST(EpochOrder, IsAPermutationAtDomainEdgesAndStepRowsMatchThePlan) {
  // n around the Feistel domain's powers of 4 (cycle walking from 4n-1 down to n itself)
  for (int64_t n : {1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 1000, 4096, 4097, 70001}) {
    const EpochOrder order(n, 42, 3);
    std::vector<char> hit(n, 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = order[i];
      ASSERT_TRUE(v >= 0 && v < n) << "n=" << n << " pos " << i << " -> " << v;
      ASSERT_FALSE(hit[v]) << "n=" << n << ": " << v << " twice";
      hit[v] = 1;
    }
  }
  const EpochOrder order(97, 11, 2);
  auto plan = shard_plan(97, 3, 1, 2, 11, 4);
  for (int64_t s = 0; s * 4 < int64_t(plan.size()); ++s)
    EXPECT_EQ(step_rows(order, 3, 1, s, 4), std::vector<int64_t>(plan.begin() + s * 4, plan.begin() + (s + 1) * 4));
  EXPECT_THROW(order[97], daei::Error);
  EXPECT_THROW(order[-1], daei::Error);
}

TEST(EpochOrder, LooksShuffled) {
  // A shuffle, not a near-identity or a stride: for a uniform permutation the mean |order[i] - i| is (n²-1)/(3n)
  // and the number of fixed points is about 1; consecutive positions land far apart.
  const int64_t n = 100000;
  const EpochOrder order(n, 7, 0);
  double moved = 0, adjacent_gap = 0;
  int64_t fixed = 0, prev = order[0];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = order[i];
    moved += std::abs(double(v - i));
    fixed += v == i;
    if (i > 0) adjacent_gap += std::abs(double(v - prev));
    prev = v;
  }
  EXPECT_NEAR(moved / n, n / 3.0, 0.01 * n);
  EXPECT_NEAR(adjacent_gap / (n - 1), n / 3.0, 0.01 * n);
  EXPECT_LE(fixed, 8);
  // the first rows of two epochs and of two seeds share almost nothing
  std::set<int64_t> a, b, c;
  for (int64_t i = 0; i < 1000; ++i) a.insert(order[i]), b.insert(EpochOrder(n, 7, 1)[i]), c.insert(EpochOrder(n, 8, 0)[i]);
  int64_t ab = 0, ac = 0;
  for (auto v : a) ab += b.count(v), ac += c.count(v);
  EXPECT_LE(ab, 40);  // expected overlap 10
  EXPECT_LE(ac, 40);
}

TEST(GradReducer, BucketLayoutExact) {
  std::vector<int64_t> n{2, 3, 10, 1, 4, 4};
  std::vector<at::ScalarType> t{at::kFloat, at::kFloat, at::kFloat, at::kFloat, at::kDouble, at::kDouble};
  auto b = plan_buckets(n, t, 24);
  // float: {0,1} = 20 B; param 2 = 40 B alone (over cap); {3} = 4 B; double: {4} 32 B alone, {5} alone.
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b[0].params, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(b[0].offsets, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(b[0].numel, 5);
  EXPECT_EQ(b[1].params, (std::vector<size_t>{2}));
  EXPECT_EQ(b[2].params, (std::vector<size_t>{3}));
  EXPECT_EQ(b[3].dtype, at::kDouble);
  EXPECT_EQ(b[3].params, (std::vector<size_t>{4}));
  EXPECT_EQ(b[4].params, (std::vector<size_t>{5}));
  // Default cap: everything of one dtype in one bucket.
  auto big = plan_buckets(n, t, 25 << 20);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].numel, 16);
}

TEST(Communicator, LocalIsIdentity) {
  LocalCommunicator c;
  auto t = torch::tensor({1.0f, 2.0f});
  c.allreduce(t, ReduceOp::Avg);
  EXPECT_TRUE(torch::equal(t, torch::tensor({1.0f, 2.0f})));
  EXPECT_EQ(c.allgather("x"), std::vector<std::string>{"x"});
  EXPECT_EQ(c.broadcast(std::string("abc"), 0), "abc");
  ControlWord w;
  w.save = true;
  auto agreed = agree(c, w);
  EXPECT_TRUE(agreed.save);
  EXPECT_FALSE(agreed.stop);
}

TEST(Launch, SrunWithoutPmixIsRefused) {
  EXPECT_NO_THROW(check_launch(1, nullptr));
  EXPECT_NO_THROW(check_launch(1, "1"));
  EXPECT_NO_THROW(check_launch(4, "4"));
  try {
    check_launch(1, "4");
    FAIL();
  } catch (const daei::Error& e) {
    EXPECT_NE(std::string(e.what()).find("without PMIx"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("mpirun"), std::string::npos);
  }
}
