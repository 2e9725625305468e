// The held-out CE (stages/loop/heldout.h) under mpirun -np 2 / 3: the rows split over the ranks give the 1-rank number
// exactly, whatever the batch, and the model is in eval mode during the pass and back in training mode after it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../support/mpi_world.h"
#include "dist/communicator.h"
#include "stages/loop/heldout.h"

using namespace daei;

TEST(HeldOutMpi, RowsSplitOverRanksEqualOneRank) {
  torch::nn::Linear model(3, 2);
  model->train();
  // Row r has r % 5 + 1 tokens, each with loss (r + 1) / 10: a token-weighted mean, not a mean of row means.
  std::vector<int64_t> seen;
  HeldOutLoss loss = [&](const std::vector<int64_t>& rows) {
    EXPECT_FALSE(model->is_training());
    double sum = 0;
    int64_t count = 0;
    for (int64_t r : rows) {
      seen.push_back(r);
      sum += static_cast<double>(r % 5 + 1) * (static_cast<double>(r) + 1) / 10;
      count += r % 5 + 1;
    }
    return TokenLoss{torch::tensor(sum, torch::kFloat64), count};
  };
  const int64_t rows = 23;
  double want_sum = 0, want_count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    want_sum += static_cast<double>(r % 5 + 1) * (static_cast<double>(r) + 1) / 10;
    want_count += static_cast<double>(r % 5 + 1);
  }
  LocalCommunicator one;
  for (int64_t batch : {1, 4, 64}) {
    seen.clear();
    const double w = heldout_ce(test::world(), rows, batch, *model, loss);
    EXPECT_NEAR(w, want_sum / want_count, 1e-12) << batch;
    EXPECT_TRUE(model->is_training());
    // This rank saw rows rank, rank + W, ...: every row once over the world.
    for (size_t i = 0; i < seen.size(); ++i)
      EXPECT_EQ(seen[i], test::world().rank() + static_cast<int64_t>(i) * test::world().size());
    seen.clear();
    EXPECT_NEAR(heldout_ce(one, rows, batch, *model, loss), w, 1e-12) << batch;
    EXPECT_EQ(static_cast<int64_t>(seen.size()), rows);
  }
}
