// Held-out cross-entropy (issue 21): every T5 stage logs, beside its training CE, the CE per real token on fixed
// validation rows — the first `rows` rows of the val split, the same rows at every evaluation and in every stage —
// with the model in eval mode (no dropout) and without gradients. The rows are split over the ranks and the sums
// all-reduced, so every rank returns the same number, whatever the world size.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/attack/inverter.h"

namespace torch::nn {
class Module;
}

namespace daei {

class Communicator;

// The loss of a batch of validation rows: (sum over real tokens, token count), as the stage's training loss.
using HeldOutLoss = std::function<TokenLoss(const std::vector<int64_t>& rows)>;

// CE per token over rows [0, rows), `batch` rows a call. The model is put back in training mode afterwards.
double heldout_ce(Communicator& comm, int64_t rows, int64_t batch, torch::nn::Module& model, const HeldOutLoss& loss);

// The mean over rows [0, rows) of a per-row score, split over the ranks as heldout_ce and all-reduced: `scores`
// gets a batch of rows and returns one score a row (e.g. the BLEU of each decoded recovery against its text).
using HeldOutScores = std::function<std::vector<double>(const std::vector<int64_t>& rows)>;
double heldout_mean(Communicator& comm, int64_t rows, int64_t batch, torch::nn::Module& model,
                    const HeldOutScores& scores);

}  // namespace daei
