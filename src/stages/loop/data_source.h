// Where the stages get their rows: the HDF5 caches of the data layer (runs/NAME/cache/SPLIT), or — for tests and
// e2e runs without a corpus — a seeded synthetic set (train.synthetic_rows > 0): clean rows are L2-normalised
// low-rank Gaussian vectors, noisy = clean + σ·N(0, I) with the noise fixed per row, as in a cache.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "data/dataset.h"
#include "data/eval_split.h"

namespace daei {

class Config;
class Release;

// A split's noisy rows, checked against the σ of the run's release (its cache was noised at that σ).
std::shared_ptr<const NoisyDataset> open_noisy_split(const Config& cfg, const std::string& run_dir,
                                                     const std::string& split, const Release& release);

// The synthetic set itself (deterministic in seed and split), and as the train.synthetic_* keys ask for it.
EvalSplit synthetic_split(int64_t rows, int64_t dim, double sigma, uint64_t seed, const std::string& split);
EvalSplit synthetic_from_config(const Config& cfg, const std::string& split);

}  // namespace daei
