// Clean embeddings, for offline evaluation and the clean-data references (clean-to-clean, clean-to-noisy, the oracle
// Wiener filter) only. This header and its definitions belong to daei_eval, which the training stages do not link:
// an attack stage can neither include a declaration nor link a definition of the clean reader (threat model,
// DESIGN.md). A test checks that no library below daei_eval defines it.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "data/cache.h"
#include "data/eval_split.h"

namespace daei {

class Config;
class Embedder;

class CleanCache {
 public:
  struct OfflineEvalOnly {};  // spelled out at every call site: CleanCache::open(dir, CleanCache::OfflineEvalOnly{})
  static std::unique_ptr<CleanCache> open(const std::string& cache_dir, OfflineEvalOnly);
  ~CleanCache();
  int64_t size() const;
  int64_t dim() const;
  double sigma() const;  // the release σ of the split's noisy rows
  at::Tensor clean(const std::vector<int64_t>& idx) const;  // float32 [n, d]
  at::Tensor all_clean() const;
  std::vector<std::string> texts(const std::vector<int64_t>& idx) const;

 private:
  CleanCache() = default;
  std::unique_ptr<NoisyCache> impl_;  // same layout, dataset "clean"
};

// The black box replaced by the defender's clean embedder: hypothesis queries answered without noise (the
// daei-clean-hyp reference, outside the threat model). Keys are ignored; nothing is counted differently.
std::function<at::Tensor(const std::vector<std::string>&, const std::vector<std::string>&)> clean_hypothesis_query(
    std::shared_ptr<Embedder> clean);

// The one opener of a cached split (runs/NAME/cache/SPLIT and its clean/): its first max_texts rows (0 = all) with
// texts, clean and noisy embeddings and the cache's σ.
EvalSplit open_eval_split(const std::string& run_dir, const std::string& split, int64_t max_texts = 0);

}  // namespace daei
