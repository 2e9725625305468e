#include "eval/clean_cache.h"

#include "model/release/embedder.h"

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "data/run_layout.h"

namespace daei {

std::unique_ptr<CleanCache> CleanCache::open(const std::string& cache_dir, OfflineEvalOnly) {
  std::unique_ptr<CleanCache> c(new CleanCache());
  c->impl_ = NoisyCache::open_kind(cache_dir + "/clean", "clean", {}, {});
  return c;
}

CleanCache::~CleanCache() = default;
int64_t CleanCache::size() const { return impl_->size(); }
int64_t CleanCache::dim() const { return impl_->dim(); }
double CleanCache::sigma() const { return impl_->sigma(); }
at::Tensor CleanCache::clean(const std::vector<int64_t>& idx) const { return impl_->noisy(idx); }
at::Tensor CleanCache::all_clean() const { return impl_->all_noisy(); }
std::vector<std::string> CleanCache::texts(const std::vector<int64_t>& idx) const { return impl_->texts(idx); }

EvalSplit open_eval_split(const std::string& run_dir, const std::string& split, int64_t max_texts) {
  const RunLayout layout(run_dir);
  const std::string dir = layout.cache(split);
  DAEI_CHECK(layout.cache_complete(split) && layout.clean_cache_complete(split),
             "eval: {} needs the noisy and the offline-eval clean cache (`daei cache build --split {} --clean`)", dir,
             split);
  auto noisy = NoisyCache::open(dir);
  auto clean = CleanCache::open(dir, CleanCache::OfflineEvalOnly{});
  DAEI_CHECK(clean->size() == noisy->size(), "{}: {} clean rows for {} noisy rows", dir, clean->size(), noisy->size());
  const int64_t n = max_texts > 0 ? std::min(max_texts, noisy->size()) : noisy->size();
  std::vector<int64_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = i;
  EvalSplit s;
  s.name = split;
  s.texts = noisy->texts(rows);
  s.noisy = noisy->noisy_range(0, n);
  s.clean = clean->clean(rows);
  s.sigma = noisy->sigma();
  return s;
}

std::function<at::Tensor(const std::vector<std::string>&, const std::vector<std::string>&)> clean_hypothesis_query(
    std::shared_ptr<Embedder> clean) {
  DAEI_CHECK(clean != nullptr, "clean_hypothesis_query: no clean embedder");
  return [clean](const std::vector<std::string>& texts, const std::vector<std::string>&) { return clean->embed(texts); };
}

}  // namespace daei
