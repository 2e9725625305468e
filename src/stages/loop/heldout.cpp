#include "stages/loop/heldout.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "dist/communicator.h"

namespace daei {

namespace {

// sum / count over rows [0, rows): rank r takes rows r, r + W, ... (the union over ranks is every row once),
// `batch` a call, in eval mode without gradients; (sum, count) all-reduced.
double heldout_ratio(Communicator& comm, int64_t rows, int64_t batch, torch::nn::Module& model,
                     const std::function<std::pair<double, double>(const std::vector<int64_t>&)>& part_sums) {
  DAEI_CHECK(rows > 0 && batch > 0, "held-out evaluation: rows and batch must be > 0");
  torch::NoGradGuard ng;
  const bool was_training = model.is_training();
  model.eval();
  std::vector<int64_t> mine;
  for (int64_t i = comm.rank(); i < rows; i += comm.size()) mine.push_back(i);
  double sum = 0, count = 0;
  for (size_t b = 0; b < mine.size(); b += static_cast<size_t>(batch)) {
    std::vector<int64_t> part(mine.begin() + b, mine.begin() + std::min(mine.size(), b + static_cast<size_t>(batch)));
    const auto [s, c] = part_sums(part);
    sum += s;
    count += c;
  }
  auto t = torch::tensor({sum, count}, torch::kFloat64);
  comm.allreduce(t, ReduceOp::Sum);
  if (was_training) model.train();
  const double n = t[1].item<double>();
  return n > 0 ? t[0].item<double>() / n : 0.0;
}

}  // namespace

double heldout_ce(Communicator& comm, int64_t rows, int64_t batch, torch::nn::Module& model, const HeldOutLoss& loss) {
  return heldout_ratio(comm, rows, batch, model, [&](const std::vector<int64_t>& part) {
    const TokenLoss tl = loss(part);
    return std::make_pair(tl.sum.item<double>(), static_cast<double>(tl.count));
  });
}

double heldout_mean(Communicator& comm, int64_t rows, int64_t batch, torch::nn::Module& model,
                    const HeldOutScores& scores) {
  return heldout_ratio(comm, rows, batch, model, [&](const std::vector<int64_t>& part) {
    const std::vector<double> s = scores(part);
    DAEI_CHECK(s.size() == part.size(), "held-out scores: {} for {} rows", s.size(), part.size());
    double sum = 0;
    for (double x : s) sum += x;
    return std::make_pair(sum, static_cast<double>(s.size()));
  });
}

}  // namespace daei
