#include "stages/loop/data_source.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "data/run_layout.h"
#include "model/release/release.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/cache.h"

namespace daei {

EvalSplit synthetic_split(int64_t rows, int64_t dim, double sigma, uint64_t seed, const std::string& split) {
  // The same low-rank basis for every split; rows and noise differ per split.
  auto gb = at::make_generator<at::CPUGeneratorImpl>(splitmix64(seed ^ 0xBA515ULL));
  const int64_t rank = std::max<int64_t>(2, dim / 4);
  auto basis = torch::randn({rank, dim}, gb);
  auto scale = torch::exp(-torch::arange(rank, torch::kFloat32) / (rank / 3.0)).unsqueeze(1);
  auto g = at::make_generator<at::CPUGeneratorImpl>(hash_key(fmt::format("synthetic/{}/{}", seed, split)));
  auto coef = torch::randn({rows, rank}, g);
  auto mean = torch::randn({dim}, gb) * 0.5;
  auto clean = torch::matmul(coef, basis * scale) + mean;
  clean = clean / clean.norm(2, 1, true);
  EvalSplit out;
  out.name = split;
  out.clean = clean;
  out.noisy = clean + sigma * torch::randn({rows, dim}, g);
  out.sigma = sigma;
  return out;
}

DataSourceOptions DataSourceOptions::from_config(const Config& cfg) {
  DataSourceOptions o;
  train_fields(o, config_reader(cfg, "train"));
  cache_fields(o, config_reader(cfg, "cache"));
  return o;
}

EvalSplit synthetic_from_config(const Config& cfg, const std::string& split) {
  const auto o = DataSourceOptions::from_config(cfg);
  const int64_t n = o.synthetic_rows;
  return synthetic_split(split == "train" ? n : std::max<int64_t>(64, n / 8), o.synthetic_dim, o.synthetic_sigma,
                         static_cast<uint64_t>(cfg.integer("run.seed")), split);
}

std::shared_ptr<const NoisyDataset> open_noisy_split(const Config& cfg, const std::string& run_dir,
                                                     const std::string& split, const Release& release) {
  const auto options = DataSourceOptions::from_config(cfg);
  if (options.synthetic_rows > 0) {
    LOG_WARN("[data] train.synthetic_rows = {}: the {} split is seeded synthetic rows, not the cache; what is trained "
             "on them measures no embedder", options.synthetic_rows, split);
    auto s = synthetic_from_config(cfg, split);
    return std::make_shared<InMemoryDataset>(s.noisy, std::vector<std::string>{}, s.sigma);
  }
  const RunLayout layout(run_dir);
  const std::string dir = layout.cache(split);
  DAEI_CHECK(layout.cache_complete(split),
             "{}: no complete cache (manifest.json missing); run `daei cache build --split {}` first", dir, split);
  CacheExpect expect;
  expect.sigma = release.sigma();
  CacheReadOptions read;
  read.buffer_bytes = options.read_buffer_mb << 20;
  return std::shared_ptr<const NoisyDataset>(NoisyCache::open(dir, expect, read));
}

}  // namespace daei
