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

// The train.synthetic_* keys (rows 0: the caches) and cache.read_buffer_mb, read once by from_config.
struct DataSourceOptions {
  int64_t synthetic_rows = 0, synthetic_dim = 0;
  double synthetic_sigma = 0;
  int64_t read_buffer_mb = 0;

  template <class Self, class Visit>
  static void train_fields(Self& s, Visit&& v) {
    v("synthetic_rows", s.synthetic_rows), v("synthetic_dim", s.synthetic_dim);
    v("synthetic_sigma", s.synthetic_sigma);
  }
  template <class Self, class Visit>
  static void cache_fields(Self& s, Visit&& v) {
    v("read_buffer_mb", s.read_buffer_mb);
  }
  static DataSourceOptions from_config(const Config& cfg);
};

// A split's noisy rows, checked against the σ of the run's release (its cache was noised at that σ).
std::shared_ptr<const NoisyDataset> open_noisy_split(const Config& cfg, const std::string& run_dir,
                                                     const std::string& split, const Release& release);

// The synthetic set itself (deterministic in seed and split), and as the train.synthetic_* keys ask for it.
EvalSplit synthetic_split(int64_t rows, int64_t dim, double sigma, uint64_t seed, const std::string& split);
EvalSplit synthetic_from_config(const Config& cfg, const std::string& split);

}  // namespace daei
