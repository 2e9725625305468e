// The floors every results table shows beside the attacks (DESIGN.md, Conventions): a row is a recovery only where
// it is above both.
//   floor-constant   one string for every text: the word set that maximises mean token F1 (vec2text's, on sets of
//                    word_tokenize tokens) over the attacker's training texts, found greedily; chosen without the
//                    evaluated texts. Token F1 on word sets rewards function words: "the of a ..." scores about 0.22.
//   floor-retrieval  a real attack that trains nothing: the training text whose answer from the black box (the
//                    train cache's noisy rows, the same answers every trained row learnt from) is nearest in
//                    cosine to y, cut to the inverters' max_length_eval pieces as the truths are.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "eval/system_spec.h"

namespace daei {

class Config;
class NoisyDataset;
struct EvalContext;

struct ConstantFloor {
  std::string text;          // the chosen tokens in the order they were taken, space-separated
  double mean_token_f1 = 0;  // its mean token F1 over the texts it was chosen on (metrics::token_f1)
  int64_t texts = 0;         // how many texts it was chosen on
};
// Greedy: start empty; add the candidate token (the max_candidates most document-frequent word_tokenize tokens that
// tokenise to themselves) whose addition raises the mean token F1 most; stop when none raises it. Ties: the more
// frequent token. Deterministic.
ConstantFloor choose_constant_floor(const std::vector<std::string>& texts, int64_t max_candidates = 300);

// The nearest training answer, in cosine, for each row of y [n, d] (float32); reads `answers` in chunks of
// chunk_rows so that memory stays bounded whatever the training set's size. Returns row indices of `answers`.
std::vector<int64_t> nearest_answers(const NoisyDataset& answers, int64_t rows, const at::Tensor& y,
                                     int64_t chunk_rows = 65536);

struct FloorOptions {
  int64_t constant_texts = 5000;  // eval.floor_texts: training texts the constant is chosen on
  int64_t candidates = 300;       // eval.floor_candidates
  int64_t retrieval_rows = 0;     // eval.floor_retrieval_rows: training answers searched; 0 = all
};

// The two floor rows of a run (empty, with a log line, for a synthetic run, which has no texts). The constant is
// chosen here, once; retrieval reads the train cache at each recover().
std::vector<SystemSpec> floor_systems(const Config& cfg, const EvalContext& ctx, const std::string& run_dir);

}  // namespace daei
