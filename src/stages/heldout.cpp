#include "stages/heldout.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"
#include "dist/communicator.h"

namespace daei {

double heldout_ce(Communicator& comm, int64_t rows, int64_t batch, torch::nn::Module& model, const HeldOutLoss& loss) {
  DAEI_CHECK(rows > 0 && batch > 0, "held-out CE: rows and batch must be > 0");
  torch::NoGradGuard ng;
  const bool was_training = model.is_training();
  model.eval();
  // Rank r takes rows r, r + W, ...: the union over ranks is every row once.
  std::vector<int64_t> mine;
  for (int64_t i = comm.rank(); i < rows; i += comm.size()) mine.push_back(i);
  double sum = 0, count = 0;
  for (size_t b = 0; b < mine.size(); b += static_cast<size_t>(batch)) {
    std::vector<int64_t> part(mine.begin() + b, mine.begin() + std::min(mine.size(), b + static_cast<size_t>(batch)));
    const TokenLoss tl = loss(part);
    sum += tl.sum.item<double>();
    count += static_cast<double>(tl.count);
  }
  auto t = torch::tensor({sum, count}, torch::kFloat64);
  comm.allreduce(t, ReduceOp::Sum);
  if (was_training) model.train();
  const double n = t[1].item<double>();
  return n > 0 ? t[0].item<double>() / n : 0.0;
}

}  // namespace daei
