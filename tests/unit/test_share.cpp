// dist/share.h: a list split over the ranks in whole blocks and gathered back in order (eval on every rank, issue 35).
#include <gtest/gtest.h>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/share.h"

using namespace daei;

TEST(BlockShare, WholeBlocksInRankOrderEveryItemOnceBalanced) {
  for (int64_t n : {0, 1, 5, 6, 7, 24, 97}) {
    for (int64_t block : {1, 2, 6, 64}) {
      for (int world : {1, 2, 3, 5}) {
        SCOPED_TRACE(fmt::format("n {} block {} world {}", n, block, world));
        int64_t next = 0, fewest = n, most = 0;
        for (int r = 0; r < world; ++r) {
          const ItemRange s = block_share(n, block, r, world);
          EXPECT_EQ(s.begin, next);  // contiguous, rank order = item order
          EXPECT_LE(s.begin, s.end);
          if (s.size() > 0) {
            EXPECT_EQ(s.begin % block, 0);
          }  // a share starts on a block boundary: the one process's batches
          next = s.end;
          const int64_t blocks = (s.size() + block - 1) / block;
          fewest = std::min(fewest, blocks);
          most = std::max(most, blocks);
        }
        EXPECT_EQ(next, n);
        EXPECT_LE(most - fewest, 1);
      }
    }
  }
  EXPECT_THROW(block_share(5, 0, 0, 1), Error);
  EXPECT_THROW(block_share(5, 2, 2, 2), Error);
}

TEST(BlockShare, BlocksOfARangeAreTheOneProcessBatches) {
  const ItemRange r = block_share(23, 4, 1, 2);  // blocks 3..5 of 6: items 12..23
  ASSERT_EQ(r.begin, 12);
  const auto b = blocks_of(r, 4);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].begin, 12);
  EXPECT_EQ(b[1].begin, 16);
  EXPECT_EQ(b[2].begin, 20);
  EXPECT_EQ(b[2].end, 23);
  EXPECT_TRUE(blocks_of({7, 7}, 4).empty());
}

// Two ranks that hold the same part: what travels between ranks (the packed bytes) without mpirun.
class TwinCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  std::string kind() const override { return "twin"; }
  using Communicator::allreduce;
  using Communicator::broadcast;
  void allreduce(at::Tensor&, ReduceOp) override {}
  void broadcast(at::Tensor&, int) override {}
  std::vector<std::string> allgather(const std::string& s) override { return {s, s}; }
  void barrier() override {}
  void abort(int) override {}
};

TEST(GatherInOrder, PartsTravelAsExactBytes) {
  TwinCommunicator twin;
  const std::vector<std::string> s{"a", "", std::string("x\0y", 3), "\xff\xfe"};
  auto twice = s;
  twice.insert(twice.end(), s.begin(), s.end());
  EXPECT_EQ(gather_in_order(twin, s), twice);
  EXPECT_EQ(gather_in_order(twin, std::vector<double>{0.1, -0.0}), (std::vector<double>{0.1, -0.0, 0.1, -0.0}));
  EXPECT_EQ(gather_in_order(twin, std::vector<int64_t>{int64_t(1) << 50, -3}),
            (std::vector<int64_t>{int64_t(1) << 50, -3, int64_t(1) << 50, -3}));
  EXPECT_TRUE(gather_in_order(twin, std::vector<std::string>{}).empty());
}

TEST(GatherInOrder, OneProcessGetsItsOwnList) {
  LocalCommunicator one;
  const std::vector<std::string> s{"a", "", std::string("x\0y", 3)};
  EXPECT_EQ(gather_in_order(one, s), s);
  EXPECT_EQ(gather_in_order(one, std::vector<double>{1.5, -0.0}), (std::vector<double>{1.5, -0.0}));
  EXPECT_EQ(gather_in_order(one, std::vector<int64_t>{}), std::vector<int64_t>{});
}
