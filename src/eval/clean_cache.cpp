#include "eval/clean_cache.h"

#include "model/embedder.h"

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"

namespace daei {

std::unique_ptr<CleanCache> CleanCache::open(const std::string& cache_dir, OfflineEvalOnly) {
  std::unique_ptr<CleanCache> c(new CleanCache());
  c->impl_ = NoisyCache::open_kind(cache_dir + "/clean", "clean", {}, {});
  return c;
}

CleanCache::~CleanCache() = default;
int64_t CleanCache::size() const { return impl_->size(); }
int64_t CleanCache::dim() const { return impl_->dim(); }
at::Tensor CleanCache::clean(const std::vector<int64_t>& idx) const { return impl_->noisy(idx); }
at::Tensor CleanCache::all_clean() const { return impl_->all_noisy(); }
std::vector<std::string> CleanCache::texts(const std::vector<int64_t>& idx) const { return impl_->texts(idx); }

CleanNoisy open_eval_split(const Config& cfg, const std::string& run_dir, const std::string& split) {
  if (cfg.integer("train.synthetic_rows") > 0) return synthetic_from_config(cfg, split);
  const std::string dir = run_dir + "/cache/" + split;
  auto noisy = NoisyCache::open(dir);
  auto clean = CleanCache::open(dir, CleanCache::OfflineEvalOnly{});
  DAEI_CHECK(clean->size() == noisy->size(), "{}: {} clean rows for {} noisy rows", dir, clean->size(), noisy->size());
  CleanNoisy out;
  out.noisy = noisy->all_noisy();
  out.clean = clean->all_clean();
  out.sigma = noisy->sigma();
  return out;
}

std::function<at::Tensor(const std::vector<std::string>&, const std::vector<std::string>&)> clean_hypothesis_query(
    std::shared_ptr<Embedder> clean) {
  DAEI_CHECK(clean != nullptr, "clean_hypothesis_query: no clean embedder");
  return [clean](const std::vector<std::string>& texts, const std::vector<std::string>&) { return clean->embed(texts); };
}

}  // namespace daei
